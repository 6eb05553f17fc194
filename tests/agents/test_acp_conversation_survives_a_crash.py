"""When the ACP agent process dies, the next message continues the same conversation:
the bridge restores it with ``session/load`` when the new process advertises
``loadSession``, and tells the person when it could not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from acp_testkit import RecordingSink
from channelkit.agents.acp.bridge import CONTEXT_LOST_NOTICE
from channelkit.errors import AgentProcessError


def test_the_conversation_is_restored_with_session_load(
    make_fake_bridge: Any, recording_sink: RecordingSink, tmp_path: Path
) -> None:
    history = tmp_path / "history"
    history.mkdir()
    bridge = make_fake_bridge(agent_env={"FAKE_ACP_HISTORY": str(history)})
    assert bridge.prompt("s", "echo first", recording_sink) == "first"
    assert bridge.prompt("s", "echo second", recording_sink) == "second"
    pid = bridge.pid
    with pytest.raises(AgentProcessError):
        bridge.prompt("s", "die", recording_sink)
    # a new process: the earlier turns are still its context, no notice is shown
    assert bridge.prompt("s", "history", recording_sink) == ("history=echo first,echo second,die")
    assert bridge.pid not in (None, pid)


def test_a_conversation_that_cannot_be_loaded_says_so_and_starts_over(
    make_fake_bridge: Any, recording_sink: RecordingSink, tmp_path: Path
) -> None:
    history = tmp_path / "history"
    history.mkdir()
    bridge = make_fake_bridge(agent_env={"FAKE_ACP_HISTORY": str(history)})
    bridge.prompt("s", "echo first", recording_sink)
    with pytest.raises(AgentProcessError):
        bridge.prompt("s", "die", recording_sink)
    for stored in history.iterdir():  # the agent lost its store too
        stored.unlink()
    result = bridge.prompt("s", "history", recording_sink)
    assert result == CONTEXT_LOST_NOTICE + "history="
    chunks = [text for _sid, text in recording_sink.of("text_chunk")]
    assert CONTEXT_LOST_NOTICE in chunks  # streamed to the person, not only returned

"""When the ACP agent process dies, the next message continues the same conversation:
the bridge restores it with ``session/load`` when the new process advertises
``loadSession``, and tells the person when it could not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from acp_testkit import WAIT, RecordingSink
from channelkit.agents.acp.bridge import CONTEXT_LOST_NOTICE
from channelkit.errors import AgentProcessError
from channelkit.testing import RecordingChannel, inbound, make_channel, wait_until


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


def _converse(channel: RecordingChannel, text: str) -> Any:
    """The person sends ``text``; the run's result once it ended."""
    return channel.handle_inbound(inbound(text)).result(timeout=WAIT)


def test_the_person_is_told_when_a_new_agent_process_cannot_load_the_conversation(
    make_fake_bridge: Any, fake_agent_log: Path
) -> None:
    bridge = make_fake_bridge()  # these agent processes do not advertise loadSession
    channel = make_channel(bridge)
    try:
        assert _converse(channel, "echo first").status == "completed"
        assert channel.sent_texts == ["first"]
        assert _converse(channel, "die").status == "failed"
        assert bridge.agent_info.get("agentCapabilities", {}).get("loadSession") is not True

        assert _converse(channel, "echo again").status == "completed"
        # what reached the chat says the conversation starts over, then answers
        assert channel.sent_texts[-1] == CONTEXT_LOST_NOTICE + "again"
        assert "session/load" not in fake_agent_log.read_text()
        # only once: the conversation goes on in the new session without it
        assert _converse(channel, "echo more").status == "completed"
        assert channel.sent_texts[-1] == "more"
    finally:
        channel.close()


def test_the_replayed_conversation_is_not_shown_to_the_person_again(
    make_fake_bridge: Any, tmp_path: Path
) -> None:
    history = tmp_path / "history"
    history.mkdir()
    bridge = make_fake_bridge(agent_env={"FAKE_ACP_HISTORY": str(history)})
    channel = make_channel(bridge)
    try:
        assert _converse(channel, "echo first").status == "completed"
        assert _converse(channel, "die").status == "failed"
        chunks_before = len(channel.chunks)

        result = _converse(channel, "history")
        assert result.status == "completed"
        # session/load replayed the earlier turns (agent text included) to the bridge ...
        assert wait_until(
            lambda: "fake-acp: replayed 2 turns" in "".join(bridge.stderr_tail()), WAIT
        )
        # ... and the person sees only the answer to the new message
        assert channel.sent_texts[-1] == "history=echo first,die"
        new_chunks = [text for _chat, text, _sid, _seg in channel.chunks[chunks_before:]]
        assert "".join(new_chunks) == "history=echo first,die"
        assert not any("(replayed)" in text for text in channel.sent_texts)
    finally:
        channel.close()

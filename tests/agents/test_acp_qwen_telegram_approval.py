"""A real agent's tool permission answered by a Telegram button.

The Qwen Code CLI (``qwen --acp``) runs against the scripted OpenAI-compatible server,
whose model calls Qwen Code's own ``write_file`` tool. Qwen Code asks permission
(``session/request_permission`` with its own options); the Telegram adapter shows them
as an inline keyboard on the playground's Telegram emulator over real HTTP; the person
taps the allow button, the option id reaches Qwen Code, the file is written, and the
message shows the choice in place of the keyboard.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from acp_testkit import QWEN_UNAVAILABLE, qwen_command, qwen_env
from channelkit.playground import Playground
from openai_script_server import (
    ScriptedOpenAIServer,
    ScriptedReply,
    ToolCall,
    _content_text,
    _tool_names,
    last_message,
    tool_result_text,
)

pytestmark = pytest.mark.acp_real

TURN_TIMEOUT = 90.0
CONTENT = "written after a button tap\n"


def write_flow(path: Path) -> Callable[[Mapping[str, Any]], ScriptedReply]:
    """The model asks to write ``path`` once, then says it is done."""
    counter = itertools.count(1)

    def respond(body: Mapping[str, Any]) -> ScriptedReply:
        if tool_result_text(body, "call_write_") is not None:
            return ScriptedReply(chunks=("The file is written.",))
        message = last_message(body)
        text = _content_text(message.get("content")).lower()
        if (
            message.get("role") == "user"
            and "notes file" in text
            and "write_file" in _tool_names(body)
        ):
            arguments = {"file_path": str(path), "content": CONTENT}
            call = ToolCall("write_file", arguments, f"call_write_{next(counter)}")
            return ScriptedReply(chunks=("Writing the notes file.",), tool_call=call)
        return ScriptedReply(chunks=("ok",))

    return respond


def _wait(predicate: Callable[[], Any], what: str, timeout: float = TURN_TIMEOUT) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _approval(pg: Playground) -> dict[str, Any] | None:
    state = pg.emulator.state()
    for entry in state["timeline"]:
        view = state["views"].get(entry.get("card")) if entry["kind"] == "card" else None
        buttons = [b for row in (view or {}).get("keyboard", []) for b in row]
        if buttons and all(str(b["data"] or "").startswith("ca:") for b in buttons):
            return dict(view or {})
    return None


@pytest.fixture
def asking_qwen(openai_server: ScriptedOpenAIServer, tmp_path: Path) -> Iterator[Any]:
    """``qwen --acp --approval-mode default``: file edits and shell commands ask first."""
    if QWEN_UNAVAILABLE:
        pytest.skip(f"real ACP agent unavailable: {QWEN_UNAVAILABLE}")
    from channelkit.agents.acp import AcpBridge

    workdir = tmp_path / "work"
    workdir.mkdir()
    command = [*qwen_command(openai_server.base_url, openai_server.model)]
    bridge = AcpBridge(
        [*command, "--approval-mode", "default"],
        cwd=workdir,
        env=qwen_env(tmp_path / "home"),
        request_timeout=60.0,
        prompt_timeout=120.0,
        close_timeout=5.0,
    )
    try:
        yield bridge
    finally:
        bridge.close()


def test_qwen_write_file_permission_is_approved_by_a_telegram_button(
    asking_qwen: Any, openai_server: ScriptedOpenAIServer, tmp_path: Path
) -> None:
    target = tmp_path / "work" / "notes.txt"
    openai_server.responder = write_flow(target)
    answers: list[Any] = []
    respond = asking_qwen.respond_to_permission

    def recording(request_id: str, response: Any) -> bool:
        answers.append(response)
        return bool(respond(request_id, response))

    asking_qwen.respond_to_permission = recording
    with Playground(agent=asking_qwen, model="scripted-model", platform="telegram") as pg:
        _, ack = pg.emulator.send_user_message("Please write the notes file.")
        assert ack.status == 200
        prompt = _wait(lambda: _approval(pg), "the approval keyboard")
        labels = [b["text"] for row in prompt["keyboard"] for b in row]
        # Qwen Code's own options, in its order (allow all edits, allow, reject)
        assert "Allow" in labels and "Reject" in labels and len(labels) >= 3
        assert "write_file" in prompt["text"] and "/approve" in prompt["text"]
        assert not target.exists()  # nothing written before the tap
        allow = "Allow"

        result = pg.emulator.card_action(prompt["id"], "tap", {"text": allow})
        assert result.status == 200
        _wait(lambda: target.exists(), "the written file")
        assert target.read_text() == CONTENT
        # the option id of the tapped button reached Qwen Code, once
        assert answers == [{"outcome": {"outcome": "selected", "optionId": "proceed_once"}}]
        edited = _wait(
            lambda: (v := pg.emulator.state()["views"][prompt["id"]])["edited"] and v,
            "the keyboard edited to the choice",
            timeout=15,
        )
        assert edited["keyboard"] == [] and edited["text"].endswith(f"✅ {allow}")
        _wait(
            lambda: any(
                "The file is written." in str(v.get("text"))
                for v in pg.emulator.state()["views"].values()
            ),
            "the continuation",
        )

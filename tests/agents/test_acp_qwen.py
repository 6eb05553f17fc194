"""AcpBridge against a real ACP agent nobody here wrote: the Qwen Code CLI.

``qwen --acp`` runs offline against the scripted OpenAI-compatible server
(tests/agents/openai_script_server.py): the model streams text, calls the
``ask_user_question`` tool, and after the tool result streams a continuation quoting the
answers Qwen Code reported back. Skipped (with the reason) only when node/npm/qwen are
missing; ``.ci/install-node-tools`` installs them.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from acp_testkit import RecordingSink, process_group_gone, process_is_reaped
from channelkit.agents.base import PermissionRequest
from openai_script_server import DEFAULT_QUESTIONS, ScriptedOpenAIServer, last_message

pytestmark = pytest.mark.acp_real

TURN_TIMEOUT = 90.0
ANSWERS = {"0": "Blue", "1": "Tests, Docs"}


class PromptThread(threading.Thread):
    def __init__(self, bridge: Any, session_id: str, text: str, sink: RecordingSink) -> None:
        super().__init__(daemon=True)
        self.call = (bridge, session_id, text, sink)
        self.result: str | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        bridge, session_id, text, sink = self.call
        try:
            self.result = bridge.prompt(session_id, text, sink)
        except BaseException as exc:
            self.error = exc


def test_qwen_question_round_trip(qwen_bridge: Any, openai_server: ScriptedOpenAIServer) -> None:
    sink = RecordingSink()
    turn = PromptThread(qwen_bridge, "dm:alice", "Please ask me about the widget.", sink)
    turn.start()

    request: PermissionRequest = sink.wait_for("permission_request", timeout=TURN_TIMEOUT)
    kinds = sink.kinds()
    first_request = kinds.index("permission_request")
    # streamed text first, then a response boundary immediately before the request
    assert "text_chunk" in kinds[:first_request]
    assert kinds[first_request - 1] == "response_boundary"
    assert sink.of("response_boundary") == ["dm:alice"]
    assert sink.text() == "Let me check a couple of things first."

    assert request.session_id == "dm:alice"
    meta = request.tool_call["_meta"]
    assert meta["qwenInteractionKind"] == "user_question"
    assert meta["toolName"] == "ask_user_question"
    assert [(q["header"], q["question"]) for q in meta["qwenQuestions"]] == [
        (q["header"], q["question"]) for q in DEFAULT_QUESTIONS
    ]
    assert meta["qwenQuestions"][1]["multiSelect"] is True
    assert [o["label"] for o in meta["qwenQuestions"][0]["options"]] == ["Blue", "Green"]
    submit = next(o for o in request.options if o.kind == "allow_once")
    assert submit.option_id == "proceed_once"

    assert qwen_bridge.respond_to_permission(
        request.request_id,
        {"outcome": {"outcome": "selected", "optionId": submit.option_id}, "answers": ANSWERS},
    )
    turn.join(TURN_TIMEOUT)
    assert not turn.is_alive(), "qwen did not finish the turn"
    assert turn.error is None, turn.error

    # the continuation quotes the answers the agent received through the ACP result
    assert turn.result is not None
    assert turn.result.startswith("Let me check a couple of things first.")
    continuation = turn.result.split("Thanks! Continuing with: ", 1)[1]
    assert "**Color**: Blue" in continuation
    assert "**Extras**: Tests, Docs" in continuation
    assert continuation.endswith("Done.")
    assert sink.text() == turn.result
    assert kinds.index("response_boundary") > kinds.index("text_chunk")
    assert sink.of("permission_resolved") == []
    assert sink.of("session_died") == []

    # the model saw the answers as the ask_user_question tool result
    tool_results = [r for r in openai_server.requests if last_message(r).get("role") == "tool"]
    assert tool_results, "qwen never sent the tool result back to the model"

    # tool calls were reported (ask_user_question shows up as a tool call)
    assert any(e.tool_call_id == "call_ask_1" for e in sink.of("tool_call"))

    pid = qwen_bridge.pid
    assert pid is not None
    qwen_bridge.close()
    assert process_is_reaped(pid)
    assert process_group_gone(pid), "qwen left child processes behind"


def test_qwen_declined_then_cancelled_question_then_plain_turn(qwen_bridge: Any) -> None:
    # 1. declining the question ("cancel" option) ends Qwen Code's turn
    declined: list[str] = []

    def decline(request: PermissionRequest) -> None:
        declined.append(request.request_id)
        assert qwen_bridge.respond_to_permission(
            request.request_id, {"outcome": {"outcome": "selected", "optionId": "cancel"}}
        )

    sink = RecordingSink(on_permission=decline)
    text = qwen_bridge.prompt("s", "Ask me something.", sink)
    assert len(declined) == 1
    assert text == "Let me check a couple of things first."
    assert sink.of("permission_resolved") == []

    # 2. cancelling the session while the question is pending settles it cancelled
    sink = RecordingSink()
    turn = PromptThread(qwen_bridge, "s", "Ask me again.", sink)
    turn.start()
    request = sink.wait_for("permission_request", timeout=TURN_TIMEOUT)
    assert qwen_bridge.cancel_session("s")
    resolved = sink.wait_for("permission_resolved")
    assert (resolved.request_id, resolved.outcome) == (request.request_id, {"outcome": "cancelled"})
    turn.join(TURN_TIMEOUT)
    assert not turn.is_alive() and turn.error is None, turn.error
    assert not qwen_bridge.respond_to_permission(
        request.request_id, {"outcome": {"outcome": "selected", "optionId": "proceed_once"}}
    )

    # 3. the same ACP session still answers a plain turn
    assert qwen_bridge.prompt("s", "Just say something.", RecordingSink()) == "ok"

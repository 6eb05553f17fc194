"""A real agent nobody here wrote, through the whole stack.

The Qwen Code CLI (``qwen --acp``) runs against the scripted OpenAI-compatible server;
channelkit's AcpBridge drives it; the DingTalk adapter projects the run onto the DingTalk
emulator of the playground over real HTTP (generated clients, signed callbacks). The
question becomes a question card, the answers submitted through the card reach the agent
as the ``session/request_permission`` result, the continuation opens a new status card and
the run completes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from channelkit.playground import Playground
from openai_script_server import ScriptedOpenAIServer

pytestmark = pytest.mark.acp_real

TURN_TIMEOUT = 90.0
STATUS_TEMPLATE = "675cde2f-f526-40cb-b828-f5b2b57b8b77.schema"
QUESTION_TEMPLATE = "c2a6355b-9724-4f7e-9653-d33fcb3311bb.schema"


def _wait(predicate: Callable[[], Any], what: str, timeout: float = TURN_TIMEOUT) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _cards(pg: Playground) -> list[dict[str, Any]]:
    state = pg.emulator.state()
    return [state["views"][e["card"]] for e in state["timeline"] if e["kind"] == "card"]


def test_qwen_question_card_round_trip_through_dingtalk(
    qwen_bridge: Any, openai_server: ScriptedOpenAIServer
) -> None:
    with Playground(agent=qwen_bridge, model="scripted-model") as pg:
        _, ack = pg.emulator.send_user_message("Please ask me about the widget.")
        assert ack.status == 200

        question = _wait(
            lambda: next(
                (c for c in _cards(pg) if c["kind"] == "question" and c["state"] == "pending"),
                None,
            ),
            "the question card",
        )
        cards = _cards(pg)
        assert [c["kind"] for c in cards] == ["status", "question"]
        before = cards[0]
        assert before["state"] == "completed"  # text before the question stays as history
        assert "Let me check a couple of things first." in before["content"]
        assert "Waiting for input" not in str(before)

        # Submit the form through the card, as the person would: one click.
        result = pg.emulator.card_action(
            question["id"], "submit", {"0": "Blue", "1": ["Tests", "Docs"]}
        )
        assert result.status == 200
        _wait(
            lambda: pg.emulator.state()["views"][question["id"]]["state"] == "submitted",
            "the submitted question card",
            timeout=15,
        )

        continuation = _wait(
            lambda: next(
                (c for c in _cards(pg)[2:] if c["kind"] == "status" and c["state"] == "completed"),
                None,
            ),
            "the continuation status card",
        )
        # the answers reached the agent through the original permission request
        assert "**Color**: Blue" in continuation["content"]
        assert "**Extras**: Tests, Docs" in continuation["content"]
        assert continuation["id"] != before["id"]
        # the new card holds only the text after the question
        assert "Let me check a couple of things first." not in continuation["content"]

        creates = pg.emulator.calls("/v1.0/card/instances/createAndDeliver")
        templates = [c["body"]["cardTemplateId"] for c in creates]
        assert templates == [STATUS_TEMPLATE, QUESTION_TEMPLATE, STATUS_TEMPLATE]
        # the model saw the answers in the tool result of the original call
        tool_results = [
            m
            for request in openai_server.requests
            for m in request.get("messages", [])
            if m.get("role") == "tool"
        ]
        assert tool_results and "Blue" in str(tool_results[-1])

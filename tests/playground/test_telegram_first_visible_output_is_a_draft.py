"""Over HTTP against the Telegram emulator: the first thing the person sees of an answer
is a draft, shown after the agent's first chunk and before the answer is complete; the
final message then replaces the draft (order and presence, never timing)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from channelkit.agents import FunctionAgent
from channelkit.agents.function import Turn
from channelkit.playground import Playground
from playground_helpers import calls, send, state, wait

FIRST, SECOND = "First part of the answer. ", "And the rest."


class GatedAgent:
    def __init__(self) -> None:
        self.said_first = threading.Event()
        self.release = threading.Event()

    def __call__(self, turn: Turn) -> str | None:
        turn.say(FIRST)
        self.said_first.set()
        self.release.wait(10.0)
        turn.say(SECOND)
        return None


@pytest.fixture
def setup() -> Iterator[tuple[Playground, GatedAgent]]:
    agent = GatedAgent()
    with Playground(platform="telegram", agent=FunctionAgent(agent), ingress="webhook") as pg:
        yield pg, agent
        agent.release.set()


def _methods(pg: Playground, since: int) -> list[str]:
    return [c["path"].rsplit("/", 1)[1] for c in calls(pg, since)]


def test_the_first_visible_output_is_a_draft_after_the_first_chunk(setup) -> None:  # type: ignore[no-untyped-def]
    pg, agent = setup
    since = calls(pg)[-1]["seq"]
    send(pg, "hello")
    assert agent.said_first.wait(10.0)
    shown = wait(lambda: (state(pg).get("draft") or {}).get("text") == FIRST, "the draft")
    assert shown
    assert "sendMessage" not in _methods(pg, since)  # the answer is not complete yet
    drafts = [c["body"] for c in calls(pg, since) if c["path"].endswith("/sendMessageDraft")]
    assert drafts[0]["text"] == "" and drafts[-1]["text"] == FIRST  # placeholder, then text
    agent.release.set()
    wait(lambda: "sendMessage" in _methods(pg, since), "the final message")
    methods = _methods(pg, since)
    assert methods.index("sendMessageDraft") < methods.index("sendMessage")
    final = [c["body"]["text"] for c in calls(pg, since) if c["path"].endswith("/sendMessage")]
    assert final == [FIRST + SECOND]
    wait(lambda: state(pg).get("draft") is None, "the draft replaced by the message")
    methods = _methods(pg, since)
    assert methods[methods.index("sendMessage") :].count("sendMessageDraft") == 0

"""While a run waits for the person, the playground's view state says so and the page's
"agent is working" indicator has nothing to show; once answered, the run works again.

Over real HTTP against ``/_emulator/state`` on every emulated platform. The agent asks
one question (or, on DingTalk, a text permission prompt), then keeps working until the
test lets it finish, so "working again" is observed while the run continues.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from channelkit.agents.base import PermissionOption
from channelkit.agents.function import FunctionAgent, Question, Turn
from channelkit.playground import Playground
from playground_helpers import click, new_view, send, state, view, wait

QUESTION = Question("Where to?", [("North", ""), ("South", "")], header="Way")


def working(current: dict[str, Any]) -> bool:
    """What playground.js shows "agent is working" for (see its ``apply``)."""
    running = any(v.get("state") == "running" for v in current["views"].values())
    reacting = any(current.get("reactions", {}).values())
    return not current["waiting"] and (running or reacting or bool(current["typing"]))


TEXT_PROMPT_OPTIONS = tuple(
    PermissionOption(f"opt-{i}", name, kind)
    for i, (name, kind) in enumerate(
        [
            ("Allow", "allow_once"),
            ("Allow always", "allow_always"),
            ("Allow for this folder", "allow_always"),
            ("Reject", "reject_once"),
            ("Reject always", "reject_always"),
        ]
    )
)


class Agent:
    """Asks (or requests permission), says something, then works until released."""

    def __init__(self, permission: bool = False) -> None:
        self.release = threading.Event()
        self.answered = threading.Event()
        self.permission = permission

    def __call__(self, turn: Turn) -> str:
        if self.permission:
            # five options: more than an approval card holds, so the text prompt is used
            turn.request_permission("Run ls", options=TEXT_PROMPT_OPTIONS)
        else:
            turn.ask([QUESTION])
        self.answered.set()
        turn.say("Going on. ")
        self.release.wait(30)
        return "done"


def _answer(pg: Playground, question: dict[str, Any]) -> None:
    """The person answers the question the way the page's click does (again if the click
    raced the question's activation)."""
    for attempt in range(5):
        if pg.platform == "telegram":
            data = question["keyboard"][1][0]["data"]  # "South"
            click(pg, question["id"], "tap", {"data": data})
        else:
            click(pg, question["id"], "submit", {"0": "South"})
        try:
            wait(lambda: not view(pg, question["id"]).get("awaitsAnswer"), "the answer", 2.0)
            return
        except AssertionError:
            if attempt == 4:
                raise


@pytest.mark.parametrize("platform", ["dingtalk", "feishu", "telegram"])
def test_waiting_question_hides_the_working_indicator_until_answered(platform: str) -> None:
    agent = Agent()
    bridge = FunctionAgent(agent, question_timeout=600.0)
    with Playground(platform=platform, agent=bridge) as pg:
        try:
            start = send(pg, "go")
            kind = "message" if platform == "telegram" else "question"
            question = new_view(pg, start, kind, "pending")
            eye = platform == "dingtalk"  # its reaction stays on for the whole run

            def waiting() -> dict[str, Any] | None:
                s = state(pg)
                shown = s["waitingCards"] and (not eye or any(s["reactions"].values()))
                return s if shown else None

            current = wait(waiting, "the waiting state (and DingTalk's eye reaction)")
            assert current["waitingCards"] == [question["id"]]
            assert current["waiting"] is True and not working(current)
            _answer(pg, question)
            assert agent.answered.wait(10)
            after = wait(lambda: (s := state(pg)) and working(s) and s, "working again")
            assert after["waiting"] is False and after["waitingCards"] == []
            assert not agent.release.is_set()  # the run is still going
        finally:
            agent.release.set()


def test_text_permission_prompt_hides_the_working_indicator_until_approved() -> None:
    agent = Agent(permission=True)
    bridge = FunctionAgent(agent, question_timeout=600.0)
    with Playground(platform="dingtalk", agent=bridge) as pg:
        try:
            send(pg, "go")
            current = wait(
                lambda: (s := state(pg))["waiting"] and any(s["reactions"].values()) and s,
                "the permission prompt, the eye reaction on",
            )
            assert current["requestPending"] is True and current["waitingCards"] == []
            assert not working(current)
            send(pg, "/approve")
            assert agent.answered.wait(10)
            after = wait(lambda: (s := state(pg)) and working(s) and s, "working again")
            assert after["requestPending"] is False
        finally:
            agent.release.set()

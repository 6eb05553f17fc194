"""A Slack form never shows success before the agent accepted its answer: when the
owner's ``/deny`` wins the race with the form's Submit, the form ends ``Cancelled`` (the
winner's state), is updated once, never reads ``Submitted``, and the conversation is
told once that the question was already answered.

Each interleaving is forced with events (no sleeps), on the real ``SlackChannel``
against the Slack emulator over real HTTP, with both ingress modes (Events API and
Socket Mode):

* the ``/deny`` reached the agent and is held there when the owner clicks Submit: the
  form's answer is refused at once, and the form waits for the deny's settlement;
* the owner's Submit is claimed first, but its answer reaches the request only after the
  ``/deny`` settled it;
* the run is cancelled (``/cancel``) while the Submit's answer is on its way: the form
  ends ``Cancelled`` without the already-answered notice (the run's end says so).
"""

from __future__ import annotations

import queue
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from channelkit.agents.function import FunctionAgent, Question, QuestionError, Turn
from channelkit.core.catalog import messages
from channelkit.platforms.slack.questions import TEXT_ALREADY_ANSWERED

from tests.platforms.slack.slack_emulator import (
    LONG,
    HeldResponder,
    ObservedContexts,
    SlackRig,
)

QUESTION = Question("Deploy where?", ["Prod", "Staging"], header="Env")


class Asker:
    """Asks one question at once and records how it ended."""

    def __init__(self) -> None:
        self.outcomes: queue.Queue[Any] = queue.Queue()

    def __call__(self, turn: Turn) -> str:
        try:
            self.outcomes.put(turn.ask([QUESTION]))
        except QuestionError as exc:
            self.outcomes.put(exc)
        return "finished"

    def outcome(self) -> Any:
        return self.outcomes.get(timeout=LONG)


@dataclass
class Race:
    rig: SlackRig
    asker: Asker
    agent: FunctionAgent

    def form(self) -> dict[str, Any]:
        start = self.rig.send("deploy please")
        return self.rig.pending_form(start)

    def submit(self, form: dict[str, Any]) -> None:
        self.rig.click(form["id"], "submit", self.rig.choices(form, "Prod"))

    def shows(self, form: dict[str, Any], label: str) -> None:
        """The form ended (updated in place, no inputs left) showing ``label``."""
        shown = self.rig.wait(
            lambda: (view := self.rig.view(form["id"]))["kind"] == "message" and view,
            "the form to end",
        )
        assert shown["text"] == label
        assert shown["keyboard"] == []

    def notices(self) -> list[str]:
        return [t for t in self.rig.texts() if t == TEXT_ALREADY_ANSWERED]


@pytest.fixture(params=["events", "socket"])
def race(request: pytest.FixtureRequest) -> Iterator[Race]:
    asker = Asker()
    agent = FunctionAgent(asker, question_timeout=600.0, name="asker")
    try:
        with SlackRig.start(agent, ingress=request.param) as rig:
            yield Race(rig, asker, agent)
    finally:
        agent.close()


def _assert_deny_won(race: Race, form: dict[str, Any], held: HeldResponder) -> None:
    outcome = race.asker.outcome()
    assert isinstance(outcome, QuestionError) and "cancelled" in str(outcome)
    race.shows(form, "Cancelled")
    race.rig.wait(race.notices, "the already-answered notice")
    race.rig.wait(lambda: not race.rig.channel.pending_request_ids(), "no request left")
    assert race.rig.channel.wait_idle(LONG)
    updates = race.rig.form_updates(form["id"])
    assert [u["text"] for u in updates] == ["Cancelled"]  # once, never "Submitted"
    assert "Prod" not in str(updates[0]["blocks"])  # the losing answer is not shown
    assert len(race.notices()) == 1
    ((_, answer),) = held.calls  # one answer reached the agent: the deny's
    assert "answers" not in answer and answer["outcome"]["optionId"] == "cancel"
    assert race.asker.outcomes.empty()


def test_deny_held_by_the_agent_when_the_form_is_submitted(race: Race) -> None:
    held = HeldResponder(race.agent)
    observed = ObservedContexts(race.rig.channel)
    form = race.form()
    race.rig.send("/deny")
    assert held.entered.wait(LONG)  # the deny holds the request inside the agent
    race.submit(form)
    assert observed.returned.wait(LONG)  # the form's answer was refused ...
    assert observed.results == [False]
    assert race.rig.view(form["id"]).get("text") != "Submitted"  # ... and shows no success
    held.release()
    _assert_deny_won(race, form, held)


def test_deny_settles_after_the_submit_was_claimed(race: Race) -> None:
    held = HeldResponder(race.agent)
    held.release()  # nothing is held in the agent here
    observed = ObservedContexts(race.rig.channel)
    observed.hold.clear()
    form = race.form()
    race.submit(form)  # ACKed: claimed; its answer waits before reaching the request
    assert observed.entered.wait(LONG)
    race.rig.send("/deny")
    race.rig.wait(lambda: held.calls, "the deny to reach the agent")
    race.rig.wait(lambda: not race.rig.channel.pending_request_ids(), "the deny to settle")
    observed.hold.set()  # now the form's answer reaches the request
    assert observed.returned.wait(LONG)
    assert observed.results == [False]
    _assert_deny_won(race, form, held)


def test_a_run_cancelled_while_the_submit_is_on_its_way_ends_the_form_cancelled(
    race: Race,
) -> None:
    observed = ObservedContexts(race.rig.channel)
    observed.hold.clear()
    form = race.form()
    race.submit(form)
    assert observed.entered.wait(LONG)
    race.rig.send("/cancel")
    race.rig.wait(lambda: not race.rig.channel.pending_request_ids(), "the run to end")
    observed.hold.set()
    assert observed.returned.wait(LONG)
    assert observed.results == [False]
    race.shows(form, "Cancelled")
    assert race.rig.channel.wait_idle(LONG)
    assert [u["text"] for u in race.rig.form_updates(form["id"])] == ["Cancelled"]
    assert race.notices() == []  # the run's end says so; no already-answered notice


def test_the_already_answered_notice_is_in_the_owners_language() -> None:
    """The conversation is told in the form owner's language (the channel's ``locale``
    here), as the form itself is (it was English whatever the locale)."""
    asker = Asker()
    agent = FunctionAgent(asker, question_timeout=600.0, name="asker")
    german = messages("de").text(TEXT_ALREADY_ANSWERED)
    assert german != TEXT_ALREADY_ANSWERED
    try:
        with SlackRig.start(agent, channel_options={"locale": "de"}) as rig:
            race = Race(rig, asker, agent)
            held = HeldResponder(agent)
            form = race.form()
            rig.send("/deny")
            assert held.entered.wait(LONG)
            race.submit(form)
            held.release()
            rig.wait(lambda: german in rig.texts(), "the already-answered notice")
            assert rig.channel.wait_idle(LONG)
            assert rig.texts().count(german) == 1
            assert TEXT_ALREADY_ANSWERED not in rig.texts()
    finally:
        agent.close()

"""The shared native-input rules (``platforms/common/native_input.py``): one live native
input per session, owner and run; and a claimed answer's responder arbitrated against
the request's settlement, whatever the interleaving (each one forced with events)."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

from channelkit.core.types import SettlementReason
from channelkit.platforms.common.native_input import (
    AnswerRace,
    RaceResult,
    answer_response,
    cancel_request,
    input_scope,
    reserve_native_input,
    tell_already_answered,
    winner_state,
)
from channelkit.platforms.common.registry import MemoryCardRegistry
from channelkit.runtime import FakeClock

WAIT = 10.0


def _context(run: str = "run-1", owner: str = "U1", session: str = "s-1") -> Any:
    return SimpleNamespace(session_id=session, run_id=run, owner=SimpleNamespace(id=owner))


def test_one_live_native_input_per_session_owner_and_run() -> None:
    registry: MemoryCardRegistry[Any, Any] = MemoryCardRegistry(FakeClock(), maxsize=3)
    first = input_scope(_context())
    assert first == ("s-1", "U1", "run-1")
    assert reserve_native_input(registry, "a", "form-a", first)
    assert not reserve_native_input(registry, "b", "form-b", input_scope(_context()))
    assert reserve_native_input(registry, "c", "form-c", input_scope(_context(run="run-2")))
    assert reserve_native_input(registry, "d", "form-d", input_scope(_context(owner="U2")))
    assert registry.get("b") is None and len(registry) == 3
    # full: the text prompt, even for a free scope
    assert not reserve_native_input(registry, "e", "form-e", input_scope(_context(run="run-3")))
    registry.remove("a")  # the first form ended: its run may show a form again
    assert reserve_native_input(registry, "f", "form-f", first)


def test_the_winner_state_of_each_settlement() -> None:
    assert winner_state(SettlementReason.RESOLVED_OUTSIDE_PRESENTER) == "expired"
    assert winner_state(SettlementReason.CANCELLED) == "cancelled"
    assert winner_state(SettlementReason.RUN_CANCELLED) == "cancelled"
    assert RaceResult("accepted").state("submitted") == "submitted"
    assert RaceResult("refused").state("submitted") == "expired"
    assert RaceResult("lost", "cancelled").state("submitted") == "cancelled"


def test_an_accepted_answer_settles_the_request_itself() -> None:
    race = AnswerRace()

    def respond() -> bool:
        assert not race.settled(SettlementReason.RESOLVED_OUTSIDE_PRESENTER)  # its own
        return True

    assert race.respond(respond) == RaceResult("accepted")
    assert not race.settled(SettlementReason.CANCELLED)  # decided: ignored


def test_the_agents_refusal_and_a_failing_responder_are_refused() -> None:
    race = AnswerRace()

    def refused() -> bool:
        race.settled(SettlementReason.CANCELLED)  # core settles a refused answer itself
        return False

    assert race.respond(refused) == RaceResult("refused")

    def failing() -> bool:
        raise RuntimeError("bridge down")

    assert AnswerRace().respond(failing) == RaceResult("refused")


def test_settled_before_the_responder_started_loses_without_answering() -> None:
    race = AnswerRace()
    assert not race.settled(SettlementReason.CANCELLED)  # the responder decides
    called: list[bool] = []
    assert race.respond(lambda: called.append(True)) == RaceResult("lost", "cancelled")
    assert called == []


def test_settled_by_another_thread_while_the_responder_runs() -> None:
    race = AnswerRace()
    inside, settled = threading.Event(), threading.Event()

    def respond() -> bool:
        inside.set()
        assert settled.wait(WAIT)
        return False  # the request was taken meanwhile

    def deny() -> None:
        assert inside.wait(WAIT)
        assert not race.settled(SettlementReason.CANCELLED)  # the responder sees it
        settled.set()

    other = threading.Thread(target=deny)
    other.start()
    assert race.respond(respond) == RaceResult("lost", "cancelled")
    other.join(WAIT)


def test_refused_while_another_answer_holds_the_request_waits_for_its_settlement() -> None:
    race = AnswerRace()
    assert race.respond(lambda: False) == RaceResult("waiting")
    assert race.settled(SettlementReason.RESOLVED_OUTSIDE_PRESENTER)  # end it now
    assert not race.give_up()  # the settlement came: the deadline changes nothing
    assert not race.settled(SettlementReason.CANCELLED)


def test_a_winner_that_never_settles_gives_up_once_at_the_deadline() -> None:
    race = AnswerRace()
    assert race.respond(lambda: False) == RaceResult("waiting")
    assert race.give_up()
    assert not race.give_up()
    assert not race.settled(SettlementReason.CANCELLED)  # too late: already expired


def test_a_responder_failing_after_another_answer_won_shows_the_winner() -> None:
    race = AnswerRace()
    inside, settled = threading.Event(), threading.Event()

    def respond() -> bool:
        inside.set()
        assert settled.wait(WAIT)
        raise RuntimeError("bridge gone")  # failed, but the request was taken meanwhile

    def deny() -> None:
        assert inside.wait(WAIT)
        assert not race.settled(SettlementReason.CANCELLED)  # the responder sees it
        settled.set()

    other = threading.Thread(target=deny)
    other.start()
    assert race.respond(respond) == RaceResult("lost", "cancelled")
    other.join(WAIT)


def test_the_already_answered_notice_is_not_told_when_the_run_ended() -> None:
    assert tell_already_answered(SettlementReason.CANCELLED)
    assert tell_already_answered(SettlementReason.RESOLVED_OUTSIDE_PRESENTER)
    assert not tell_already_answered(SettlementReason.RUN_CANCELLED)


def test_the_answer_format_of_every_native_input() -> None:
    assert answer_response("proceed_once", {"0": "Blue", "1": "Logs, Metrics"}) == {
        "outcome": {"outcome": "selected", "optionId": "proceed_once"},
        "answers": {"0": "Blue", "1": "Logs, Metrics"},
    }
    assert answer_response("proceed_once", None) == {"outcome": {"outcome": "cancelled"}}


def test_cancelling_an_expired_request_never_raises() -> None:
    sent: list[Any] = []
    cancel_request(sent.append, "req-1")
    assert sent == [{"outcome": {"outcome": "cancelled"}}]

    def failing(response: Any) -> bool:
        raise RuntimeError("bridge down")

    cancel_request(failing, "req-2")  # logged, not raised

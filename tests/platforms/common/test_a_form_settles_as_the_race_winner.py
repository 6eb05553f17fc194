"""The settlement glue every native question form shares (`FormRace` in
``platforms/common/native_input.py``): a claimed answer ends its form exactly once in
what the race decided, the loser is told, a winner whose settlement is late is waited
for on one scheduler timer (never on a blocked worker) and the form's deadline gives up
as expired.

Driven with a `FakeClock`, a real `Scheduler` and a one-worker pool: the pool being
able to run the form's ending while the answer waits is the proof that the wait holds
no worker.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from channelkit.core.types import SettlementReason
from channelkit.platforms.common.native_input import FormRace, answer_response
from channelkit.runtime import FakeClock, Scheduler, WorkerPool

WAIT = 10.0
LIFETIME = 60.0
OWN = "own answer"


class Request:
    """A captured input request as core keeps it: one-shot, its settlement told to the
    form's listener (`FormRace.on_settled`)."""

    def __init__(self, race: FormRace, *, accept: bool = True) -> None:
        self.race = race
        self.accept = accept
        self._lock = threading.Lock()
        self.winner: str | None = None
        self.responses: list[dict[str, Any]] = []

    def hold(self, reason: str) -> bool:
        """Another surface (a ``/deny``, an answer typed as text) takes the request; its
        settlement is still on its way to the form."""
        with self._lock:
            if self.winner is not None:
                return False
            self.winner = reason
            return True

    def deliver(self) -> bool:
        """The held settlement reaches the form's listener."""
        assert self.winner is not None
        return self.race.on_settled(self.winner)

    def settle(self, reason: str) -> bool:
        """Another surface settles the request (taken and told at once)."""
        return self.hold(reason) and self.deliver()

    def respond(self, response: dict[str, Any]) -> bool:
        """The one-shot responder the form's answer goes through."""
        with self._lock:
            if self.winner is not None:
                return False
            self.winner = OWN
            self.responses.append(response)
        # core settles the request itself (an accepted answer, or the agent's refusal)
        # and tells the listener on the responder's thread
        self.race.on_settled(SettlementReason.RESOLVED_OUTSIDE_PRESENTER)
        return self.accept


class Form:
    """The platform's side: the form ends once (compare-and-set), the loser's notice."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.ended: list[str] = []  # every state the form was ended in (at most one)
        self.attempts = 0  # every call of end()
        self.told = 0
        self.threads: list[str] = []

    def end(self, state: str) -> bool:
        with self._lock:
            self.attempts += 1
            self.threads.append(threading.current_thread().name)
            if self.ended:
                return False
            self.ended.append(state)
            return True

    def tell_lost(self) -> None:
        with self._lock:
            self.told += 1


class Env:
    def __init__(self) -> None:
        self.clock = FakeClock()
        self.pool = WorkerPool(1, name="form-lane")
        self.scheduler = Scheduler(self.pool, clock=self.clock)
        self.deadline = self.clock.now() + LIFETIME

    def answer(
        self,
        race: FormRace,
        request: Request,
        form: Form,
        claimed: str = "submitted",
        *,
        scheduler: Any = None,
        winner: Callable[[str], str] | None = None,
    ) -> None:
        """The claimed form's job (on the form's lane in a presenter)."""
        answers = {"0": "Blue"} if claimed == "submitted" else None
        response = answer_response("submit", answers)
        extra: dict[str, Any] = {} if winner is None else {"winner": winner}
        race.answer(
            lambda: request.respond(response),
            claimed=claimed,
            end=form.end,
            tell_lost=form.tell_lost,
            run=self.pool.post,
            scheduler=scheduler or self.scheduler,
            clock=self.clock,
            deadline=self.deadline,
            request_id="req-1",
            **extra,
        )

    def idle(self) -> None:
        assert self.pool.wait_idle(WAIT), "the form's lane never went idle"


@pytest.fixture
def env() -> Iterator[Env]:
    e = Env()
    yield e
    e.scheduler.stop()
    e.pool.shutdown(timeout=WAIT)


def test_an_accepted_answer_ends_the_form_in_its_own_state_once(env: Env) -> None:
    for claimed in ("submitted", "cancelled"):
        race, form = FormRace(), Form()
        request = Request(race)
        env.answer(race, request, form, claimed)
        env.idle()
        assert form.ended == [claimed] and form.attempts == 1 and form.told == 0
        assert len(request.responses) == 1
        assert not race.on_settled(SettlementReason.CANCELLED)  # decided: ignored
        env.clock.advance(LIFETIME + 1)
        env.idle()
        assert form.attempts == 1 and env.scheduler.pending_count() == 0


def test_a_refused_answer_ends_the_form_expired_and_tells_nobody(env: Env) -> None:
    race, form = FormRace(), Form()
    env.answer(race, Request(race, accept=False), form)
    env.idle()
    assert form.ended == ["expired"] and form.attempts == 1 and form.told == 0
    assert env.scheduler.pending_count() == 0


def test_a_failing_responder_ends_the_form_expired(env: Env) -> None:
    race, form = FormRace(), Form()

    def down() -> bool:
        raise RuntimeError("bridge down")

    race.answer(
        down,
        claimed="submitted",
        end=form.end,
        tell_lost=form.tell_lost,
        run=env.pool.post,
        scheduler=env.scheduler,
        clock=env.clock,
        deadline=env.deadline,
    )
    assert form.ended == ["expired"] and form.told == 0


def test_an_answer_claimed_after_the_settlement_shows_the_winner_and_tells_the_loser(
    env: Env,
) -> None:
    race, form = FormRace(), Form()
    request = Request(race)
    # a /deny won before the claim: left to the presenter's own path (not claimed yet)
    assert not request.settle(SettlementReason.CANCELLED)
    env.answer(race, request, form)
    env.idle()
    assert request.responses == []  # the responder is never called
    assert form.ended == ["cancelled"] and form.attempts == 1 and form.told == 1

    race, form = FormRace(), Form()
    request = Request(race)
    request.settle(SettlementReason.RESOLVED_OUTSIDE_PRESENTER)  # answered as text
    env.answer(race, request, form)
    assert form.ended == ["expired"] and form.told == 1


def test_the_runs_own_cancel_is_shown_but_not_told(env: Env) -> None:
    race, form = FormRace(), Form()
    request = Request(race)
    request.settle(SettlementReason.RUN_CANCELLED)
    env.answer(race, request, form)
    assert form.ended == ["cancelled"] and form.told == 0


def test_a_concurrent_cancel_wins_over_the_later_submit(env: Env) -> None:
    """The ``/deny`` settles while the Submit's responder runs: the form shows
    Cancelled, never Submitted, and the conversation is told once."""
    race, form = FormRace(), Form()
    request = Request(race)
    real_respond = request.respond

    def respond_while_denied(response: dict[str, Any]) -> bool:
        deny = threading.Thread(target=request.settle, args=(SettlementReason.CANCELLED,))
        deny.start()
        deny.join(WAIT)
        assert not deny.is_alive()
        return real_respond(response)

    request.respond = respond_while_denied  # type: ignore[method-assign]
    env.answer(race, request, form)
    env.idle()
    assert request.responses == []
    assert form.ended == ["cancelled"] and form.attempts == 1 and form.told == 1
    assert env.scheduler.pending_count() == 0


def test_a_late_winner_is_waited_for_without_holding_a_worker(env: Env) -> None:
    """The ``/deny`` took the request but its settlement has not reached the form when
    the Submit's responder says False: the form waits (one timer, no worker held), then
    ends in the winner's state on the lane when the settlement comes."""
    race, form = FormRace(), Form()
    request = Request(race)
    assert request.hold(SettlementReason.CANCELLED)
    env.pool.post(env.answer, race, request, form)  # the claimed job, on the one worker
    env.idle()  # the job returned: the single worker is free while the form waits
    assert form.ended == [] and env.scheduler.pending_count() == 1
    assert request.deliver()  # the winner's settlement arrives
    env.idle()
    assert form.ended == ["cancelled"] and form.attempts == 1 and form.told == 1
    assert form.threads == ["form-lane-1"]  # ended on the lane (run), not the caller
    assert env.scheduler.pending_count() == 0  # the wait's timer is cancelled
    env.clock.advance(LIFETIME + 1)
    env.idle()
    assert form.attempts == 1  # the deadline changes nothing any more


def test_the_deadline_gives_up_as_expired_when_the_winner_never_comes(env: Env) -> None:
    race, form = FormRace(), Form()
    request = Request(race)
    request.hold(SettlementReason.RESOLVED_OUTSIDE_PRESENTER)
    env.answer(race, request, form)
    env.clock.advance(LIFETIME - 0.5)
    env.idle()
    assert form.ended == []  # not before the form's deadline on the injected clock
    env.clock.advance(0.5)
    env.idle()
    assert form.ended == ["expired"] and form.attempts == 1 and form.told == 0
    assert not request.deliver()  # too late: the form already ended expired
    env.idle()
    assert form.attempts == 1 and env.scheduler.pending_count() == 0


def test_a_deadline_already_past_gives_up_at_once(env: Env) -> None:
    race, form = FormRace(), Form()
    request = Request(race)
    request.hold(SettlementReason.CANCELLED)
    env.clock.advance(LIFETIME + 5)
    env.answer(race, request, form)
    env.idle()
    assert form.ended == ["expired"] and form.told == 0


def test_a_winner_settling_while_the_wait_is_armed_leaves_no_timer(env: Env) -> None:
    """The settlement lands between the responder's False and the timer being kept:
    the form ends once in the winner's state and the freshly armed timer is cancelled."""
    race, form = FormRace(), Form()
    request = Request(race)
    request.hold(SettlementReason.CANCELLED)

    class SettlesWhileArming:
        def call_later(self, delay: float, fn: Callable[[], Any]) -> Any:
            handle = env.scheduler.call_later(delay, fn)
            assert delay == pytest.approx(LIFETIME)
            assert request.deliver()  # the winner arrives before the handle is stored
            return handle

    env.answer(race, request, form, scheduler=SettlesWhileArming())
    env.idle()
    assert form.ended == ["cancelled"] and form.told == 1
    assert env.scheduler.pending_count() == 0
    env.clock.advance(LIFETIME + 1)
    env.idle()
    assert form.attempts == 1


def test_the_platform_names_the_winners_state(env: Env) -> None:
    race, form = FormRace(), Form()
    request = Request(race)
    request.hold(SettlementReason.RESOLVED_OUTSIDE_PRESENTER)
    env.answer(race, request, form, winner=lambda reason: f"won by {reason}")
    request.deliver()
    env.idle()
    assert form.ended == ["won by resolved_outside_presenter"] and form.told == 1


def test_a_settlement_before_any_claim_is_left_to_the_presenter(env: Env) -> None:
    race = FormRace()
    assert not race.on_settled(SettlementReason.CANCELLED)  # its own unclaimed path
    assert race.settled_as == SettlementReason.CANCELLED
    assert env.scheduler.pending_count() == 0

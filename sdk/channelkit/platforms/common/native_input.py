"""Native input rules every question presenter keeps: one per run, and no early success.

Two rules of the platform contract hold for any native input presentation (a form card,
an inline keyboard, a Block Kit form):

* **One at a time.** At most one native input presentation is active per session, owner
  and run (`input_scope()`). A second request of the same run while the first is
  still live gets the text prompt: `reserve_native_input()` registers the record
  under its scope in the presenter's
  `CardRegistry` only when the scope is
  free (and the registry is not full), so the presenter answers ``UNSUPPORTED``
  otherwise.
* **No success before the responder accepted.** A click is *claimed* on the web thread
  (compare-and-set, before the ACK); the answer then goes through the request's one-shot
  ``respond`` on the pool, and only its result decides what the card shows.
  `AnswerRace` arbitrates that responder against the request's settlement: the
  answer was accepted (show it), refused by the agent or failed (expired), or another
  surface won (a ``/deny``, an ``/approve``, an answer typed as text, the run's end:
  the card shows the winner's state, `winner_state()`). The winner's settlement may
  arrive before the claim, while the responder runs, or after it returned ``False``;
  in the last case the card waits for it (the presenter arms a timer at the question's
  deadline and calls `AnswerRace.give_up()` there, then shows expired).

`FormRace` is that race with the settlement glue every presenter shares around it:
`FormRace.answer()` responds with the person's answer, ends the form in what the
race decided (``submitted`` / ``cancelled`` when accepted, the winner's state when
another surface won, else ``expired``), tells the conversation once that the question
was already answered when it lost, and, when the winner's settlement is still on its
way, waits for it on one scheduler timer at the form's deadline (never blocking a
worker), then gives up as ``expired``. The presenter supplies only its platform's side:
how to end the claimed form in a state and show it, how to tell the loser, and where
that work runs (the form's serial lane).

The order in a presenter is: the settlement listener calls `FormRace.on_settled()`
first, whatever the form's state (it records the reason, so a claim landing just after
another answer won reads it); ``True`` means the claimed answer lost and the race is
ending the form in the winner's state; otherwise the presenter runs its own
settled-elsewhere path (a form that was not claimed; a claimed form's responder
decides). The claimed form's job calls `FormRace.answer()` once. (`AnswerRace` alone
is the rule: a presenter using it directly calls `AnswerRace.settled()`,
`AnswerRace.respond()` and `AnswerRace.give_up()` and ends the form itself.)
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

from channelkit.core.types import SettlementReason
from channelkit.platforms.common.registry import CardRegistry
from channelkit.platforms.common.types import Clock, Scheduler, TimerHandle

__all__ = [
    "AnswerRace",
    "FormRace",
    "RaceResult",
    "answer_response",
    "cancel_request",
    "input_scope",
    "reserve_native_input",
    "tell_already_answered",
    "winner_state",
]

logger = logging.getLogger(__name__)

#: The secondary index of a presenter's registry that holds the one live input per scope.
SCOPE_INDEX = "scope"


def input_scope(context: Any) -> tuple[str, str, str]:
    """``(session_id, owner id, run_id)`` of a ``UserInputRequestContext``: the scope in
    which at most one native input presentation is active."""
    return (str(context.session_id), str(context.owner.id), str(context.run_id))


def reserve_native_input(
    registry: CardRegistry[Any, Any],
    key: Hashable,
    record: Any,
    scope: tuple[str, str, str] | None,
) -> bool:
    """Register ``record`` under ``key`` and ``scope`` (index ``"scope"``) when no live
    native input holds ``scope`` and the registry has room; False (nothing changes) when
    the caller must fall back to the text prompt. ``scope=None`` registers without the
    one-per-run rule (approval buttons: one message per permission request)."""
    with registry.lock:
        if scope is not None and registry.find(SCOPE_INDEX, scope) is not None:
            return False  # a second request in the same run: the text prompt
        if len(registry) >= registry.maxsize:
            logger.warning("too many live native inputs; using the text prompt")
            return False
        if scope is None:
            return registry.add(key, record)
        return registry.add(key, record, **{SCOPE_INDEX: scope})


def winner_state(reason: str) -> str:
    """The terminal state a card shows when the request was settled by ``reason`` and
    not by the card: an answer given elsewhere ends it ``expired``; a cancel, a deny or
    the run's end ends it ``cancelled``."""
    return "expired" if str(reason) == SettlementReason.RESOLVED_OUTSIDE_PRESENTER else "cancelled"


def answer_response(submit_option_id: str, answers: Mapping[str, str] | None) -> dict[str, Any]:
    """What a native input sends through the request's one-shot ``respond``: the submit
    option with ``answers`` (answer key -> label; several labels joined with ``", "``),
    or ``cancelled`` when ``answers`` is None (the input's own Cancel, its expiry, a
    failed delivery)."""
    if answers is None:
        return {"outcome": {"outcome": "cancelled"}}
    return {
        "outcome": {"outcome": "selected", "optionId": submit_option_id},
        "answers": dict(answers),
    }


def cancel_request(respond: Callable[[Mapping[str, Any]], object], request_id: str) -> None:
    """Answer the request ``cancelled`` through its one-shot ``respond``: its native input
    expired (after the expired state was shown, so the settlement cannot relabel it) or
    could not be shown. A failure is logged, never raised."""
    try:
        respond(answer_response("", None))
    except Exception as exc:
        logger.warning("cancelling request %s failed: %s", request_id, type(exc).__name__)


def tell_already_answered(reason: str) -> bool:
    """Whether a claimed answer that lost to the settlement ``reason`` tells the
    conversation once that the question was already answered: always, except when the
    run itself was cancelled (the run's own terminal output says so)."""
    return str(reason) != SettlementReason.RUN_CANCELLED


@dataclass(frozen=True)
class RaceResult:
    """How a claimed answer's responder ended.

    ``kind``: ``accepted`` (the agent took the card's answer), ``refused`` (the agent
    refused it, or the responder failed while no other surface had settled the request:
    the card shows expired), ``lost`` (another surface settled the request first, even
    when the responder then failed; ``reason`` is that settlement) or ``waiting``
    (another surface holds the request and its settlement has not arrived yet: the
    presenter waits, bounded by the question's deadline).
    """

    kind: Literal["accepted", "refused", "lost", "waiting"]
    reason: str | None = None

    def state(self, claimed: str) -> str:
        """The card's terminal state: ``claimed`` (the state the card's own answer means,
        e.g. ``submitted``) when accepted, the winner's state when lost, else expired."""
        if self.kind == "accepted":
            return claimed
        if self.kind == "lost" and self.reason is not None:
            return winner_state(self.reason)
        return "expired"


class AnswerRace:
    """The race of one card's claimed answer against the request's settlement.

    Thread-safe; one per presented request. See the module docstring for the order in
    which a presenter calls it.
    """

    __slots__ = (
        "_done",
        "_lock",
        "_lost_to",
        "_own",
        "_responder",
        "_started",
        "_waiting",
        "settled_as",
    )

    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: the request's settlement reason, whenever it arrived (None while pending)
        self.settled_as: str | None = None
        self._started = False  # the claimed answer's responder job began
        self._responder: int | None = None  # the thread inside ``respond``
        self._own = False  # the responder's own response settled the request
        self._lost_to: str | None = None  # another surface settled while it ran
        self._waiting = False  # lost; the winner's settlement has not arrived yet
        self._done = False  # the race is decided

    def settled(self, reason: str) -> bool:
        """The request was settled with ``reason`` (any thread). True exactly when the
        claimed answer already lost and waited for this settlement: the caller ends the
        card now in ``winner_state(reason)``. False: the responder decides (the card is
        claimed) or the card was never claimed (the caller's own settled-elsewhere path)."""
        reason = str(reason)
        with self._lock:
            if self.settled_as is None:
                self.settled_as = reason
            if self._done or not self._started:
                return False
            if self._responder == threading.get_ident():
                self._own = True  # the card's own response: its result decides
                return False
            if self._waiting:
                self._waiting = False
                self._done = True
                self._lost_to = reason
                return True
            if self._lost_to is None:
                self._lost_to = reason  # the responder sees it when it returns
            return False

    def respond(self, respond: Callable[[], object], request_id: str = "") -> RaceResult:
        """Call the request's one-shot ``respond`` for the claimed answer (once, on the
        pool) and say how the race ended. When the request was already settled the
        responder is not called: the answer lost."""
        with self._lock:
            self._started = True
            if self.settled_as is not None:
                self._done = True
                return RaceResult("lost", self.settled_as)
            self._responder = threading.get_ident()
        accepted = failed = False
        try:
            accepted = bool(respond())
        except Exception as exc:
            failed = True
            logger.warning(
                "native answer responder failed for request %s: %s",
                request_id,
                type(exc).__name__,
            )
        with self._lock:
            self._responder = None
            if accepted:
                self._done = True
                return RaceResult("accepted")
            if self._own:
                self._done = True
                return RaceResult("refused")
            lost = self._lost_to or self.settled_as
            if lost is not None:  # the winner is known, even if the responder failed
                self._done = True
                return RaceResult("lost", lost)
            if failed:
                self._done = True
                return RaceResult("refused")
            self._waiting = True
            return RaceResult("waiting")

    def give_up(self) -> bool:
        """The question's deadline passed while waiting for the winner's settlement:
        True once (the caller ends the card expired); False when it came meanwhile."""
        with self._lock:
            if not self._waiting:
                return False
            self._waiting = False
            self._done = True
            return True


@dataclass(frozen=True)
class _Ending:
    """The platform's side of a `FormRace`, given once by `FormRace.answer()`."""

    end: Callable[[str], bool]
    tell_lost: Callable[[], object]
    run: Callable[[Callable[[], object]], object]
    winner: Callable[[str], str]


class FormRace(AnswerRace):
    """An `AnswerRace` that also ends its claimed form: the settlement glue of every
    native question form (see the module docstring).

    Thread-safe; one per presented form (a record's ``race`` field). Its one timer, the
    wait for a winner's settlement that has not arrived, is armed on the injected
    scheduler and cancelled when that settlement comes.
    """

    __slots__ = ("_ending", "_timer")

    def __init__(self) -> None:
        super().__init__()
        self._ending: _Ending | None = None  # set by answer(), before the responder runs
        self._timer: TimerHandle | None = None  # the wait for the winner's settlement

    def answer(
        self,
        respond: Callable[[], object],
        *,
        claimed: str,
        end: Callable[[str], bool],
        tell_lost: Callable[[], object],
        run: Callable[[Callable[[], object]], object],
        scheduler: Scheduler,
        clock: Clock,
        deadline: float,
        request_id: str = "",
        winner: Callable[[str], str] = winner_state,
    ) -> None:
        """Answer the request with the claimed form's answer and end the form in what the
        race decided. Call once, on the pool after the claim (the form's lane).

        * ``respond()``: the request's one-shot responder with the person's answer
          (`answer_response()`), called at most once (never when the request was
          already settled).
        * ``claimed``: the state the form's own answer means when accepted
          (``submitted``, or ``cancelled`` for its Cancel).
        * ``end(state)``: make the claimed form terminal in ``state`` and show it in
          place; True for the one call that ended it (False: it had ended already).
          Called with ``claimed``; with ``winner(reason)`` when another surface won;
          with ``expired`` when the agent refused the answer, the responder failed, or
          the winner's settlement did not come by ``deadline``.
        * ``tell_lost()``: tell the conversation once that the question was already
          answered; called after ``end`` ended a form whose answer lost, except when the
          run itself was cancelled (`tell_already_answered()`).
        * ``run(job)``: where the ending work that is not done here runs (the form's
          serial lane): the end after a late winner's settlement, the give-up at the
          deadline.
        * ``scheduler``, ``clock``, ``deadline``: the wait for a winner whose settlement
          has not arrived yet is one timer at ``deadline`` (``clock`` time); nothing
          blocks while it runs.
        * ``winner(reason)``: the state a settlement elsewhere shows (default
          `winner_state()`).
        """
        ending = _Ending(end=end, tell_lost=tell_lost, run=run, winner=winner)
        with self._lock:
            self._ending = ending
        result = self.respond(respond, request_id)
        if result.kind == "waiting":  # another surface holds the request: wait for it
            self._wait(ending, scheduler, max(0.0, deadline - clock.now()))
        elif result.kind == "lost" and result.reason is not None:
            self._finish(ending, result.reason)
        else:  # accepted: the form's own state; refused or failed: expired
            ending.end(claimed if result.kind == "accepted" else "expired")

    def on_settled(self, reason: str) -> bool:
        """The request was settled with ``reason`` (any thread; call it first from the
        settlement listener). True when the claimed answer had lost and waited for this
        settlement: the form is being ended in the winner's state on ``run`` (the
        caller does nothing more). False: the caller's own path for a form nobody
        claimed (a claimed form's responder decides)."""
        if not self.settled(reason):
            return False
        with self._lock:
            ending = self._ending
            timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
        if ending is not None:  # always: only answer() makes the race wait
            ending.run(partial(self._finish, ending, str(reason)))
        return True

    def _wait(self, ending: _Ending, scheduler: Scheduler, delay: float) -> None:
        """Arm the give-up at the deadline; the winner's settlement cancels it."""
        timer: TimerHandle | None = scheduler.call_later(
            delay, partial(self._deadline_passed, ending)
        )
        with self._lock:
            if not self._done:  # still waiting: on_settled() cancels it
                self._timer, timer = timer, None
        if timer is not None:
            timer.cancel()  # the settlement came meanwhile (or the give-up already ran)

    def _deadline_passed(self, ending: _Ending) -> None:
        """The deadline passed while waiting for the winner: end the form expired."""
        with self._lock:
            self._timer = None
        if self.give_up():
            ending.run(partial(ending.end, "expired"))

    @staticmethod
    def _finish(ending: _Ending, reason: str) -> None:
        """End the form of an answer that lost to ``reason``: the winner's state, and
        the conversation told once."""
        if ending.end(ending.winner(reason)) and tell_already_answered(reason):
            ending.tell_lost()

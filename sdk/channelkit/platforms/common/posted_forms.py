"""A question form posted as one chat message and edited in place when it ends.

Slack's Block Kit forms and Discord's component messages follow the same lifecycle; the
platforms differ only in how a form is drawn, how a click is read and which API calls
post, edit and notify. `PostedForms` holds the lifecycle once; a platform's presenter
subclasses it and supplies the drawing and the calls (`PostedForms._edit_terminal()`,
`PostedForms._post_notice()`).

State machine, changed only by compare-and-set on `PostedForm.state`:
``reserved`` (registered, being posted) -> ``pending`` (posted, expiry armed) ->
``claimed`` (the owner's answer or cancel, taken on the receiving thread before the
ACK) -> ``terminal`` (``submitted`` / ``cancelled`` / ``expired``, shown by editing the
message in place, once). A click that arrives while the post is still under way counts:
the token proves the form, and the click names the message.

* **Showing** (`PostedForms._show()`): the form is reserved under its run's scope (one
  live form per session, owner and run; `reserve_native_input()`), subscribed to its
  request's settlement, then posted on the calling (run) thread. A failed post ends it
  as expired and the caller falls back to the text prompt. A form settled while it was
  being posted is edited to its end state right after the post returns.
* **Claiming** (`PostedForms._claim()`): the first valid click of the owner moves the form
  to ``claimed``, records what was chosen and stops the expiry; the answer then goes to the
  request's one-shot ``respond()`` on the form's serial lane (`PostedForms._answer()`), and
  `FormRace` decides what the form shows: the answer when the responder accepted it, the
  winner's state when another answer came first (and the conversation is told once, in
  the owner's language), else expired.
* **Settling elsewhere** (a ``/deny``, an answer typed as text, the run's end): the form ends in
  the winner's state (`winner_state()`), or, when its own claimed answer is still
  in flight, the race ends it.
* **Expiry**: a scheduler timer at the form's deadline shows Expired first, then cancels
  the request. `PostedForms.close()` expires every form nobody claimed.

Every ended form leaves a tombstone in the registry (token -> (request id, terminal
state)), so late clicks change nothing. Answers are never logged.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Generic, TypeVar

from channelkit.core import UserInputRequestContext
from channelkit.core.catalog import Messages, en, messages
from channelkit.platforms.common.claims import StateCell
from channelkit.platforms.common.native_input import (
    FormRace,
    answer_response,
    cancel_request,
    input_scope,
    reserve_native_input,
    winner_state,
)
from channelkit.platforms.common.registry import CardRegistry, MemoryCardRegistry

__all__ = ["CLAIMABLE", "MAX_LIVE_FORMS", "TEXT_ALREADY_ANSWERED", "PostedForm", "PostedForms"]

logger = logging.getLogger(__name__)

#: Live forms a presenter keeps at most (beyond: the text prompt).
MAX_LIVE_FORMS = 1_000
#: The states in which the owner's click can still claim a form.
CLAIMABLE = ("reserved", "pending")
#: Posted once in the conversation (in the owner's language) when a claimed answer lost
#: to another answer.
TEXT_ALREADY_ANSWERED = en("question.already_answered_form")

#: ``submit(key, fn)``: run ``fn`` on the serial lane ``key`` of the channel's pool.
Submit = Callable[[Hashable, Callable[[], Any]], Any]


@dataclass(eq=False, kw_only=True)
class PostedForm:
    """One presented form: the captured request, where it is posted and how it ended."""

    context: UserInputRequestContext
    #: the opaque random token the form's buttons carry (never the request id)
    token: str
    channel: str
    #: when the form expires (the injected clock's time)
    deadline: float
    state: StateCell[str]
    #: the posted message's id, once known (from the post, or from an earlier click)
    message: str | None = None
    terminal: str | None = None  # submitted | cancelled | expired, once terminal
    action: str | None = None  # the claimed click: submit | cancel
    answers: dict[str, str] | None = None  # the claimed submit's answers
    ended_while_posting: bool = False  # settled before the post answered
    race: FormRace = field(default_factory=FormRace)
    timer: Any = None
    unsubscribe: Callable[[], Any] | None = None


F = TypeVar("F", bound=PostedForm)


class PostedForms(Generic[F]):
    """The lifecycle of one platform's posted forms; see the module docstring.

    ``submit(key, fn)`` runs ``fn`` on a per-key serial lane of the pool (a form's
    responder and edits stay ordered and never run on the receiving thread);
    ``scheduler.call_later`` arms the expiry; ``registry`` holds the live forms (key:
    the token; index ``scope``) and their tombstones. ``texts_for(person)`` gives the
    catalog texts a person reads (the channel sets its ``messages_for``).
    """

    #: the platform's name in log lines
    platform = "chat"

    def __init__(
        self,
        api: Any,
        *,
        submit: Submit,
        scheduler: Any,
        clock: Any,
        timeout_s: float,
        registry: CardRegistry[F, tuple[str, str]] | None = None,
    ) -> None:
        self._api = api
        self._submit = submit
        self._scheduler = scheduler
        self._clock = clock
        self._timeout_s = timeout_s
        self.registry: CardRegistry[F, tuple[str, str]] = (
            registry if registry is not None else MemoryCardRegistry(clock, maxsize=MAX_LIVE_FORMS)
        )
        self._lock = self.registry.lock
        #: the catalog texts a person reads (the channel sets its ``messages_for``)
        self.texts_for: Callable[[str | None], Messages] = lambda _: messages()

    # -- the platform's part ----------------------------------------------------------
    def _edit_terminal(
        self, form: F, message: str, state: str, answers: dict[str, str] | None, texts: Messages
    ) -> None:
        """Edit the posted ``message`` to the end ``state`` (raises on failure)."""
        raise NotImplementedError

    def _post_notice(self, form: F, text: str) -> None:
        """Post ``text`` in the form's conversation (raises on failure)."""
        raise NotImplementedError

    # -- introspection (tests, diagnostics) ---------------------------------------------
    def state_of(self, request_id: str) -> str | None:
        """``reserved`` / ``pending`` / ``claimed`` for a live form, else its terminal
        state (from the tombstone), else None."""
        with self._lock:
            for form in self.registry.records():
                if form.context.request_id == request_id:
                    return form.state.state
            for tomb_request_id, state in self.registry.tombstones():
                if tomb_request_id == request_id:
                    return state
        return None

    def live_forms(self) -> list[F]:
        """Every live form, oldest first."""
        return self.registry.records()

    # -- showing (the run's thread) -----------------------------------------------------
    def _show(self, form: F, post: Callable[[], str]) -> str:
        """Reserve ``form`` under its run's scope, subscribe it to its request's
        settlement and post it with ``post()`` (returns the message id): ``"presented"``,
        or ``"unsupported"`` when the scope already has a live form, the registry is
        full or the post failed (the caller shows the text prompt)."""
        if not reserve_native_input(self.registry, form.token, form, input_scope(form.context)):
            return "unsupported"
        form.unsubscribe = form.context.on_settled(partial(self._on_settled, form))
        if form.state.state != "reserved":
            return "presented"  # settled while subscribing: nothing to show
        try:
            message = post()
        except Exception as exc:
            logger.warning(
                "%s question form could not be posted: %s", self.platform, type(exc).__name__
            )
            if self._end(form, "reserved", "expired"):
                return "unsupported"
            return "presented"  # answered by an early click, or settled meanwhile
        with self._lock:
            if form.message is None:
                form.message = message
        if form.state.compare_and_set("reserved", "pending"):
            form.timer = self._scheduler.call_later(
                max(0.0, form.deadline - self._clock.now()),
                partial(self._submit, form.token, partial(self._expire, form)),
            )
            return "presented"
        with self._lock:
            unshown = form.ended_while_posting
        if unshown:  # settled while posting: end the form just posted
            self._submit(form.token, partial(self._project, form))
        return "presented"  # or claimed by an early click: its responder projects

    # -- clicks (receiving thread: claim, no network) ---------------------------------
    def _claim(
        self, form: F, action: str, answers: dict[str, str] | None, clicked: str | None
    ) -> bool:
        """Claim ``form`` for the owner's ``action`` (``"submit"`` / ``"cancel"``); True
        for the one click that did (its answer then goes out with `_answer()`, queued
        by the caller after the ACK). ``clicked``: the message the click names (a click
        that came before the post answered tells the form where it is)."""
        if not form.state.compare_and_set(CLAIMABLE, "claimed"):
            return False  # a concurrent click or the settlement came first
        with self._lock:
            form.action = action
            form.answers = answers
            if form.message is None and clicked:
                form.message = clicked
            timer, form.timer = form.timer, None
        if timer is not None:
            timer.cancel()
        return True

    def _later(
        self, form: F, key: Hashable, fn: Callable[..., Any], *args: Any
    ) -> Callable[[], None]:
        """A callable that queues ``fn(form, *args)`` on lane ``key`` (run after the ACK)."""
        return partial(self._submit, key, partial(fn, form, *args))

    # -- the claimed answer (the form's lane) -------------------------------------------
    def _answer(self, form: F) -> None:
        """Answer the request; show only what the responder decided (`FormRace`)."""
        submitted = (form.answers or {}) if form.action == "submit" else None
        response = answer_response(form.context.submit_option_id, submitted)
        form.race.answer(
            partial(form.context.respond, response),
            claimed="submitted" if form.action == "submit" else "cancelled",
            end=partial(self._end_claimed, form),
            tell_lost=partial(self._tell_lost, form),
            run=partial(self._submit, form.token),
            scheduler=self._scheduler,
            clock=self._clock,
            deadline=form.deadline,
            request_id=str(form.context.request_id),
        )

    def _end_claimed(self, form: F, state: str) -> bool:
        """End the claimed form in ``state`` and show it; True for the call that did."""
        if not self._end(form, "claimed", state):
            return False
        self._project(form)
        return True

    def _tell_lost(self, form: F) -> None:
        """Tell the conversation, in the owner's language, that the question was
        already answered (the claimed answer lost)."""
        try:
            self._post_notice(
                form, self.texts_for(form.context.owner.id).text(TEXT_ALREADY_ANSWERED)
            )
        except Exception as exc:
            logger.warning(
                "%s already-answered notice failed: %s", self.platform, type(exc).__name__
            )

    # -- settlement, expiry -------------------------------------------------------------
    def _on_settled(self, form: F, reason: Any) -> None:
        """Settlement from core (any thread): the winner's state, unless the form's own
        claimed answer decides (see `AnswerRace`)."""
        reason = str(reason)
        if form.race.on_settled(reason):
            return  # the claimed answer lost: the race ends the form as the winner
        state = winner_state(reason)
        if self._end(form, "reserved", state):
            return  # the post that is under way ends the form when it returns
        if self._end(form, "pending", state):
            self._submit(form.token, partial(self._project, form))

    def _expire(self, form: F) -> None:
        """The form's lifetime ended: show Expired first, then cancel the request."""
        if not self._end(form, "pending", "expired"):
            return
        self._project(form)
        cancel_request(form.context.respond, str(form.context.request_id))

    def _end(self, form: F, expected: str, terminal: str) -> bool:
        """Make ``form`` terminal (from ``expected``) exactly once: tombstone, no timer,
        no settlement listener. True for the caller that did it. The state and the
        terminal label are set together under the registry lock, so a reader holding
        it never sees one without the other."""
        with self._lock:
            if not form.state.compare_and_set(expected, "terminal"):
                return False
            form.terminal = terminal
            form.ended_while_posting = expected == "reserved"
            timer, form.timer = form.timer, None
            unsubscribe, form.unsubscribe = form.unsubscribe, None
            self.registry.remove(form.token, form)
            self.registry.bury(form.token, (str(form.context.request_id), terminal))
        if timer is not None:
            timer.cancel()
        if unsubscribe is not None:
            unsubscribe()
        return True

    def _project(self, form: F) -> None:
        """Edit the form in place to its terminal state (a failure is logged; it never
        changes the answer)."""
        with self._lock:
            message, state = form.message, form.terminal or "expired"
        if message is None:
            return
        answers = form.answers if state == "submitted" else None
        try:
            self._edit_terminal(
                form, message, state, answers, self.texts_for(form.context.owner.id)
            )
        except Exception as exc:
            logger.warning("%s question form update failed: %s", self.platform, type(exc).__name__)

    def close(self) -> None:
        """Expire every form nobody claimed (shown at once; responders not called)."""
        for form in self.registry.records():
            if self._end(form, "pending", "expired") or self._end(form, "reserved", "expired"):
                self._project(form)

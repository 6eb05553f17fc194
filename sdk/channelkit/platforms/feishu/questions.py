"""Native question forms: ``present_user_input_request`` as a Feishu form card.

One `QuestionRecord` per presented request, bound to the captured request id,
run, owner, chat and (after delivery) message id. Its state machine is callback
arbitration, changed only by compare-and-set::

    reserved --delivered--> pending --valid callback--> claimed --> terminal
        \\______________________\\________________________________/
                 settlement / run end / timeout / delivery failure

A valid owner callback may also claim a ``reserved`` record (``reserved -> claimed``):
it proves the card was delivered although ``send_card`` has not answered yet (its
message id is then not known, so only the request id, chat and operator are checked).
The delivery that finishes later sees the claim and never activates the card; the
responder runs after it on the run's projection queue.

Visible terminal states are ``submitted``, ``cancelled`` and ``expired``; every one is
projected by patching the *same* message in place (never deleted).

* A second request in the same ``session_id + owner.id + run_id`` scope returns
  UNSUPPORTED (text fallback) and the first form stays answerable. This rule, the
  arbitration of a claimed answer against the settlement and the winner's state are the
  ones every native input keeps (`channelkit.platforms.common.native_input`).
* Callbacks are correlated by request id, then checked against the captured operator
  (owner only, fail closed), chat and message; the form is validated (every question
  answered, no unknown keys) *before* the claim; only a successful claim reaches the
  responder, so a duplicate submit is answered with a toast and never calls it twice.
  The claim's toast says the answer was received (or the cancel is under way), never
  that it was accepted: only the card's terminal state says that.
* The callback is ACKed at once; the responder runs afterwards on the run's projection
  queue, then the card is patched from the responder's result (accepted submit ->
  submitted with the answers shown, escaped and bounded; accepted cancel -> cancelled;
  its own refusal or exception -> expired). When the responder's ``False`` means another
  surface won (a ``/deny`` or an answer given elsewhere settled the request), the card
  ends in the winner's state from that settlement (cancelled, or expired for an answer
  given elsewhere), waiting for the settlement if it is still on its way, and the chat
  is told once that the question was already answered.
* Expiry (``forms.timeout_ms`` from presentation, cut to end ``EXPIRY_MARGIN`` before
  core's own deadline ``context.expires_at``; one scheduler timer) patches the card to
  expired FIRST and only then calls the responder with ``cancelled``, so the resulting
  settlement cannot relabel it.
* Answers use the shared submit format: ``{"outcome": {"outcome": "selected",
  "optionId": <submit option>}, "answers": {"0": "Beijing", "1": "Logs, Metrics"}}``;
  multi-select labels joined with ``", "``; cancel sends ``{"outcome": {"outcome":
  "cancelled"}}`` and no answers. Answers are never logged.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable, Mapping, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from channelkit.core.types import UserInputPresentationResult
from channelkit.errors import InvalidForm
from channelkit.platforms.common import StateCell, question_deadline
from channelkit.platforms.common.contract import Decision
from channelkit.platforms.common.native_input import (
    FormRace,
    answer_response,
    cancel_request,
    input_scope,
    reserve_native_input,
    winner_state,
)
from channelkit.platforms.common.registry import CardRegistry, MemoryCardRegistry
from channelkit.platforms.feishu import cards
from channelkit.platforms.feishu.api import FeishuApi
from channelkit.platforms.feishu.ingress import CardAction

__all__ = ["QuestionPresenter", "QuestionRecord", "encode_answers"]

logger = logging.getLogger(__name__)

#: States a valid owner callback may claim (reserved: the callback proves delivery).
_CLAIMABLE = ("reserved", "pending")
DELIVERY_WAIT = 25.0

SerialSubmit = Callable[[Hashable, Callable[[], Any]], "Future[Any]"]


def encode_answers(
    questions: Sequence[Any], form_value: Mapping[str, Any] | None, *, custom_text: bool = True
) -> dict[str, str]:
    """Turn a card ``form_value`` into the shared ``answers`` map (labels, not indexes).

    Select values are option indexes (``"0"``, ``"1"`` ...); the optional
    ``<key>_other`` input carries custom text (it replaces a single-select choice and
    is appended to multi-select choices). Raises `InvalidForm` when a question
    has no answer, an index is out of range, or the form holds an unknown key.
    """
    form = dict(form_value or {})
    keys = {str(q.answer_key) for q in questions}
    allowed = set(keys)
    if custom_text:
        allowed |= {k + cards.OTHER_SUFFIX for k in keys}
    unknown = [k for k in form if k not in allowed]
    if unknown:
        raise InvalidForm("unknown form field")
    answers: dict[str, str] = {}
    for question in questions:
        key = str(question.answer_key)
        labels = cards.option_labels(question)
        raw = form.get(key)
        if raw is None or raw == "":
            picked: list[str] = []
        elif isinstance(raw, list):
            picked = [str(v) for v in raw]
        elif isinstance(raw, str):
            picked = [raw]
        else:
            raise InvalidForm("bad select value")
        if not question.multi_select and len(picked) > 1:
            raise InvalidForm("single select with several values")
        chosen: list[str] = []
        for value in picked:
            if not value.isdigit() or int(value) >= len(labels):
                raise InvalidForm("unknown option")
            label = labels[int(value)]
            if label not in chosen:
                chosen.append(label)
        other = form.get(key + cards.OTHER_SUFFIX) if custom_text else None
        other_text = other.strip() if isinstance(other, str) else ""
        if other is not None and not isinstance(other, str):
            raise InvalidForm("bad custom text")
        if other_text:
            chosen = [*chosen, other_text] if question.multi_select else [other_text]
        if not chosen:
            raise InvalidForm("unanswered question")
        answers[key] = ", ".join(chosen)
    return answers


@dataclass(eq=False)
class QuestionRecord:
    """The live native input of one request (see the module docstring)."""

    request_id: str
    session_id: str
    run_id: str
    owner_id: str
    chat_id: str
    questions: tuple[Any, ...]
    submit_option_id: str
    respond: Callable[[Mapping[str, Any]], bool]
    cell: StateCell[str] = field(default_factory=lambda: StateCell("reserved"))
    message_id: str | None = None
    terminal: str | None = None  # submitted | cancelled | expired
    unsubscribe: Callable[[], Any] | None = None
    timer: Any = None
    claim_action: str | None = None
    deadline: float = 0.0  # absolute expiry on the injected clock
    #: the claimed answer's responder against the request's settlement
    race: FormRace = field(default_factory=FormRace)
    reply_to: str | None = None  # a message of the request's thread: the form goes there


def _toast(kind: str, content: str) -> dict[str, Any]:
    return {"toast": {"type": kind, "content": content}}


def _into(record: QuestionRecord) -> tuple[str, ...]:
    """The extra argument of ``send_text`` that puts a text into the request's thread
    (none outside a thread: a ``send_text(chat_id, text)`` of two arguments works)."""
    return (record.reply_to,) if record.reply_to else ()


class QuestionPresenter:
    """Presents and arbitrates Feishu question forms; see the module docstring.

    ``registry`` holds the live records (key: request id; index ``scope``: session,
    owner and run) and their tombstones (key: request id). ``send_text(chat_id, text)``
    sends the plain-text notices, with a third argument (a message of the thread to
    reply to) for a request of a thread; ``thread_anchor(chat_id, thread_id)`` names
    that message.
    """

    def __init__(
        self,
        api: FeishuApi,
        *,
        clock: Any,
        scheduler: Any,
        submit: SerialSubmit,
        language: str = "zh",
        timeout_s: float = 270.0,
        custom_text: bool = True,
        send_text: Callable[..., Any] | None = None,
        registry: CardRegistry[QuestionRecord, tuple[str, str]] | None = None,
        thread_anchor: Callable[[str, str | None], str | None] | None = None,
    ) -> None:
        self._api = api
        self._thread_anchor = thread_anchor
        self._clock = clock
        self._scheduler = scheduler
        self._submit = submit
        self._language = language
        self._strings = cards.strings(language)
        self._timeout_s = timeout_s
        self._custom_text = custom_text
        self._send_text = send_text
        self.registry: CardRegistry[QuestionRecord, tuple[str, str]] = (
            registry if registry is not None else MemoryCardRegistry(clock)
        )
        self._lock = self.registry.lock

    # -- introspection --------------------------------------------------------------------
    def get(self, request_id: str) -> QuestionRecord | None:
        return self.registry.get(request_id)

    def tombstone(self, request_id: str) -> tuple[str, str] | None:
        """``(run_id, terminal_state)`` of a finished request, if remembered."""
        return self.registry.tombstone(request_id)

    def __len__(self) -> int:
        return len(self.registry)

    # -- presentation ---------------------------------------------------------------------
    def present(self, context: Any) -> UserInputPresentationResult:
        """Deliver the form for ``context`` (a ``UserInputRequestContext``).

        Blocks (on the agent's thread, never a web thread) until the card is delivered
        or ``DELIVERY_WAIT`` seconds pass.
        """
        owner_id = str(context.owner.id)
        record = QuestionRecord(
            request_id=str(context.request_id),
            session_id=str(context.session_id),
            run_id=str(context.run_id),
            owner_id=owner_id,
            chat_id=str(context.target.chat_id),
            questions=tuple(context.questions),
            submit_option_id=str(context.submit_option_id),
            respond=context.respond,
            deadline=question_deadline(self._clock.now(), self._timeout_s, context),
            cell=self.registry.state("reserved"),
        )
        if self._thread_anchor is not None:
            record.reply_to = self._thread_anchor(record.chat_id, context.target.thread_id)
        # a second request of the run while its form is live (or the same request
        # again), or a full registry: the text prompt
        if not reserve_native_input(self.registry, record.request_id, record, input_scope(context)):
            return UserInputPresentationResult.UNSUPPORTED
        record.unsubscribe = context.on_settled(
            lambda reason, r=record: self._on_settled(r, reason)
        )
        if record.cell.state != "reserved":
            # settled while subscribing: nothing was shown, nothing to do
            self._cleanup(record)
            return UserInputPresentationResult.PRESENTED
        future = self._submit(record.run_id, lambda: self._deliver(record))
        try:
            result = future.result(timeout=DELIVERY_WAIT)
        except FutureTimeout:
            logger.warning("question card delivery still in flight; keeping it reserved")
            return UserInputPresentationResult.PRESENTED
        except Exception:
            logger.exception("question card delivery job failed")
            result = UserInputPresentationResult.PRESENTED
        assert isinstance(result, UserInputPresentationResult)
        return result

    def _deliver(self, record: QuestionRecord) -> UserInputPresentationResult:
        card = cards.form_card(
            record.request_id, record.questions, self._language, custom_text=self._custom_text
        )
        try:
            message_id = self._api.send_card(record.chat_id, card, reply_to=record.reply_to)
        except Exception:
            logger.exception("question card delivery failed")
            if not self._end_as(record, "reserved", "cancelled"):
                return UserInputPresentationResult.PRESENTED  # already settled elsewhere
            self._send_fallback(record)
            cancel_request(record.respond, record.request_id)
            self._cleanup(record)
            return UserInputPresentationResult.HANDLED
        record.message_id = message_id
        if record.cell.compare_and_set("reserved", "pending"):
            record.timer = self._scheduler.call_later(
                max(0.0, record.deadline - self._clock.now()), lambda r=record: self._on_timeout(r)
            )
            return UserInputPresentationResult.PRESENTED
        if record.cell.state == "claimed":
            # claimed by an early callback: its responder (queued behind this job)
            # patches the card; never activate it
            return UserInputPresentationResult.PRESENTED
        # Settled while delivering: make the delivered card non-interactive, in the
        # state its settler set with the transition (read under the same lock)
        with self._lock:
            state = record.terminal
        self._patch(record, state or "expired")
        self._cleanup(record)
        return UserInputPresentationResult.PRESENTED

    def _send_fallback(self, record: QuestionRecord) -> None:
        if self._send_text is None:
            return
        lines = [self._strings["delivery_failed"]]
        for question in record.questions:
            labels = " / ".join(cards.option_labels(question))
            text = question.question or question.header
            lines.append(f"- {text}: {labels}")
        try:
            self._send_text(record.chat_id, "\n".join(lines), *_into(record))
        except Exception:
            logger.exception("question fallback message failed")

    # -- callbacks (web thread: synchronous, no network) ---------------------------------
    def handle_action(self, action: CardAction) -> Decision:
        """Correlate, authorize, validate and claim a form callback; never blocks.

        The decision's body is the toast; an accepted claim's work hands the responder
        to the run's projection queue."""
        s = self._strings
        stale = Decision.ignored(_toast("warning", s["toast_stale"]))
        request_id = action.value.get("request")
        kind = action.action
        if not isinstance(request_id, str) or kind not in (
            cards.SUBMIT_ACTION,
            cards.CANCEL_ACTION,
        ):
            return stale
        record = self.get(request_id)
        if record is None:
            buried = self.tombstone(request_id)
            if buried is not None and buried[1] == "submitted":
                return Decision.ignored(_toast("warning", s["toast_already_answered"]))
            return stale
        if action.operator_open_id is None or action.operator_open_id != record.owner_id:
            return Decision.ack(_toast("warning", s["toast_not_owner"]), outcome="forbidden")
        message_id = record.message_id  # None while send_card has not answered
        if action.open_chat_id != record.chat_id or (
            message_id is not None and action.open_message_id != message_id
        ):
            return stale
        answers: dict[str, str] = {}
        if kind == cards.SUBMIT_ACTION:
            try:
                answers = encode_answers(
                    record.questions, action.form_value, custom_text=self._custom_text
                )
            except InvalidForm:
                if record.cell.state not in _CLAIMABLE:
                    return stale
                return Decision.ack(_toast("warning", s["toast_invalid"]), outcome="invalid")
        submitted = answers if kind == cards.SUBMIT_ACTION else None
        response = answer_response(record.submit_option_id, submitted)
        if not record.cell.compare_and_set(_CLAIMABLE, "claimed"):
            answered = record.cell.state == "claimed" or record.claim_action is not None
            if answered or record.terminal == "submitted":  # a duplicate of a taken answer
                return Decision.ignored(_toast("warning", s["toast_already_answered"]))
            return stale
        record.claim_action = kind
        if record.timer is not None:
            record.timer.cancel()
        toast = s["toast_submitted"] if kind == cards.SUBMIT_ACTION else s["toast_cancelled"]

        def execute() -> None:
            self._submit(record.run_id, lambda: self._execute(record, response, answers))

        return Decision.ack(_toast("success", toast)).then(execute)

    def _execute(
        self, record: QuestionRecord, response: Mapping[str, Any], answers: Mapping[str, str]
    ) -> None:
        """The claimed answer, on the run's projection queue: answer the request, then
        end the card in what the responder decided (`FormRace`)."""
        submitted = record.claim_action == cards.SUBMIT_ACTION
        record.race.answer(
            partial(record.respond, response),
            claimed="submitted" if submitted else "cancelled",
            end=partial(self._end_claimed, record, answers),
            tell_lost=partial(self._tell_lost, record),
            run=partial(self._submit, record.run_id),
            scheduler=self._scheduler,
            clock=self._clock,
            deadline=record.deadline,
            request_id=record.request_id,
        )

    def _end_claimed(self, record: QuestionRecord, answers: Mapping[str, str], state: str) -> bool:
        """End the claimed card in ``state`` (the answers shown when submitted)."""
        if not self._end_as(record, "claimed", state):
            return False
        self._patch(record, state, answers=answers if state == "submitted" else None)
        self._cleanup(record)
        return True

    def _tell_lost(self, record: QuestionRecord) -> None:
        """Tell the chat once that the question was already answered."""
        if self._send_text is None:
            return
        try:
            self._send_text(record.chat_id, self._strings["already_answered"], *_into(record))
        except Exception:
            logger.exception("already-answered notice failed")

    # -- settlement, timeout, run end ------------------------------------------------------
    def _on_settled(self, record: QuestionRecord, reason: Any) -> None:
        reason = str(reason)
        if record.race.on_settled(reason):
            return  # the claimed answer lost: the race ends the card as the winner
        state = winner_state(reason)
        if self._end_as(record, "reserved", state):
            return  # delivery finishing later patches it
        if self._end_as(record, "pending", state):
            if record.timer is not None:
                record.timer.cancel()
            self._submit(record.run_id, lambda: self._finish_projection(record))

    def _finish_projection(self, record: QuestionRecord) -> None:
        self._patch(record, record.terminal or "expired")
        self._cleanup(record)

    def _on_timeout(self, record: QuestionRecord) -> None:
        if not self._end_as(record, "pending", "expired"):
            return

        def expire() -> None:
            self._patch(record, "expired")  # first the projection ...
            cancel_request(record.respond, record.request_id)  # ... then
            self._cleanup(record)

        self._submit(record.run_id, expire)

    def cancel_run(self, run_id: str, state: str = "cancelled") -> int:
        """Finalize every live request of ``run_id`` (run ended); returns how many.

        The responder is not called: ChannelBase settles the pending requests itself.
        """
        with self._lock:
            records = [r for r in self.registry.records() if r.run_id == run_id]
        count = 0
        for record in records:
            if self._end_as(record, "reserved", state):
                count += 1
            elif self._end_as(record, "pending", state):
                if record.timer is not None:
                    record.timer.cancel()
                self._submit(record.run_id, partial(self._finish_projection, record))
                count += 1
        return count

    def close(self) -> None:
        """Expire every live request (channel shutdown)."""
        with self._lock:
            runs = {r.run_id for r in self.registry.records()}
        for run_id in runs:
            self.cancel_run(run_id, "expired")

    # -- helpers -------------------------------------------------------------------------
    def _end_as(self, record: QuestionRecord, expected: str, state: str) -> bool:
        """Make ``record`` terminal in ``state`` if its cell is ``expected``; True for
        the one call that did. The transition and ``record.terminal`` are set together
        under the registry lock: a reader holding it never sees a terminal record
        without its state (a delivery finishing as a ``/deny`` settles it would else
        show the deny as expired)."""
        with self._lock:
            if not record.cell.compare_and_set(expected, "terminal"):
                return False
            record.terminal = state
            return True

    def _patch(
        self, record: QuestionRecord, state: str, *, answers: Mapping[str, str] | None = None
    ) -> None:
        if record.message_id is None:
            return
        card = cards.form_terminal_card(
            record.questions,
            state,  # type: ignore[arg-type]
            self._language,
            answers=answers,
        )
        try:
            self._api.patch_card(record.message_id, card)
        except Exception:
            logger.exception("question card projection failed (state %s)", state)

    def _cleanup(self, record: QuestionRecord) -> None:
        if record.timer is not None:
            record.timer.cancel()
            record.timer = None
        unsubscribe, record.unsubscribe = record.unsubscribe, None
        if unsubscribe is not None:
            try:
                unsubscribe()
            except Exception:
                logger.exception("settlement unsubscribe failed")
        self.registry.remove(record.request_id, record)
        self.registry.bury(record.request_id, (record.run_id, record.terminal or "expired"))
        # compact: the record keeps no responder, questions or subscriptions
        record.respond = _refused
        record.questions = ()


def _refused(response: Mapping[str, Any]) -> bool:
    return False


if TYPE_CHECKING:
    from channelkit.core.context import UserInputRequestContext
    from channelkit.platforms.common.contract import QuestionSurface

    def _satisfies_the_contract(presenter: QuestionPresenter) -> None:
        """mypy: the presenter is Feishu's question surface."""
        questions: QuestionSurface[UserInputRequestContext] = presenter
        del questions

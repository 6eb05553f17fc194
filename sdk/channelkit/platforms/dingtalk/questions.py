"""Question cards: one DingTalk form card per structured user-input request.

States (adapter-internal callback arbitration, never shown as such)::

    reserved  inserted and subscribed to settlement before createAndDeliver
    pending   activated only after a successful delivery while still reserved
    claimed   atomically claimed by one valid callback (before the ACK), from pending
              or from reserved: a valid owner callback proves the card was delivered
              even if createAndDeliver has not answered yet; the later activation sees
              the claim and never reactivates the card (no expiry timer)
    terminal  first settlement wins; the live record becomes a tombstone

The card shows only ``pending``, ``submitted``, ``cancelled`` and ``expired`` and is
always updated in place (``/card/instances``), never deleted. A settlement that happens
during delivery is projected on the delivered card and never reactivates it. The
responder is called after the ACK. Its ``True`` ends the card as submitted (showing the
submitted answers, escaped and bounded) or cancelled. When its ``False`` means another
surface won (a ``/deny``, another answer: the request was settled by someone else), the
card ends in the winner's state from the settlement (``cancelled`` for a cancellation,
``resolved_outside_presenter`` for an answer given elsewhere), waiting for that settlement
if it is still on its way, and the person is told once that the question was already
answered; its own refusal or exception ends the card as expired ("This question is no
longer available."). The claim is kept either way. The expiry timer marks
the card expired *before* it calls the responder with a cancel, so the collapsed
cancellation that follows cannot relabel it; it fires ``EXPIRY_MARGIN`` before core's
own deadline for the request (``ctx.expires_at``), so a neutral ``cancelled`` settlement
always means a real cancellation.

The arbitration of a claimed answer against the settlement and the winner's state are
the ones every native input keeps (`channelkit.platforms.common.native_input`).
Two things are DingTalk's own: one live card per session and owner, where a newer run's
question supersedes the older run's card (see `QuestionCardController.present()`),
and an answer given elsewhere shown as its own expired state ("Resolved outside this
card.").
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol

from channelkit.core.catalog import Messages, en, messages
from channelkit.errors import ChannelKitError
from channelkit.platforms.common import StateCell, first_notice, question_deadline
from channelkit.platforms.common.contract import Decision
from channelkit.platforms.common.native_input import (
    FormRace,
    answer_response,
    cancel_request,
    winner_state,
)
from channelkit.platforms.common.projection_queue import ProjectionQueue, Slot
from channelkit.platforms.common.registry import CardRegistry, MemoryCardRegistry
from channelkit.platforms.common.types import Clock, Scheduler, TimerHandle
from channelkit.platforms.dingtalk.api import (
    QUESTION_CARD_TEMPLATE_ID,
    CardTarget,
    is_template_rejection,
    log_card_error,
)
from channelkit.platforms.dingtalk.ingress import CardCallback
from channelkit.platforms.dingtalk.markdown import (
    MAX_SHOWN_ANSWER_CHARS,
    MAX_SHOWN_ANSWERS_CHARS,
    answers_summary,
    cut_text,
    delivery_failure_text,
    escape_markdown,
    option_label,
)

__all__ = [
    "ALREADY_ANSWERED_TEXT",
    "MAX_LIVE_QUESTION_CARDS",
    "MAX_SHOWN_ANSWERS_CHARS",
    "MAX_SHOWN_ANSWER_CHARS",
    "NEWER_QUESTION_TEXT",
    "OTHER_OPTION_VALUE",
    "UNAVAILABLE_TEXT",
    "ForbiddenNotice",
    "FormSpec",
    "InputRequestLike",
    "OwnerLike",
    "QuestionCardApi",
    "QuestionCardController",
    "QuestionLike",
    "QuestionRecord",
    "QuestionTombstone",
    "SegmentLike",
    "TargetLike",
    "answers_summary",
    "build_question_card_data",
    "delivery_failure_text",
    "escape_markdown",
    "forbidden_decision",
    "option_label",
    "parse_answers",
    "terminal_param_map",
]

logger = logging.getLogger(__name__)

#: Live question cards kept at most (a further request falls back to text).
MAX_LIVE_QUESTION_CARDS = 1_000
#: The form value of the custom "Other" choice: code matches this value, never the
#: label, which is shown in the person's language.
OTHER_OPTION_VALUE = "__ck_other__"
#: The labels of a question card (catalog texts, shown in the card owner's language).
TEXT_OTHER = en("button.other")
TEXT_SUBMIT = en("button.submit")
TEXT_OTHER_FIELD = en("dingtalk.other_field")
TEXT_OTHER_HINT = en("dingtalk.other_hint")
#: The descriptions and button labels of a question card's end states.
SUBMITTED_TEXT = en("dingtalk.q_submitted")
EXPIRED_TEXT = en("dingtalk.q_expired")
RESOLVED_OUTSIDE_TEXT = en("dingtalk.q_resolved_outside")
CANCELLED_TEXT = en("question.cancelled")
LABEL_SUBMITTED = en("label.submitted_plain")
LABEL_EXPIRED = en("label.expired_plain")
LABEL_CANCELLED = en("label.cancelled_plain")
UNAVAILABLE_TEXT = en("question.unavailable")
NEWER_QUESTION_TEXT = en("question.newer")
#: Sent to the chat when a claimed card answer lost to another surface.
ALREADY_ANSWERED_TEXT = en("question.already_answered_card")

#: The card state of an answer given elsewhere: shown expired, with its own text.
RESOLVED_OUTSIDE = "resolved_outside_presenter"

_TERMINAL_PROJECTION: Mapping[str, tuple[str, str, str]] = {
    "submitted": ("submitted", SUBMITTED_TEXT, LABEL_SUBMITTED),
    "expired": ("expired", EXPIRED_TEXT, LABEL_EXPIRED),
    RESOLVED_OUTSIDE: ("expired", RESOLVED_OUTSIDE_TEXT, LABEL_EXPIRED),
    "cancelled": ("cancelled", CANCELLED_TEXT, LABEL_CANCELLED),
}

#: States a valid owner callback may claim.
_CLAIMABLE = ("reserved", "pending")

PRESENTED = "presented"
HANDLED = "handled"
UNSUPPORTED = "unsupported"


class OwnerLike(Protocol):
    @property
    def id(self) -> str: ...


class TargetLike(Protocol):
    @property
    def chat_id(self) -> str: ...

    @property
    def sender_id(self) -> str: ...

    @property
    def is_group(self) -> bool: ...


class SegmentLike(Protocol):
    @property
    def session_id(self) -> str: ...

    @property
    def run_id(self) -> str: ...

    @property
    def segment_id(self) -> str: ...

    @property
    def owner(self) -> OwnerLike: ...

    @property
    def target(self) -> TargetLike: ...


class QuestionLike(Protocol):
    @property
    def answer_key(self) -> str: ...

    @property
    def header(self) -> str: ...

    @property
    def question(self) -> str: ...

    @property
    def options(self) -> Sequence[Any]: ...

    @property
    def multi_select(self) -> bool: ...


class InputRequestLike(Protocol):
    @property
    def request_id(self) -> str: ...

    @property
    def session_id(self) -> str: ...

    @property
    def run_id(self) -> str: ...

    @property
    def owner(self) -> OwnerLike: ...

    @property
    def target(self) -> TargetLike: ...

    @property
    def questions(self) -> Sequence[QuestionLike]: ...

    @property
    def submit_option_id(self) -> str: ...

    def on_settled(self, listener: Callable[[str], Any]) -> Callable[[], Any]: ...

    def respond(self, response: Mapping[str, Any]) -> bool: ...


#: Sends the one notice a person who pressed someone else's card gets (on the pool).
ForbiddenNotice = Callable[[CardTarget, str], Any]


def forbidden_decision(
    notify: ForbiddenNotice | None, target: CardTarget, actor_id: str
) -> Decision:
    """The decision on a press by someone who does not own the card: the ACK, then the
    one notice (`notify(target, actor_id)`) when there is a notifier."""
    decision = Decision.ack(outcome="forbidden")
    return decision if notify is None else decision.then(partial(notify, target, actor_id))


def build_question_card_data(
    request_id: str, questions: Sequence[QuestionLike], texts: Messages | None = None
) -> dict[str, Any]:
    """The ``cardParamMap`` of a new question card (all questions in one form), its
    labels (Other, the custom-answer field and hint, Submit) in the language of
    ``texts`` (default English). The Other choice's value is always
    ``OTHER_OPTION_VALUE``, whatever its label."""
    m = texts or messages()
    fields: list[dict[str, Any]] = []
    for q in questions:
        options = [{"value": option_label(o), "text": option_label(o)} for o in q.options]
        options.append({"value": OTHER_OPTION_VALUE, "text": m.text(TEXT_OTHER)})
        fields.append(
            {
                "name": q.answer_key,
                "label": q.question,
                "type": "MULTI_CHECKBOX_GROUP" if q.multi_select else "CHECKBOX_GROUP",
                "required": True,
                "options": options,
            }
        )
        fields.append(
            {
                "name": f"{q.answer_key}_other",
                "label": m.text(TEXT_OTHER_FIELD, header=q.header),
                "type": "TEXT",
                "required": False,
                "placeholder": m.text(TEXT_OTHER_HINT),
            }
        )
    first = questions[0]
    return {
        "question_id": request_id,
        "question_title": first.header,
        "question_desc": first.question,
        "card_status": "pending",
        "form_btn_text": m.text(TEXT_SUBMIT),
        "selected_text": "",
        "selected_values": "[]",
        "form": {"fields": fields},
    }


def terminal_param_map(
    state: str,
    description: str | None = None,
    *,
    answers: Mapping[str, str] | None = None,
    questions: Sequence[QuestionLike] = (),
    texts: Messages | None = None,
) -> dict[str, str]:
    """The in-place terminal update of a question card, its texts (``description`` too,
    when it is a catalog text) in the language of ``texts`` (default English).

    A ``submitted`` card with ``answers`` shows them (`answers_summary()`) below its
    description and in ``selected_text``; ``selected_values`` lists them (JSON).
    """
    m = texts or messages()
    status, desc, button = _TERMINAL_PROJECTION[state]
    params = {
        "card_status": status,
        "question_desc": m.text(description or desc),
        "form_btn_text": m.text(button),
    }
    if state == "submitted" and answers:
        summary = answers_summary(questions, answers)
        params["question_desc"] = f"{params['question_desc']}\n\n{summary}"
        params["selected_text"] = summary
        shown = [
            cut_text(answers[q.answer_key], MAX_SHOWN_ANSWER_CHARS)
            for q in questions
            if q.answer_key in answers
        ]
        params["selected_values"] = json.dumps(shown, ensure_ascii=False)
    return params


def _values(raw: Any) -> list[str] | None:
    if raw is None:
        return []
    if isinstance(raw, str):
        return [raw] if raw.strip() else []
    if type(raw) is dict or isinstance(raw, Mapping):
        value = raw.get("value")
        return [value] if isinstance(value, str) and value.strip() else None
    if isinstance(raw, list):
        out: list[str] = []
        for item in raw:
            inner = _values(item)
            if inner is None:
                return None
            out.extend(inner)
        return out
    return None


class FormSpec:
    """What a submitted form of one question card may contain (built once per card)."""

    __slots__ = ("allowed_keys", "fields")

    def __init__(self, questions: Sequence[QuestionLike]) -> None:
        #: (answer key, "<key>_other", multi-select, option labels) per question
        self.fields: tuple[tuple[str, str, bool, frozenset[str]], ...] = tuple(
            (
                q.answer_key,
                f"{q.answer_key}_other",
                bool(q.multi_select),
                frozenset(option_label(o) for o in q.options),
            )
            for q in questions
        )
        self.allowed_keys = frozenset(
            key for answer, other, _m, _l in self.fields for key in (answer, other)
        )

    def parse(self, form: Mapping[str, Any]) -> dict[str, str] | None:
        """The encoded answers of ``form``; None if anything is invalid."""
        allowed = self.allowed_keys
        if any(str(key) not in allowed for key in form):
            return None
        answers: dict[str, str] = {}
        for answer_key, other_key, multi_select, labels in self.fields:
            values = _values(form.get(answer_key))
            if not values:
                return None
            if not multi_select and len(values) != 1:
                return None
            resolved: list[str] = []
            for value in values:
                if value == OTHER_OPTION_VALUE:
                    other = form.get(other_key)
                    if not isinstance(other, str) or not other.strip():
                        return None
                    resolved.append(other.strip())
                elif value in labels:
                    resolved.append(value)
                else:
                    return None
            answers[answer_key] = ", ".join(resolved)
        return answers


def parse_answers(
    form: Mapping[str, Any], questions: Sequence[QuestionLike]
) -> dict[str, str] | None:
    """Validate a submitted form and encode the answers; None if anything is invalid.

    Every form key must be an answer key or ``<key>_other``; each question needs at least
    one value (exactly one when single-select); ``__ck_other__`` takes the non-blank
    ``<key>_other`` text; other values must be option labels. Multi-select values are
    joined with ``", "``.
    """
    return FormSpec(questions).parse(form)


@dataclass(frozen=True)
class QuestionTombstone:
    """What remains of a finished question card: correlation and terminal state."""

    request_id: str
    run_id: str
    state: str


@dataclass(eq=False)
class QuestionRecord:
    """A live question card. ``ctx`` is dropped when the record becomes terminal."""

    request_id: str
    run_id: str
    session_id: str
    owner_key: str
    chat_id: str
    target: CardTarget
    out_track_id: str
    scope: tuple[str, str]
    queue: ProjectionQueue
    ctx: InputRequestLike | None
    questions: tuple[QuestionLike, ...]
    form: FormSpec
    state: StateCell[str] = field(default_factory=lambda: StateCell("reserved"))
    delivered: bool = False
    projected: bool = False
    forbidden_actors: set[str] = field(default_factory=set)
    #: when the card expires (injected clock), counted from its presentation
    deadline: float = 0.0
    timer: TimerHandle | None = None
    unsubscribe: Callable[[], Any] | None = None
    #: the claimed card's place in the run's projection queue, reserved at the claim
    slot: Slot | None = None
    #: the claimed answer's responder against the request's settlement
    race: FormRace = field(default_factory=FormRace)


class QuestionCardApi(Protocol):
    """The two card calls a `QuestionCardController` makes (a ``CardApi`` is one;
    approval cards pass their own, see `channelkit.platforms.dingtalk.approvals`)."""

    def create_and_deliver(
        self,
        template_id: str,
        out_track_id: str,
        target: CardTarget,
        card_param_map: Mapping[str, Any],
    ) -> None:
        """Create the card and deliver it to ``target``."""
        ...

    def update_instance(self, out_track_id: str, card_param_map: Mapping[str, Any]) -> None:
        """Merge ``card_param_map`` into the card's variables."""
        ...


class QuestionCardController:
    """Owns every question card of one adapter; see the module docstring.

    ``send_text(chat_id, text)`` delivers the delivery-failure notice;
    ``notify_forbidden(target, actor_id)`` the notice to a person who pressed a card
    that is not theirs.
    ``timeout_seconds`` is the effective card lifetime. ``registry`` holds the live
    records (key: request id; indexes ``track``: outTrackId, ``scope``: (session, owner))
    and their tombstones (key: outTrackId).
    """

    def __init__(
        self,
        api: QuestionCardApi,
        *,
        clock: Clock,
        scheduler: Scheduler,
        timeout_seconds: float,
        send_text: Callable[[str, str], Any],
        present_timeout: float = 60.0,
        on_template_rejected: Callable[[], None] | None = None,
        registry: CardRegistry[QuestionRecord, QuestionTombstone] | None = None,
        notify_forbidden: ForbiddenNotice | None = None,
        texts_for: Callable[[str | None], Messages] | None = None,
    ) -> None:
        self._api = api
        #: the catalog texts a card's owner reads (their language, else the channel's)
        self._texts_for: Callable[[str | None], Messages] = texts_for or (lambda _: messages())
        #: the notice to a person who pressed someone else's card (None: no notice)
        self.notify_forbidden = notify_forbidden
        self._clock = clock
        self._scheduler = scheduler
        self._timeout = timeout_seconds
        self._send_text = send_text
        self._present_timeout = present_timeout
        self._on_template_rejected = on_template_rejected
        self.registry: CardRegistry[QuestionRecord, QuestionTombstone] = (
            registry if registry is not None else MemoryCardRegistry(clock)
        )
        self._lock = self.registry.lock

    # -- inspection ---------------------------------------------------------------------
    @property
    def live_count(self) -> int:
        return len(self.registry)

    def record(self, request_id: str) -> QuestionRecord | None:
        return self.registry.get(request_id)

    def by_track(self, out_track_id: str) -> QuestionRecord | None:
        return self.registry.find("track", out_track_id)

    def map_sizes(self) -> dict[str, int]:
        with self._lock:
            return {
                "by_request": len(self.registry),
                "by_track": self.registry.index_size("track"),
                "active_by_scope": self.registry.index_size("scope"),
                "tombstones": self.registry.tombstone_count(),
            }

    # -- presentation ----------------------------------------------------------------------
    def present(
        self,
        ctx: InputRequestLike,
        *,
        owner_key: str,
        chat_id: str,
        target: CardTarget,
        queue: ProjectionQueue,
        timeout: float | None = None,
    ) -> str:
        """Present ``ctx`` as a card; returns "presented", "handled" or "unsupported".

        ``timeout`` is the card's lifetime in seconds, counted from now (default: the
        controller's ``timeout_seconds``), cut to end ``EXPIRY_MARGIN`` before
        ``ctx.expires_at`` (core's own deadline) so the card expires first. Blocks
        (bounded) until the card was delivered or failed; call it from a pool thread.
        """
        # DingTalk's own scope, not `input_scope` / `reserve_native_input`: one live card
        # per session and owner. A second request of the same run gets the text prompt
        # as everywhere, but a request of a newer run supersedes the older run's card
        # (ended expired, "A newer question is available"), and a claimed card (its
        # answer on its way to the agent) never blocks the next question.
        scope = (ctx.session_id, owner_key)
        superseded: QuestionRecord | None = None
        with self._lock:
            if len(self.registry) >= MAX_LIVE_QUESTION_CARDS:
                logger.warning("too many live question cards; request falls back to text")
                return UNSUPPORTED
            existing = self.registry.find("scope", scope)
            if existing is not None and existing.state.state in ("reserved", "pending"):
                if existing.run_id == ctx.run_id:
                    return UNSUPPORTED
                superseded = existing
            record = QuestionRecord(
                request_id=ctx.request_id,
                run_id=ctx.run_id,
                session_id=ctx.session_id,
                owner_key=owner_key,
                chat_id=chat_id,
                target=target,
                out_track_id="ck-question-" + uuid.uuid4().hex,
                scope=scope,
                queue=queue,
                ctx=ctx,
                questions=tuple(ctx.questions),
                form=FormSpec(ctx.questions),
                state=self.registry.state("reserved"),
                deadline=question_deadline(
                    self._clock.now(), self._timeout if timeout is None else timeout, ctx
                ),
            )
            if not self.registry.add(
                record.request_id, record, track=record.out_track_id, scope=scope
            ):
                return UNSUPPORTED
        if superseded is not None:
            self._finalize(superseded, "expired", ("reserved", "pending"), NEWER_QUESTION_TEXT)

        def on_settled(reason: str) -> None:
            self._on_settled(record, str(reason))

        unsubscribe = ctx.on_settled(on_settled)
        with self._lock:
            if record.state.state == "terminal":
                unsubscribe()
            else:
                record.unsubscribe = unsubscribe
        future = queue.enqueue(lambda: self._deliver(record, ctx), drain_here=True)
        try:
            result: str = future.result(timeout=self._present_timeout)
        except FutureTimeout:
            logger.warning("question card delivery timed out; request %s uses text", ctx.request_id)
            if self._finalize(record, "cancelled", ("reserved",)):
                return UNSUPPORTED
            return PRESENTED
        return result

    def _deliver(self, record: QuestionRecord, ctx: InputRequestLike) -> str:
        if record.state.state == "terminal":
            return PRESENTED  # settled before delivery started: nothing to show
        try:
            self._api.create_and_deliver(
                QUESTION_CARD_TEMPLATE_ID,
                record.out_track_id,
                record.target,
                build_question_card_data(
                    record.request_id, record.questions, self._texts_for(record.owner_key)
                ),
            )
        except ChannelKitError as exc:
            log_card_error(
                "question card creation", exc, QUESTION_CARD_TEMPLATE_ID, record.out_track_id
            )
            if is_template_rejection(exc) and self._on_template_rejected is not None:
                self._on_template_rejected()
            if not self._finalize(record, "cancelled", ("reserved",)):
                return PRESENTED  # settled meanwhile; nothing more to do
            try:
                self._send_text(
                    record.chat_id,
                    delivery_failure_text(record.questions, self._texts_for(record.owner_key)),
                )
            except Exception:
                logger.exception("question delivery-failure notice failed")
            cancel_request(ctx.respond, record.request_id)
            return HANDLED
        project_state: tuple[str, str | None] | None = None
        with self._lock:
            record.delivered = True
            if record.state.compare_and_set("reserved", "pending"):
                record.timer = self._scheduler.call_later(
                    max(0.0, record.deadline - self._clock.now()), lambda: self._expire(record)
                )
                return PRESENTED
            tomb = self.registry.tombstone(record.out_track_id)
            if not record.projected and tomb is not None:
                record.projected = True
                project_state = (tomb.state, _description_for(tomb.state))
        if project_state is not None:
            # settled during delivery: show the terminal state, never reactivate
            self._project(
                record.out_track_id,
                terminal_param_map(
                    project_state[0], project_state[1], texts=self._texts_for(record.owner_key)
                ),
            )
        return PRESENTED

    # -- termination -----------------------------------------------------------------------
    def _finalize(
        self,
        record: QuestionRecord,
        state: str,
        expected: Sequence[str],
        description: str | None = None,
        *,
        slot: Slot | None = None,
        then: Callable[[], None] | None = None,
        answers: Mapping[str, str] | None = None,
    ) -> bool:
        """Make ``record`` terminal (first caller wins) and queue its in-place update."""
        with self._lock:
            if not record.state.compare_and_set(tuple(expected), "terminal"):
                if slot is not None:
                    slot.skip()
                return False
            if record.timer is not None:
                record.timer.cancel()
                record.timer = None
            unsubscribe, record.unsubscribe = record.unsubscribe, None
            record.ctx = None
            self.registry.remove(record.request_id, record)
            self.registry.bury(
                record.out_track_id, QuestionTombstone(record.request_id, record.run_id, state)
            )
            project = record.delivered and not record.projected
            if project:
                record.projected = True
        if unsubscribe is not None:
            try:
                unsubscribe()
            except Exception:
                logger.debug("settlement unsubscribe failed", exc_info=True)
        track = record.out_track_id
        params = terminal_param_map(
            state,
            description,
            answers=answers,
            questions=record.questions,
            texts=self._texts_for(record.owner_key),
        )

        def job() -> None:
            if project:
                self._project(track, params)
            if then is not None:
                then()

        if project or then is not None:
            if slot is not None:
                slot.fill(job)
            else:
                record.queue.enqueue(job)
        elif slot is not None:
            slot.skip()
        return True

    def _project(self, out_track_id: str, params: Mapping[str, str]) -> None:
        try:
            self._api.update_instance(out_track_id, params)
        except ChannelKitError as exc:
            log_card_error(
                "question card finalization", exc, QUESTION_CARD_TEMPLATE_ID, out_track_id
            )

    def _on_settled(self, record: QuestionRecord, reason: str) -> None:
        if record.race.on_settled(reason):
            return  # the claimed answer lost: the race ends the card as the winner
        self._finalize(record, _winner_state(reason), ("reserved", "pending"))

    def _end_claimed(
        self, record: QuestionRecord, slot: Slot, answers: Mapping[str, str] | None, state: str
    ) -> bool:
        """End the claimed card in ``state`` in its ``slot`` of the run's projection queue
        (the answers shown when submitted; expired says it is no longer available)."""
        return self._finalize(
            record, state, ("claimed",), _description_for(state), slot=slot, answers=answers
        )

    def _tell_lost(self, record: QuestionRecord) -> None:
        """Tell the chat once that the question was already answered."""
        try:
            self._send_text(record.chat_id, ALREADY_ANSWERED_TEXT)
        except Exception:
            logger.exception("already-answered notice failed")

    def _expire(self, record: QuestionRecord) -> None:
        ctx = record.ctx
        if ctx is None:
            return
        cancel = partial(cancel_request, ctx.respond, record.request_id)
        self._finalize(record, "expired", ("pending",), then=cancel)

    def cancel_run(self, run_id: str, state: str = "cancelled") -> int:
        """End every reserved/pending card of ``run_id`` without calling the responder."""
        with self._lock:
            records = [r for r in self.registry.records() if r.run_id == run_id]
        ended = 0
        for record in records:
            description = UNAVAILABLE_TEXT if state == "expired" else None
            if self._finalize(record, state, ("reserved", "pending"), description):
                ended += 1
        return ended

    # -- callbacks --------------------------------------------------------------------------
    def claim(self, callback: CardCallback) -> Decision:
        """Arbitrate a submit/cancel callback synchronously (before the ACK).

        Order: correlate, parse, authorize, validate every answer key, then claim with
        one compare-and-set. The controller lock is held only for the lookups and the
        claim; the form is validated outside it (against the card's immutable spec).
        An accepted claim's work calls the responder: run it on the pool after the ACK.

        With a state store, DingTalk's one difference comes first: the claim across
        processes (one atomic store ``add`` in
        `DingtalkCluster`), after which
        the instance that owns the run claims here as well, so the answer's race against
        the settlement stays local to that instance.
        """
        actor = callback.actor_id
        record = self.registry.find("track", callback.out_track_id)
        # A reserved card is claimable too: a valid callback for it proves it was
        # delivered (DingTalk shows the card before createAndDeliver answers).
        if record is None or record.state.state not in _CLAIMABLE:
            return Decision.ignored()
        if actor != record.owner_key:
            with self._lock:
                first = first_notice(record.forbidden_actors, actor)
            if not first:
                return Decision.ignored()
            return forbidden_decision(self.notify_forbidden, record.target, actor)
        ctx = record.ctx
        if ctx is None or not callback.has_business_payload:
            return Decision.ignored()
        answers: dict[str, str] | None = None
        success_state = "cancelled"
        if not (callback.is_cancel or callback.action_id == "cancel"):
            if callback.action_id not in ("submit", record.request_id):
                return Decision.ignored()
            answers = record.form.parse(callback.form_data)
            if answers is None:
                return Decision.ignored()
            success_state = "submitted"
        response = answer_response(ctx.submit_option_id, answers)
        with self._lock:
            if not record.state.compare_and_set(_CLAIMABLE, "claimed"):
                return Decision.ignored()
            timer, record.timer = record.timer, None
            slot = record.slot = record.queue.reserve()
        if timer is not None:
            timer.cancel()

        shown = response.get("answers")

        def execute() -> None:
            """The claimed answer (pool, after the ACK): end the card in what the
            responder decided (`FormRace`). Its ending runs where it is decided: it
            only fills the card's slot, reserved at the claim, in the run's queue."""
            record.race.answer(
                partial(ctx.respond, response),
                claimed=success_state,
                end=partial(self._end_claimed, record, slot, shown),
                tell_lost=partial(self._tell_lost, record),
                run=_run_here,
                scheduler=self._scheduler,
                clock=self._clock,
                deadline=record.deadline,
                request_id=record.request_id,
                winner=_winner_state,
            )

        return Decision.ack().then(execute)


def _winner_state(reason: str) -> str:
    """The card state of a settlement elsewhere: `winner_state`, except that a DingTalk
    card tells an answer given elsewhere apart from its own expiry, so that one gets a
    state of its own (`RESOLVED_OUTSIDE`: shown expired with "Resolved outside
    this card.", also on a card delivered after the settlement, from its tombstone)."""
    state = winner_state(reason)
    return RESOLVED_OUTSIDE if state == "expired" else state


def _description_for(state: str) -> str | None:
    return UNAVAILABLE_TEXT if state == "expired" else None


def _run_here(job: Callable[[], object]) -> None:
    """Run ``job`` on the calling thread (a card's ending only fills its queue slot)."""
    job()

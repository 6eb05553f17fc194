"""Telegram native questions: inline keyboards bound to one captured input request.

``present_user_input_request`` sends one message per question with an inline keyboard:

* single select: one button per option; a tap chooses it (marked ``✓``);
* multi-select: one toggle button per option (marked ``✓`` when selected), then
  ``Submit``;
* every message also has ``Cancel``, which cancels the whole request.

When every question has an answer, the request is submitted to the original permission
in the answer format every client shares (`channelkit.agents.base.PermissionResponse`)::

    {"outcome": {"outcome": "selected", "optionId": <submit option>},
     "answers": {"0": "Blue", "1": "Logs, Metrics"}}

Callback data
-------------
Telegram limits ``callback_data`` to 64 bytes, so a button carries only a short opaque
token plus an action: ``ck:<token>:<action>`` where ``<token>`` is 11 URL-safe random
characters mapped to the live request in a bounded map, and ``<action>`` is
``o<question>.<option>`` (tap an option), ``s<question>`` (submit a multi-select) or
``x`` (cancel). The longest value is 20 bytes.

State machine and arbitration
-----------------------------
``reserved -> pending -> claimed -> terminal``. A record is reserved (and subscribed to
settlement) before its messages are sent, becomes pending only if still live after
delivery, is claimed by exactly one valid callback (submit or cancel, under the
presenter lock, before any network call), and becomes terminal once. A valid owner tap
on a message of a still-reserved record counts too (the message is visible before
``sendMessage`` answers; the token in its data proves it is ours): it records the
choice or claims the request, and the delivery that finishes later never activates a
claimed record (no expiry timer; the responder projects the terminal state). The expiry
timer ends the questions ``EXPIRY_MARGIN`` before core's own deadline
(``ctx.expires_at``). Every terminal
transition edits all of the request's messages in place (keyboard removed) to
``Submitted`` / ``Cancelled`` / ``Expired``; a failed edit is logged and never rolls back
the response.

Exactly one ``respond()`` caller wins the request. When a claimed keyboard answer loses
(its responder says ``False`` because a ``/deny``, an ``/approve`` or an answer given
elsewhere settled the request first), the messages end in the winner's state from that
settlement (``Cancelled`` for a cancel or deny, ``Expired`` for an answer given
elsewhere), waiting for the settlement if it is still on its way (at most until the
question's deadline, then ``Expired``), and the chat is told once that the question was
already answered. A run that was cancelled ends its messages ``Cancelled`` without
that notice (the run's own terminal output says so).

At most one keyboard is live per session, owner and run: a second request of the same
run while the first is live gets the text prompt. That rule, the arbitration of a
claimed answer against the settlement and the winner's state are the ones every native
input keeps (`channelkit.platforms.common.native_input`).

Terminal records leave a tombstone (token -> terminal state, 10 minutes, 1,000 entries)
so late taps are answered "no longer active".

Every tap is answered with ``answerCallbackQuery``: taps by anyone but the run owner get
a short refusal and change nothing; malformed data, unknown or stale tokens, taps on a
message that does not belong to the request, and duplicate taps change nothing and are
answered too. Answers are never logged.
"""

from __future__ import annotations

import logging
import re
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

from channelkit.core.catalog import Messages, en, messages
from channelkit.platforms.common import question_deadline
from channelkit.platforms.common.contract import Decision, DecisionOutcome
from channelkit.platforms.common.native_input import (
    FormRace,
    answer_response,
    cancel_request,
    input_scope,
    reserve_native_input,
    winner_state,
)
from channelkit.platforms.common.registry import CardRegistry, MemoryCardRegistry
from channelkit.platforms.telegram.ingress import TgCallbackQuery

__all__ = [
    "CALLBACK_PREFIX",
    "CallbackAction",
    "QuestionApi",
    "TelegramQuestionPresenter",
    "build_keyboard",
    "build_question_text",
    "encode_callback",
    "new_token",
    "parse_callback",
]

logger = logging.getLogger(__name__)

CALLBACK_PREFIX = "ck"
_TOKEN_BYTES = 8  # -> 11 URL-safe characters
_CALLBACK_RE = re.compile(r"^ck:([A-Za-z0-9_-]{11}):(?:o([0-3])\.([0-3])|s([0-3])|(x))$")
MAX_CALLBACK_BYTES = 64
MAX_MESSAGE_CHARS = 4096
MAX_ANSWER_TEXT = 200

TEXT_NOT_OWNER = en("owner.answer")
TEXT_STALE = en("question.stale")
TEXT_UNKNOWN = en("button.unknown")
TEXT_WRONG_MESSAGE = en("question.wrong_message")
TEXT_BUSY = en("question.busy")
TEXT_PICK_ONE = en("question.pick_one")
TEXT_SUBMITTED = en("question.submitted")
TEXT_CANCELLED = en("question.cancelled")
TEXT_SELECTED = en("question.selected")
TEXT_UNSELECTED = en("question.unselected")
TEXT_RECORDED = en("question.recorded")
#: Sent once to the chat when a claimed keyboard answer lost to another surface.
TEXT_ALREADY_ANSWERED = en("question.already_answered_keyboard")

LABEL_SUBMITTED = en("label.submitted")
LABEL_CANCELLED = en("label.cancelled")
LABEL_EXPIRED = en("label.expired")

TERMINAL_LABELS = {
    "submitted": LABEL_SUBMITTED,
    "cancelled": LABEL_CANCELLED,
    "expired": LABEL_EXPIRED,
}

CHECK = "✓ "


@dataclass(frozen=True)
class CallbackAction:
    """A parsed ``callback_data``: ``kind`` is ``option``, ``submit`` or ``cancel``."""

    token: str
    kind: str
    question: int = -1
    option: int = -1


def new_token() -> str:
    """A fresh opaque token (11 URL-safe characters, 64 random bits)."""
    return secrets.token_urlsafe(_TOKEN_BYTES)


def encode_callback(token: str, kind: str, question: int = 0, option: int = 0) -> str:
    """Encode a button's ``callback_data`` (always within Telegram's 64-byte limit)."""
    if kind == "option":
        action = f"o{question}.{option}"
    elif kind == "submit":
        action = f"s{question}"
    elif kind == "cancel":
        action = "x"
    else:
        raise ValueError(f"kind: unknown callback kind {kind!r}")
    data = f"{CALLBACK_PREFIX}:{token}:{action}"
    if len(data.encode("utf-8")) > MAX_CALLBACK_BYTES:  # pragma: no cover - by construction
        raise ValueError("callback_data: exceeds 64 bytes")
    return data


def parse_callback(data: str | None) -> CallbackAction | None:
    """Parse ``callback_data``; ``None`` when it is not one of ours or malformed."""
    if not isinstance(data, str) or len(data) > MAX_CALLBACK_BYTES:
        return None
    match = _CALLBACK_RE.match(data)
    if match is None:
        return None
    token, q_opt, o_opt, q_sub, cancel = match.groups()
    if cancel:
        return CallbackAction(token=token, kind="cancel")
    if q_sub is not None:
        return CallbackAction(token=token, kind="submit", question=int(q_sub))
    return CallbackAction(token=token, kind="option", question=int(q_opt), option=int(o_opt))


def _attr(obj: Any, *names: str, default: Any = None) -> Any:
    """Read the first present attribute (or mapping key) of ``names``."""
    for name in names:
        if isinstance(obj, dict) and name in obj:
            return obj[name]
        if hasattr(obj, name):
            return getattr(obj, name)
    return default


def _option_label(option: Any) -> str:
    if isinstance(option, tuple | list):
        return str(option[0])
    return str(_attr(option, "label", default=""))


def _option_description(option: Any) -> str:
    if isinstance(option, tuple | list):
        return str(option[1]) if len(option) > 1 else ""
    return str(_attr(option, "description", default="") or "")


def _truncate(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def build_question_text(
    question: Any, index: int, total: int, texts: Messages | None = None
) -> str:
    """The message text of one question (plain text, no parse mode); its hint in the
    locale of ``texts`` (default English)."""
    header = str(_attr(question, "header", default="") or "")
    body = str(_attr(question, "question", default="") or "")
    multi = bool(_attr(question, "multi_select", "multiSelect", default=False))
    lines = [f"❓ {header}" + (f" ({index + 1}/{total})" if total > 1 else ""), body, ""]
    for option in _attr(question, "options", default=()) or ():
        label = _option_label(option)
        description = _option_description(option)
        lines.append(f"• {label}" + (f" — {description}" if description else ""))
    lines.append("")
    lines.append((texts or messages()).get("question.hint_many" if multi else "question.hint_one"))
    return _truncate("\n".join(lines), MAX_MESSAGE_CHARS)


def build_keyboard(
    token: str,
    question_index: int,
    question: Any,
    selected: set[int] | frozenset[int] = frozenset(),
    texts: Messages | None = None,
) -> dict[str, Any]:
    """The ``InlineKeyboardMarkup`` of one question message.

    One row per option (``✓`` marks the chosen/selected ones); the last row holds
    ``Submit`` (multi-select only) and ``Cancel``, labelled in the locale of ``texts``.
    """
    m = texts or messages()
    multi = bool(_attr(question, "multi_select", "multiSelect", default=False))
    rows: list[list[dict[str, str]]] = []
    for option_index, option in enumerate(_attr(question, "options", default=()) or ()):
        label = _truncate(_option_label(option), 60)
        text = (CHECK + label) if option_index in selected else label
        rows.append(
            [
                {
                    "text": text,
                    "callback_data": encode_callback(token, "option", question_index, option_index),
                }
            ]
        )
    last: list[dict[str, str]] = []
    if multi:
        last.append(
            {
                "text": m.get("button.submit"),
                "callback_data": encode_callback(token, "submit", question_index),
            }
        )
    last.append({"text": m.get("button.cancel"), "callback_data": encode_callback(token, "cancel")})
    rows.append(last)
    return {"inline_keyboard": rows}


class QuestionApi(Protocol):
    """The Bot API calls the presenter makes (implemented by ``TelegramApi``)."""

    def send_message(
        self,
        chat_id: int | str,
        text: str,
        *,
        reply_markup: dict[str, Any] | None = None,
        message_thread_id: int | None = None,
    ) -> int: ...

    def edit_message_text(
        self,
        chat_id: int | str,
        message_id: int,
        text: str,
        *,
        reply_markup: dict[str, Any] | None = None,
    ) -> None: ...

    def answer_callback_query(self, callback_query_id: str, text: str | None = None) -> None: ...


@dataclass(eq=False)
class _Record:
    token: str
    ctx: Any  # UserInputRequestContext
    chat_id: int | str
    thread_id: int | None
    owner_id: str
    questions: Sequence[Any]
    texts: list[str]
    state: str = "reserved"  # reserved | pending | claimed | terminal
    message_ids: list[int | None] = field(default_factory=list)
    selections: list[set[int]] = field(default_factory=list)
    done: list[bool] = field(default_factory=list)
    terminal: str | None = None
    timer: Any = None
    unsubscribe: Callable[[], Any] | None = None
    deadline: float = 0.0  # absolute expiry on the injected clock
    #: the claimed answer's responder against the request's settlement
    race: FormRace = field(default_factory=FormRace)


class TelegramQuestionPresenter:
    """Owns every live Telegram question: registry, claims, expiry and projections.

    ``api`` makes the Bot API calls; ``submit(key, fn)`` runs ``fn`` on a per-key serial
    queue of the pool (projections for one request stay ordered and never run on the
    web thread); ``scheduler.call_later(delay, fn)`` arms the expiry timer; ``clock``
    (``now()`` in seconds) drives tombstone expiry. ``registry`` holds the live records
    (key: callback token; index ``scope``: session, owner and run) and their tombstones
    (token -> (request id, terminal state)); its lock guards every record's state.
    """

    MAX_LIVE = 1000
    TOMBSTONE_TTL_S = 600.0
    MAX_TOMBSTONES = 1000

    def __init__(
        self,
        api: QuestionApi,
        *,
        submit: Callable[[str, Callable[[], Any]], Any],
        scheduler: Any,
        clock: Any,
        timeout_s: float = 270.0,
        registry: CardRegistry[_Record, tuple[str, str]] | None = None,
    ) -> None:
        self._api = api
        #: the catalog texts a person reads (the channel sets its ``messages_for``)
        self.texts_for: Callable[[str | None], Messages] = lambda _: messages()
        self._submit = submit
        self._scheduler = scheduler
        self._clock = clock
        self._timeout_s = timeout_s
        # token -> (request id, terminal state) tombstones: correlation and state only.
        self.registry: CardRegistry[_Record, tuple[str, str]] = (
            registry
            if registry is not None
            else MemoryCardRegistry(
                clock,
                maxsize=self.MAX_LIVE,
                tombstone_ttl=self.TOMBSTONE_TTL_S,
                tombstone_maxsize=self.MAX_TOMBSTONES,
            )
        )
        self._lock = self.registry.lock

    # -- introspection (tests, diagnostics) ---------------------------------------------
    def live_count(self) -> int:
        """Number of live (non-terminal) question records."""
        return len(self.registry)

    def tombstone_count(self) -> int:
        """Number of retained terminal tombstones."""
        return self.registry.tombstone_count()

    def state_of(self, request_id: str) -> str | None:
        """``reserved``/``pending``/``claimed`` for a live request, else its terminal state."""
        with self._lock:
            for record in self.registry.records():
                if record.ctx.request_id == request_id:
                    return record.state
            for tomb_request_id, state in self.registry.tombstones():
                if tomb_request_id == request_id:
                    return state
        return None

    def token_for(self, request_id: str) -> str | None:
        """The callback token of a live request (tests use it to forge taps)."""
        for record in self.registry.records():
            if record.ctx.request_id == request_id:
                return record.token
        return None

    # -- presentation --------------------------------------------------------------------
    def present(
        self, ctx: Any, chat_id: int | str | None = None, thread_id: int | None = None
    ) -> str:
        """Deliver the question messages; returns ``presented`` or ``unsupported``.

        ``chat_id`` / ``thread_id`` default to the request's own target (its chat and
        forum topic). Called on the run's worker (never on a web thread); it blocks on
        the sends.
        """
        if chat_id is None:
            chat_id = ctx.target.chat_id
            thread_id = topic_of(ctx.target.thread_id)
        questions = list(ctx.questions)
        if not 1 <= len(questions) <= 4:
            return "unsupported"
        owner_texts = self.texts_for(str(ctx.owner.id))  # the questions in its language
        with self._lock:
            token = new_token()
            while (  # pragma: no cover
                self.registry.get(token) is not None or self.registry.tombstone(token) is not None
            ):
                token = new_token()
            record = _Record(
                token=token,
                ctx=ctx,
                chat_id=chat_id,
                thread_id=thread_id,
                owner_id=str(ctx.owner.id),
                questions=questions,
                texts=[
                    build_question_text(q, i, len(questions), owner_texts)
                    for i, q in enumerate(questions)
                ],
                message_ids=[None] * len(questions),
                selections=[set() for _ in questions],
                done=[False] * len(questions),
                deadline=question_deadline(self._clock.now(), self._timeout_s, ctx),
            )
            # a second request of the run while its keyboard is live, or a full
            # registry: the text prompt
            if not reserve_native_input(self.registry, token, record, input_scope(ctx)):
                return "unsupported"
        record.unsubscribe = ctx.on_settled(lambda reason: self._on_settled(record, reason))

        for index, question in enumerate(questions):
            with self._lock:
                if record.state != "reserved":
                    break  # settled while delivering: stop sending
            try:
                message_id = self._api.send_message(
                    chat_id,
                    record.texts[index],
                    reply_markup=build_keyboard(token, index, question, texts=owner_texts),
                    message_thread_id=thread_id,
                )
            except Exception as exc:
                logger.warning(
                    "telegram question delivery failed for request %s: %s",
                    ctx.request_id,
                    type(exc).__name__,
                )
                sent_any = any(m is not None for m in record.message_ids)
                if self._finalize(record, "expired") and sent_any:
                    self._enqueue_terminal_projection(record)
                with self._lock:
                    if record.state == "claimed":
                        return "presented"  # answered by an early tap
                return "unsupported"
            with self._lock:
                record.message_ids[index] = message_id

        with self._lock:
            if record.state == "reserved":
                record.state = "pending"
                record.timer = self._scheduler.call_later(
                    max(0.0, record.deadline - self._clock.now()),
                    lambda: self._on_timeout(record),
                )
                return "presented"
            if record.state == "claimed":
                return "presented"  # an early tap claimed it: its responder projects
        # Settled while delivering: the messages just sent become non-interactive.
        self._enqueue_terminal_projection(record)
        return "presented"

    # -- callbacks -----------------------------------------------------------------------
    def handle_callback(self, query: TgCallbackQuery) -> bool:
        """`decide_callback()` with its work queued at once (no ACK to wait for):
        True when the tap belonged to this presenter's scheme, False when it is not
        ours (the caller answers it)."""
        decision = self.decide_callback(query)
        if decision is None:
            return False
        decision.run_after()
        return True

    def decide_callback(self, query: TgCallbackQuery) -> Decision | None:
        """Decide a button tap synchronously (web thread): correlate, authorize, claim.

        None when ``callback_data`` is not this presenter's scheme (the caller answers
        it); else a `Decision` whose work queues the network work
        (``answerCallbackQuery``, the responder, message edits): run it after the ACK.
        """
        action = parse_callback(query.data)
        if action is None:
            if not (query.data or "").startswith(CALLBACK_PREFIX + ":"):
                return None
            texts = self.texts_for(str(query.from_user.id))
            answer = self._answer_job(query.id, texts.text(TEXT_UNKNOWN), key=f"cq:{query.id}")
            return Decision.ignored().then(answer)
        texts = self.texts_for(str(query.from_user.id))  # the tapper's language
        response: list[Callable[[], None]] = []
        with self._lock:
            record = self.registry.get(action.token)
            if record is None:
                stale = self.registry.tombstone(action.token) is not None
            else:
                reply = self._apply(record, action, query, response)
        if record is None:
            text = texts.text(TEXT_STALE if stale else TEXT_UNKNOWN)
            answer = self._answer_job(query.id, text, key=f"cq:{query.id}")
            return Decision.ignored().then(answer)
        token = record.token
        outcome: DecisionOutcome = "accepted"
        if reply == TEXT_NOT_OWNER:
            outcome = "forbidden"
        elif reply in (TEXT_WRONG_MESSAGE, TEXT_BUSY, TEXT_STALE, TEXT_UNKNOWN):
            outcome = "ignored"
        return Decision.ack(outcome=outcome).then(
            self._answer_job(query.id, texts.text(reply), key=token),
            *(partial(self._submit, token, job) for job in response),
        )

    def _apply(
        self,
        record: _Record,
        action: CallbackAction,
        query: TgCallbackQuery,
        jobs: list[Callable[[], None]],
    ) -> str:
        """Validate and apply one tap under the lock; returns the callback answer text."""
        message = query.message
        if message is None or str(message.chat.id) != str(record.chat_id):
            return TEXT_WRONG_MESSAGE
        reserved = record.state == "reserved"
        if action.kind == "cancel":
            # while reserved, a message whose sendMessage has not answered yet is ours
            # too (the token proves it); its id is recorded when the send returns
            if message.message_id not in record.message_ids and not (
                reserved and None in record.message_ids
            ):
                return TEXT_WRONG_MESSAGE
        else:
            if action.question >= len(record.questions):
                return TEXT_WRONG_MESSAGE
            known = record.message_ids[action.question]
            if known != message.message_id and not (reserved and known is None):
                return TEXT_WRONG_MESSAGE
        if str(query.from_user.id) != record.owner_id:
            return TEXT_NOT_OWNER
        if record.state not in ("reserved", "pending"):
            return TEXT_BUSY if record.state == "claimed" else TEXT_STALE
        if action.kind == "cancel":
            record.state = "claimed"
            jobs.append(lambda: self._respond(record, "cancel", None))
            return TEXT_CANCELLED

        q = action.question
        question = record.questions[q]
        multi = bool(_attr(question, "multi_select", "multiSelect", default=False))
        options = list(_attr(question, "options", default=()) or ())
        if action.kind == "option":
            if action.option >= len(options):
                return TEXT_WRONG_MESSAGE
            if multi:
                selected = record.selections[q]
                if action.option in selected:
                    selected.discard(action.option)
                    reply = TEXT_UNSELECTED
                else:
                    selected.add(action.option)
                    reply = TEXT_SELECTED
                record.done[q] = False
            else:
                if record.done[q] and record.selections[q] == {action.option}:
                    return TEXT_RECORDED  # duplicate tap: nothing changes
                record.selections[q] = {action.option}
                record.done[q] = True
                reply = TEXT_RECORDED
        else:  # submit
            if not multi:
                return TEXT_WRONG_MESSAGE
            if not record.selections[q]:
                return TEXT_PICK_ONE
            if record.done[q]:
                return TEXT_RECORDED
            record.done[q] = True
            reply = TEXT_RECORDED

        if all(record.done):
            record.state = "claimed"
            answers = self._encode_answers(record)
            jobs.append(lambda: self._respond(record, "submit", answers))
            return TEXT_SUBMITTED
        selected_now = frozenset(record.selections[q])
        jobs.append(lambda: self._edit_selection(record, q, selected_now))
        return reply

    @staticmethod
    def _encode_answers(record: _Record) -> dict[str, str]:
        answers: dict[str, str] = {}
        for index, question in enumerate(record.questions):
            options = list(_attr(question, "options", default=()) or ())
            labels = [_option_label(options[i]) for i in sorted(record.selections[index])]
            key = str(_attr(question, "answer_key", "answerKey", default=str(index)))
            answers[key] = ", ".join(labels)
        return answers

    # -- responder, settlement, expiry ---------------------------------------------------
    def _respond(self, record: _Record, action: str, answers: dict[str, str] | None) -> None:
        """Run on the record's serial queue after the callback was claimed: answer the
        request, then end the keyboard in what the responder decided (`FormRace`)."""
        submitted = (answers or {}) if action == "submit" else None
        response = answer_response(record.ctx.submit_option_id, submitted)
        with self._lock:  # the question's own expiry: never needed once claimed
            timer, record.timer = record.timer, None
        if timer is not None:
            timer.cancel()
        record.race.answer(
            partial(record.ctx.respond, response),
            claimed="submitted" if action == "submit" else "cancelled",
            end=partial(self._end_claimed, record),
            tell_lost=partial(self._tell_lost, record),
            run=partial(self._submit, record.token),
            scheduler=self._scheduler,
            clock=self._clock,
            deadline=record.deadline,
            request_id=str(record.ctx.request_id),
        )

    def _end_claimed(self, record: _Record, state: str) -> bool:
        """End the claimed record in ``state`` and show it; True for the call that did."""
        if not self._finalize(record, state, from_claim=True):
            return False
        self._project_terminal(record)
        return True

    def _tell_lost(self, record: _Record) -> None:
        """Tell the chat once that the question was already answered."""
        try:
            self._api.send_message(
                record.chat_id, TEXT_ALREADY_ANSWERED, message_thread_id=record.thread_id
            )
        except Exception as exc:
            logger.warning("telegram already-answered notice failed: %s", type(exc).__name__)

    def _on_settled(self, record: _Record, reason: str) -> None:
        """Settlement from ChannelBase (any thread); a claimed record's responder decides."""
        reason = str(reason)
        if record.race.on_settled(reason):
            return  # the claimed answer lost: the race ends the keyboard as the winner
        if self._finalize(record, winner_state(reason)):
            self._enqueue_terminal_projection(record)

    def _on_timeout(self, record: _Record) -> None:
        """Expiry: project ``expired`` first, then cancel the original request."""
        with self._lock:
            if record.state != "pending":
                return
        if not self._finalize(record, "expired"):
            return
        self._enqueue_terminal_projection(record)
        cancel = partial(cancel_request, record.ctx.respond, str(record.ctx.request_id))
        self._submit(record.token, cancel)

    def _finalize(
        self,
        record: _Record,
        terminal: str,
        *,
        from_claim: bool = False,
    ) -> bool:
        """Make ``record`` terminal exactly once; True for the caller that won."""
        with self._lock:
            if record.state == "terminal":
                return False
            if record.state == "claimed" and not from_claim:
                return False
            record.state = "terminal"
            record.terminal = terminal
            if record.timer is not None:
                try:
                    record.timer.cancel()
                except Exception:  # pragma: no cover - defensive
                    logger.debug("timer cancel failed", exc_info=True)
                record.timer = None
            self.registry.remove(record.token, record)
            self.registry.bury(record.token, (str(record.ctx.request_id), terminal))
            unsubscribe, record.unsubscribe = record.unsubscribe, None
        if unsubscribe is not None:
            try:
                unsubscribe()
            except Exception:  # pragma: no cover - defensive
                logger.debug("unsubscribe failed", exc_info=True)
        return True

    # -- projections ---------------------------------------------------------------------
    def _enqueue_terminal_projection(self, record: _Record) -> None:
        self._submit(record.token, lambda: self._project_terminal(record))

    def _project_terminal(self, record: _Record) -> None:
        terminal = TERMINAL_LABELS.get(record.terminal or "expired", LABEL_EXPIRED)
        label = self.texts_for(record.owner_id).text(terminal)  # in the owner's language
        for index, message_id in enumerate(list(record.message_ids)):
            if message_id is None:
                continue
            text = record.texts[index]
            if record.terminal == "submitted":
                options = list(_attr(record.questions[index], "options", default=()) or ())
                chosen = ", ".join(
                    _option_label(options[i]) for i in sorted(record.selections[index])
                )
                text = f"{text}\n\n{label}: {chosen}"
            else:
                text = f"{text}\n\n{label}"
            try:
                self._api.edit_message_text(
                    record.chat_id, message_id, _truncate(text, MAX_MESSAGE_CHARS)
                )
            except Exception as exc:
                logger.warning(
                    "telegram question projection failed for request %s: %s",
                    record.ctx.request_id,
                    type(exc).__name__,
                )

    def _edit_selection(self, record: _Record, index: int, selected: frozenset[int]) -> None:
        with self._lock:
            if record.state not in ("reserved", "pending"):
                return  # a terminal projection supersedes the intermediate one
            message_id = record.message_ids[index]
        if message_id is None:
            return
        try:
            self._api.edit_message_text(
                record.chat_id,
                message_id,
                record.texts[index],
                reply_markup=build_keyboard(
                    record.token,
                    index,
                    record.questions[index],
                    selected,
                    texts=self.texts_for(record.owner_id),
                ),
            )
        except Exception as exc:
            logger.warning(
                "telegram question update failed for request %s: %s",
                record.ctx.request_id,
                type(exc).__name__,
            )

    def _answer_job(self, callback_query_id: str, text: str, *, key: str) -> Callable[[], None]:
        """A callable that queues the ``answerCallbackQuery`` of a tap."""

        def job() -> None:
            try:
                self._api.answer_callback_query(callback_query_id, _truncate(text, MAX_ANSWER_TEXT))
            except Exception as exc:
                logger.warning("telegram answerCallbackQuery failed: %s", type(exc).__name__)

        return partial(self._submit, key, job)

    def close(self) -> None:
        """Expire every live question (projection queued; responders not called)."""
        with self._lock:
            records = self.registry.records()
        for record in records:
            if self._finalize(record, "expired"):
                self._enqueue_terminal_projection(record)


def topic_of(thread_id: str | None) -> int | None:
    """A forum topic id as the Bot API takes it (None when absent or not a number)."""
    try:
        return int(thread_id) if thread_id else None
    except ValueError:
        return None


if TYPE_CHECKING:
    from channelkit.core.context import UserInputRequestContext
    from channelkit.platforms.common.contract import QuestionSurface

    def _satisfies_the_contract(presenter: TelegramQuestionPresenter) -> None:
        """mypy: the presenter is Telegram's question surface."""
        questions: QuestionSurface[UserInputRequestContext] = presenter
        del questions

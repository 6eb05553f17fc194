"""The plug-in platform's question surface: `TinychatQuestions` (structured questions:
a button per option and Cancel, owner-only, one-shot, at most one per run through
`reserve_native_input`, settled in place only from the responder's result through
`FormRace`, the settlement glue every built-in platform uses, expired on the injected
clock) and `TinychatApprovals` (tool permissions:
one button per agent option, owner-only, one-shot, settled in place to the outcome)."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from channelkit.core import UserInputRequestContext
from channelkit.core.approvals import PermissionRequestContext, describe_outcome
from channelkit.platforms.common.contract import Decision, Interaction
from channelkit.platforms.common.native_input import (
    FormRace,
    answer_response,
    cancel_request,
    input_scope,
    reserve_native_input,
    winner_state,
)
from channelkit.platforms.common.registry import MemoryCardRegistry
from channelkit.runtime import Clock, Scheduler, TimerHandle, WorkerPool

from plugin_platform.api import MAX_LIVE, TinychatApi

logger = logging.getLogger(__name__)

QUESTION_PREFIX = "q:"
APPROVAL_PREFIX = "a:"
LABELS = {"submitted": "Submitted:", "cancelled": "Cancelled.", "expired": "Expired."}
ALREADY_ANSWERED = "This question was already answered; your choice was not used."
#: A question's own lifetime; it ends before the channel's permission lifetime.
QUESTION_TIMEOUT_S = 270.0


@dataclass
class _Question:
    context: UserInputRequestContext
    token: str
    text: str
    race: FormRace = field(default_factory=FormRace)
    message_id: str | None = None
    claimed: bool = False
    ended: bool = False
    timer: TimerHandle | None = None
    expires_at: float = 0.0


class TinychatQuestions:
    """The `QuestionSurface` of structured questions (see the module docstring)."""

    def __init__(
        self, api: TinychatApi, *, pool: WorkerPool, scheduler: Scheduler, clock: Clock
    ) -> None:
        self._api = api
        self._pool = pool
        self._scheduler = scheduler
        self._clock = clock
        self.registry: MemoryCardRegistry[_Question, Any] = MemoryCardRegistry(
            clock, maxsize=MAX_LIVE
        )

    def present(self, request: UserInputRequestContext) -> str:
        if len(request.questions) != 1 or request.questions[0].multi_select:
            return "unsupported"
        question = request.questions[0]
        token = uuid.uuid4().hex[:12]
        text = f"{question.header}: {question.question}" if question.header else question.question
        record = _Question(request, token, text)
        if not reserve_native_input(self.registry, token, record, input_scope(request)):
            return "unsupported"  # a second question of the run: the text prompt
        buttons = [
            [{"text": o.label, "data": f"{QUESTION_PREFIX}{token}:{i}"}]
            for i, o in enumerate(question.options)
        ]
        buttons.append([{"text": "Cancel", "data": f"{QUESTION_PREFIX}{token}:cancel"}])
        try:
            record.message_id = self._api.post(request.target.chat_id, text, buttons)
        except Exception as exc:
            logger.warning("tinychat question not shown: %s", type(exc).__name__)
            self.registry.remove(token)
            return "unsupported"
        record.expires_at = min(self._clock.now() + QUESTION_TIMEOUT_S, request.expires_at - 1.0)
        record.timer = self._scheduler.call_at(record.expires_at, self._expire, token)
        request.on_settled(lambda reason: self._settled(token, str(reason)))
        return "presented"

    def pressed(self, interaction: Interaction, notice: Any) -> Decision | None:
        """A question button: the owner's first press is claimed, else refused."""
        token, _, choice = (interaction.value or "")[len(QUESTION_PREFIX) :].partition(":")
        record = self.registry.get(token)
        if record is None:
            return Decision.ignored()  # settled already: one-shot
        context = record.context
        if interaction.actor_id != context.owner.id:
            chat, actor = context.target.chat_id, interaction.actor_id or ""
            return Decision.ack(outcome="forbidden").then(lambda: notice(chat, actor))
        question = context.questions[0]
        if choice == "cancel":
            answers: dict[str, str] | None = None
        elif choice.isdigit() and int(choice) < len(question.options):
            answers = {question.answer_key: question.options[int(choice)].label}
        else:
            return Decision.ignored()
        with self.registry.lock:
            if record.claimed:
                return Decision.ignored()
            record.claimed = True
        return Decision.ack().then(lambda: self._pool.post(self._answer, record, answers))

    def _answer(self, record: _Question, answers: dict[str, str] | None) -> None:
        context = record.context
        response = answer_response(context.submit_option_id, answers)
        record.race.answer(
            lambda: context.respond(response),
            claimed="submitted" if answers is not None else "cancelled",
            end=lambda state: self._end(record, state, answers),
            tell_lost=lambda: self._tell_lost(record),
            run=self._pool.post,
            scheduler=self._scheduler,
            clock=self._clock,
            deadline=record.expires_at,
            request_id=context.request_id,
        )

    def _tell_lost(self, record: _Question) -> None:
        try:
            self._api.post(record.context.target.chat_id, ALREADY_ANSWERED, [])
        except Exception as exc:
            logger.warning("tinychat already-answered notice failed: %s", type(exc).__name__)

    def _settled(self, token: str, reason: str) -> None:
        record = self.registry.get(token)
        if record is None:
            return
        if record.race.on_settled(reason):
            return  # the claimed answer lost: the race ends the message as the winner
        with self.registry.lock:
            if record.claimed:
                return  # the responder's result decides
            record.claimed = True
        self._pool.post(self._end, record, winner_state(reason), None)

    def _expire(self, token: str) -> None:
        record = self.registry.get(token)
        if record is None:
            return
        if not record.race.give_up():
            with self.registry.lock:
                if record.claimed:
                    return
                record.claimed = True
            self._end(record, "expired", None)
            cancel_request(record.context.respond, record.context.request_id)
            return
        self._end(record, "expired", None)

    def _end(self, record: _Question, state: str, answers: Mapping[str, str] | None) -> bool:
        """Show ``state`` in place; True for the one call that ended the question."""
        with self.registry.lock:
            if record.ended:
                return False
            record.ended = True
            self.registry.remove(record.token)
        if record.timer is not None:
            record.timer.cancel()
        label = LABELS[state]
        if state == "submitted" and answers:
            label = f"{label} {', '.join(answers.values())}"
        if record.message_id is not None:
            try:
                self._api.edit(record.message_id, f"{record.text}\n\n{label}", [])
            except Exception as exc:
                logger.warning("tinychat question not settled: %s", type(exc).__name__)
        return True


# -- approval buttons ------------------------------------------------------------------------
@dataclass
class _Approval:
    context: PermissionRequestContext
    token: str
    text: str
    message_id: str | None = None
    claimed: bool = False
    ended: bool = False


class TinychatApprovals:
    """The `ApprovalSurface`: one button per agent option, owner-only, one-shot; the
    message shows the outcome (`describe_outcome`) once the request settled, whatever
    answered it (a button, ``/approve``, ``/deny``, expiry)."""

    def __init__(self, api: TinychatApi, *, pool: WorkerPool, clock: Clock) -> None:
        self._api = api
        self._pool = pool
        self.registry: MemoryCardRegistry[_Approval, Any] = MemoryCardRegistry(
            clock, maxsize=MAX_LIVE
        )

    def present(self, request: PermissionRequestContext) -> str:
        token = uuid.uuid4().hex[:12]
        record = _Approval(request, token, f"Permission: {request.title}")
        if not reserve_native_input(self.registry, token, record, None):
            return "unsupported"
        buttons = [
            [{"text": o.name or o.option_id, "data": f"{APPROVAL_PREFIX}{token}:{i}"}]
            for i, o in enumerate(request.options)
        ]
        try:
            record.message_id = self._api.post(request.target.chat_id, record.text, buttons)
        except Exception as exc:
            logger.warning("tinychat approval not shown: %s", type(exc).__name__)
            self.registry.remove(token)
            return "unsupported"
        request.on_settled(lambda reason: self._pool.post(self._end, record))
        return "presented"

    def pressed(self, interaction: Interaction, notice: Any) -> Decision | None:
        """An approval button: the owner's first press answers, anyone else is told."""
        token, _, choice = (interaction.value or "")[len(APPROVAL_PREFIX) :].partition(":")
        record = self.registry.get(token)
        if record is None:
            return Decision.ignored()
        context = record.context
        if interaction.actor_id != context.owner.id:
            chat, actor = context.target.chat_id, interaction.actor_id or ""
            return Decision.ack(outcome="forbidden").then(lambda: notice(chat, actor))
        if not choice.isdigit() or int(choice) >= len(context.options):
            return Decision.ignored()
        option_id = context.options[int(choice)].option_id
        with self.registry.lock:
            if record.claimed:
                return Decision.ignored()
            record.claimed = True
        return Decision.ack().then(lambda: self._pool.post(context.select, option_id))

    def _end(self, record: _Approval) -> None:
        with self.registry.lock:
            if record.ended:
                return
            record.ended = True
            self.registry.remove(record.token)
        outcome = describe_outcome(record.context.outcome())
        if record.message_id is not None:
            try:
                self._api.edit(record.message_id, f"{record.text}\n\n{outcome}", [])
            except Exception as exc:
                logger.warning("tinychat approval not settled: %s", type(exc).__name__)

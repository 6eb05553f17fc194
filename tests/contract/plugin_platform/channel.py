"""`TinychatChannel`: the plug-in platform's channel, through the contract's public seams.

Ingress: `POST /tinychat/events`, a JSON body signed with HMAC-SHA256 over
``"<timestamp>.<body>"`` (five-minute window on the channel's clock). A message (or
command) becomes an `Interaction` of kind ``message``/``command``, deduplicated by its id
(`ReplayGuard`, from its send time ``sentAt`` in epoch milliseconds) and handed to the
channel by `decide_inbound`; a button press becomes a ``button`` `Interaction` that an
`InteractionRouter` decides (Stop, then question choices). The ACK is the `Decision`'s;
its work runs after it.

Output (`TinychatOutput`, an `OutputSurface`): one message per segment, posted on its
first text with a Stop button and edited as text comes; closed completed (no buttons),
cancelled ("— Stopped.") or failed ("— Failed."). Final text no segment showed goes
out through the shared `DeliveryChain`. A failed run no failed segment shows gets one
`TEXT_FAILED` message. Questions (`TinychatQuestions`, a `QuestionSurface`):
one message with a button per option and Cancel, owner-only, one-shot, at most one per
run (`reserve_native_input`), settled in place only from the responder's result
(`AnswerRace`), expired on the injected clock. Tool permissions (`TinychatApprovals`):
one button per agent option, owner-only, one-shot, settled in place to the outcome.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import threading
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import requests
from channelkit.agents.base import AgentBridge
from channelkit.core import (
    ChannelBase,
    ChannelConfig,
    InboundMessage,
    LifecycleEvent,
    LifecycleType,
    OutputSegmentContext,
    SegmentEndReason,
    UserInputPresentationResult,
    UserInputRequestContext,
)
from channelkit.core.approvals import PermissionRequestContext, describe_outcome
from channelkit.core.types import CancellationReason
from channelkit.errors import ConfigurationError
from channelkit.ingress import IngressRequest, IngressResponse, IngressRoute
from channelkit.platforms.common.contract import Decision, Interaction
from channelkit.platforms.common.delivery import DeliveryChain, DeliveryPath, DeliveryTarget
from channelkit.platforms.common.native_input import (
    AnswerRace,
    answer_response,
    cancel_request,
    input_scope,
    reserve_native_input,
    winner_state,
)
from channelkit.platforms.common.registry import MemoryCardRegistry
from channelkit.platforms.common.replay import ReplayGuard, sent_at_seconds
from channelkit.platforms.common.router import InteractionRouter, decide_inbound
from channelkit.platforms.common.streamed import StreamedText
from channelkit.runtime import Clock, Scheduler, TimerHandle, WorkerPool

logger = logging.getLogger(__name__)

EVENTS_PATH = "/tinychat/events"
TIMESTAMP_HEADER = "X-Tinychat-Timestamp"
SIGNATURE_HEADER = "X-Tinychat-Signature"
MAX_SKEW_S = 300.0
STOP_PREFIX = "stop:"
QUESTION_PREFIX = "q:"
APPROVAL_PREFIX = "a:"
TEXT_FAILED = "Failed, please retry."
TEXT_NOT_YOURS = "Only the person who started this can do that."
MARKERS = {"cancelled": "— Stopped.", "failed": "— Failed."}
LABELS = {"submitted": "Submitted:", "cancelled": "Cancelled.", "expired": "Expired."}
#: A question's own lifetime; it ends before the channel's permission lifetime.
QUESTION_TIMEOUT_S = 270.0
MAX_LIVE = 1_000


def sign(secret: str, timestamp: str, body: bytes) -> str:
    """The signature of ``body`` sent at ``timestamp`` (hex HMAC-SHA256)."""
    message = timestamp.encode("ascii") + b"." + body
    return hmac.new(secret.encode("utf-8"), message, hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class TinychatConfig:
    """The platform config: credentials, where its API is, the channel's name."""

    bot_token: str
    signing_secret: str
    api_base_url: str = "https://tinychat.invalid"
    channel_name: str = "tinychat"

    def __post_init__(self) -> None:
        for name in ("bot_token", "signing_secret", "api_base_url", "channel_name"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise ConfigurationError("must be a non-empty string", f"tinychat.{name}")


class TinychatApi:
    """The platform's three calls: post, edit, and a notice only one person sees."""

    def __init__(self, config: TinychatConfig) -> None:
        self._base = config.api_base_url.rstrip("/")
        self._headers = {"Authorization": f"Bearer {config.bot_token}"}
        self._session = requests.Session()

    def _call(self, method: str, body: Mapping[str, Any]) -> dict[str, Any]:
        url = f"{self._base}/tinychat/api/{method}"
        response = self._session.post(url, json=dict(body), headers=self._headers, timeout=10)
        if response.status_code != 200:
            raise RuntimeError(f"tinychat {method}: HTTP {response.status_code}")
        return dict(response.json())

    def post(self, chat: str, text: str, buttons: list[list[dict[str, str]]]) -> str:
        return str(self._call("post", {"chat": chat, "text": text, "buttons": buttons})["id"])

    def edit(self, message_id: str, text: str, buttons: list[list[dict[str, str]]]) -> None:
        self._call("edit", {"id": message_id, "text": text, "buttons": buttons})

    def notice(self, chat: str, user: str, text: str) -> None:
        self._call("notice", {"chat": chat, "user": user, "text": text})


# -- output surface --------------------------------------------------------------------------
@dataclass
class _Live:
    segment: OutputSegmentContext
    text: str = ""
    message_id: str | None = None
    stop_claimed: bool = False


class TinychatOutput:
    """The `OutputSurface`: one message per segment (see the module docstring)."""

    def __init__(self, api: TinychatApi) -> None:
        self._api = api
        self._lock = threading.Lock()
        self._live: dict[str, _Live] = {}

    def open_segment(self, segment: OutputSegmentContext) -> None:
        """Nothing to show yet: the message is posted with the first text."""

    def append(self, segment: OutputSegmentContext, chunk: str) -> bool:
        with self._lock:
            live = self._live.get(segment.segment_id)
            if live is None:
                if len(self._live) >= MAX_LIVE:
                    return False
                live = self._live[segment.segment_id] = _Live(segment)
            live.text += chunk
        stop = [[{"text": "Stop", "data": STOP_PREFIX + segment.segment_id}]]
        if live.message_id is None:
            live.message_id = self._api.post(segment.target.chat_id, live.text, stop)
        else:
            self._api.edit(live.message_id, live.text, stop)
        return True

    def close_segment(self, segment: OutputSegmentContext, reason: str) -> None:
        with self._lock:
            live = self._live.pop(segment.segment_id, None)
        if live is None or live.message_id is None:
            return
        marker = MARKERS.get(str(reason))
        self._api.edit(live.message_id, live.text + (f"\n\n{marker}" if marker else ""), [])

    def shows(self, segment: OutputSegmentContext) -> bool:
        """True while a message shows the open segment."""
        with self._lock:
            live = self._live.get(segment.segment_id)
            return live is not None and live.message_id is not None

    def claim_stop(self, segment_id: str) -> OutputSegmentContext | None:
        """The live segment behind a Stop button, claimed once (None: gone or claimed)."""
        with self._lock:
            live = self._live.get(segment_id)
            if live is None or live.stop_claimed:
                return None
            live.stop_claimed = True
            return live.segment

    def owner(self, segment_id: str) -> OutputSegmentContext | None:
        with self._lock:
            live = self._live.get(segment_id)
            return live.segment if live is not None else None


# -- question surface ------------------------------------------------------------------------
@dataclass
class _Question:
    context: UserInputRequestContext
    token: str
    text: str
    race: AnswerRace = field(default_factory=AnswerRace)
    message_id: str | None = None
    claimed: bool = False
    ended: bool = False
    timer: TimerHandle | None = None


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
        expiry = min(self._clock.now() + QUESTION_TIMEOUT_S, request.expires_at - 1.0)
        record.timer = self._scheduler.call_at(expiry, self._expire, token)
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
        result = record.race.respond(lambda: context.respond(response), context.request_id)
        if result.kind == "waiting":
            return  # the winner's settlement (or the expiry) ends the message
        own = "submitted" if answers is not None else "cancelled"
        self._end(record, result.state(own), answers)

    def _settled(self, token: str, reason: str) -> None:
        record = self.registry.get(token)
        if record is None:
            return
        if record.race.settled(reason):
            self._pool.post(self._end, record, winner_state(reason), None)
            return
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

    def _end(self, record: _Question, state: str, answers: Mapping[str, str] | None) -> None:
        with self.registry.lock:
            if record.ended:
                return
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


# -- the channel -----------------------------------------------------------------------------
class TinychatChannel(ChannelBase):
    """`ChannelBase` for Tinychat: ``TinychatChannel(config, bridge, *, channel_config=None,
    executor=None, run_executor=None, scheduler=None, clock=None)``."""

    def __init__(
        self,
        config: TinychatConfig,
        bridge: AgentBridge,
        *,
        channel_config: ChannelConfig | None = None,
        executor: WorkerPool | None = None,
        run_executor: WorkerPool | None = None,
        scheduler: Scheduler | None = None,
        clock: Clock | None = None,
    ) -> None:
        if not isinstance(config, TinychatConfig):
            raise ConfigurationError("must be a TinychatConfig", path="config")
        super().__init__(
            channel_config or ChannelConfig(name=config.channel_name),
            bridge,
            executor=executor,
            scheduler=scheduler,
            clock=clock,
            run_executor=run_executor,
        )
        self.tinychat_config = config
        self.api = TinychatApi(config)
        self.output = TinychatOutput(self.api)
        self.questions = TinychatQuestions(
            self.api, pool=self.pool, scheduler=self.scheduler, clock=self.clock
        )
        #: message ids already handled: a redelivery starts no second run
        self.dedup = ReplayGuard(self.clock.time, ttl=3600.0)
        #: the final answer's retries (`note_final_delivery` hears how each ended)
        self.delivery = DeliveryChain(self.scheduler, on_outcome=self.note_final_delivery)
        self._shown_lock = threading.Lock()
        self._shown: dict[str, StreamedText] = {}  # run id -> the text its segments showed
        self._failure_shown: set[str] = set()  # runs whose failed segment shows the failure
        self.approvals = TinychatApprovals(self.api, pool=self.pool, clock=self.clock)
        self.interactions = InteractionRouter(
            (self._stop_pressed, self._question_pressed, self._approval_pressed),
            name=f"{self.name} button",
        )

    # -- ingress ---------------------------------------------------------------------------
    def ingress_routes(self) -> list[IngressRoute]:
        """``POST /tinychat/events``: messages and button presses."""
        return [IngressRoute(EVENTS_PATH, self._on_request, ("POST",), "tinychat-events")]

    def _verified(self, request: IngressRequest) -> bool:
        timestamp = request.headers.get(TIMESTAMP_HEADER, "")
        signature = request.headers.get(SIGNATURE_HEADER, "")
        if not timestamp.isascii() or not timestamp.isdigit():
            return False
        if abs(self.clock.time() - int(timestamp)) > MAX_SKEW_S:
            return False
        expected = sign(self.tinychat_config.signing_secret, timestamp, request.body)
        return hmac.compare_digest(expected.encode(), signature.encode("utf-8", "replace"))

    def _on_request(self, request: IngressRequest) -> IngressResponse:
        if not self._verified(request):
            return IngressResponse.json(401, {"error": "bad signature"})
        try:
            payload = request.json()
        except ValueError:
            return IngressResponse.json(400, {"error": "body must be JSON"})
        interaction = parse_interaction(payload)
        if interaction is None:
            return IngressResponse.json(400, {"error": "not a tinychat event"})
        if interaction.kind == "button":
            return self.interactions.route(interaction).to_response()
        return self._message(interaction).to_response()

    def _message(self, interaction: Interaction) -> Decision:
        raw: Mapping[str, Any] = interaction.raw
        event_id = str(raw["id"])
        if not self.dedup.first(event_id, sent_at_seconds(raw.get("sentAt"))):
            return Decision.ignored()  # a redelivery: no second run
        message = InboundMessage(
            channel_name=self.name,
            chat_id=interaction.chat_id or "",
            sender_id=interaction.actor_id or "",
            text=interaction.text or "",
            message_id=event_id,
        )
        outcome, decision = decide_inbound(self, message)
        if outcome == "closed":
            self.dedup.forget(event_id)  # a retry may reach an open instance
        return decision

    def _stop_pressed(self, interaction: Interaction) -> Decision | None:
        if not (interaction.value or "").startswith(STOP_PREFIX):
            return None
        segment_id = (interaction.value or "")[len(STOP_PREFIX) :]
        segment = self.output.owner(segment_id)
        if segment is None:
            return Decision.ignored()
        if interaction.actor_id != segment.owner.id:
            chat, actor = segment.target.chat_id, interaction.actor_id or ""
            return Decision.ack(outcome="forbidden").then(lambda: self._notice(chat, actor))
        if self.output.claim_stop(segment_id) is None:
            return Decision.ignored()
        return Decision.ack().then(
            lambda: self.pool.post(
                self.cancel_run,
                segment.session_id,
                segment.run_id,
                CancellationReason.CANCEL_COMMAND,
            )
        )

    def _question_pressed(self, interaction: Interaction) -> Decision | None:
        if not (interaction.value or "").startswith(QUESTION_PREFIX):
            return None
        return self.questions.pressed(interaction, self._notice)

    def _approval_pressed(self, interaction: Interaction) -> Decision | None:
        if not (interaction.value or "").startswith(APPROVAL_PREFIX):
            return None
        return self.approvals.pressed(interaction, self._notice)

    def _notice(self, chat: str, user: str) -> None:
        self.pool.post(self._send_notice, chat, user)

    def _send_notice(self, chat: str, user: str) -> None:
        try:
            self.api.notice(chat, user, TEXT_NOT_YOURS)
        except Exception as exc:
            logger.warning("tinychat notice not sent: %s", type(exc).__name__)

    # -- hooks -----------------------------------------------------------------------------
    def send_message(self, chat_id: str, text: str, *, thread_id: str | None = None) -> None:
        """Plain text (no buttons)."""
        self.api.post(chat_id, text, [])

    def on_response_chunk(
        self,
        chat_id: str,
        chunk: str,
        session_id: str,
        segment: OutputSegmentContext | None = None,
    ) -> None:
        """The segment's message shows the text as it comes."""
        if segment is None:
            return
        try:
            taken = self.output.append(segment, chunk)
        except Exception as exc:
            logger.warning("tinychat output not shown: %s", type(exc).__name__)
            return
        if taken:
            with self._shown_lock:
                shown = self._shown.get(segment.run_id)
                if shown is None and len(self._shown) < MAX_LIVE:
                    shown = self._shown[segment.run_id] = StreamedText()
            if shown is not None:
                shown.add(chunk)

    def on_response_complete(
        self,
        chat_id: str,
        text: str,
        session_id: str,
        segment: OutputSegmentContext | None = None,
    ) -> None:
        """The live segment ends completed; the rest of the answer (what no segment
        showed) is posted through the shared delivery chain (a definite refusal raises:
        the run fails, phase delivery)."""
        with self._shown_lock:
            shown = self._shown.get(segment.run_id) if segment is not None else None
        rest = shown.remainder(text) if shown is not None else text
        if segment is not None:
            self.output.close_segment(segment, "completed")
        if not rest.strip():
            return
        run_id = segment.run_id if segment is not None else self.active_run_id(session_id)
        owner = segment.owner.id if segment is not None else None
        path = DeliveryPath("post", lambda: self.api.post(chat_id, rest, []))
        target = DeliveryTarget(self.name, chat_id, run_id, owner)
        self.delivery.deliver([[path]], target).raise_if_refused()

    def on_output_segment_end(
        self,
        chat_id: str,
        session_id: str,
        segment: OutputSegmentContext,
        reason: SegmentEndReason,
    ) -> None:
        """The segment's message ends in its state (a failed one shows the failure)."""
        if reason is SegmentEndReason.FAILED and self.output.shows(segment):
            with self._shown_lock:
                self._failure_shown.add(segment.run_id)
        try:
            self.output.close_segment(segment, str(reason))
        except Exception as exc:
            logger.warning("tinychat segment not closed: %s", type(exc).__name__)
        super().on_output_segment_end(chat_id, session_id, segment, reason)

    def on_task_lifecycle(self, event: LifecycleEvent) -> None:
        """A person's failed run no failed segment shows gets one `TEXT_FAILED`."""
        if not LifecycleType(event.type).terminal:
            return
        with self._shown_lock:
            self._shown.pop(event.run_id, None)
            shown = event.run_id in self._failure_shown
            self._failure_shown.discard(event.run_id)
        if event.type is LifecycleType.FAILED and event.owner is not None and not shown:
            try:
                self.send_message(event.chat_id, TEXT_FAILED)
            except Exception as exc:
                logger.warning("tinychat failure notice not sent: %s", type(exc).__name__)

    def present_permission_request(
        self, context: PermissionRequestContext
    ) -> UserInputPresentationResult:
        """The agent's options as buttons (`TinychatApprovals`)."""
        return UserInputPresentationResult(self.approvals.present(context))

    def on_close(self) -> None:
        """Pending retries of final answers end (reported failed)."""
        self.delivery.close()

    def present_user_input_request(
        self, context: UserInputRequestContext
    ) -> UserInputPresentationResult:
        """The question as buttons (`TinychatQuestions`)."""
        return UserInputPresentationResult(self.questions.present(context))


def parse_interaction(payload: Any) -> Interaction | None:
    """A Tinychat event as a contract `Interaction` (None: not an event)."""
    if not isinstance(payload, Mapping):
        return None
    kind, chat, user = payload.get("type"), payload.get("chat"), payload.get("user")
    if not isinstance(chat, str) or not isinstance(user, str) or not chat or not user:
        return None
    if kind == "message":
        text = payload.get("text")
        if not isinstance(text, str) or not text.strip() or not payload.get("id"):
            return None
        command = "command" if text.startswith("/") else "message"
        return Interaction(command, "tinychat", user, chat, text=text, raw=payload)
    if kind == "button":
        data, message = payload.get("data"), payload.get("message")
        if not isinstance(data, str) or not isinstance(message, str):
            return None
        return Interaction("button", "tinychat", user, chat, token=message, value=data, raw=payload)
    return None

"""`TinychatChannel`: the plug-in platform's channel, through the contract's public seams.

Ingress: `POST /tinychat/events`, a JSON body signed with HMAC-SHA256 over
``"<timestamp>.<body>"`` (five-minute window on the channel's clock). A message (or
command) becomes an `Interaction` of kind ``message``/``command``, deduplicated by its id
(`ReplayGuard`, from its send time ``sentAt`` in epoch milliseconds) and handed to the
channel by `decide_inbound`; a button press becomes a ``button`` `Interaction` that an
`InteractionRouter` decides (Stop, question choices, approval buttons). The ACK is the `Decision`'s;
its work runs after it.

Output: `TinychatOutput` (output.py, an `OutputSurface`); final text no segment showed
goes out through the shared `DeliveryChain`; a failed run no failed segment shows gets
one `TEXT_FAILED` message. Questions and approvals: `TinychatQuestions` and
`TinychatApprovals` (questions.py, question surfaces). The wire: api.py.
"""

from __future__ import annotations

import hmac
import logging
import threading
from collections.abc import Mapping
from typing import Any

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
from channelkit.core.approvals import PermissionRequestContext
from channelkit.core.types import CancellationReason
from channelkit.errors import ConfigurationError
from channelkit.ingress import IngressRequest, IngressResponse, IngressRoute
from channelkit.platforms.common.contract import Decision, Interaction
from channelkit.platforms.common.delivery import DeliveryChain, DeliveryPath, DeliveryTarget
from channelkit.platforms.common.replay import ReplayGuard, sent_at_seconds
from channelkit.platforms.common.router import InteractionRouter, decide_inbound
from channelkit.platforms.common.streamed import StreamedText
from channelkit.runtime import Clock, Scheduler, WorkerPool

from plugin_platform.api import (
    EVENTS_PATH,
    MAX_LIVE,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    TinychatApi,
    TinychatConfig,
    sign,
)
from plugin_platform.output import STOP_PREFIX, TinychatOutput
from plugin_platform.questions import (
    APPROVAL_PREFIX,
    QUESTION_PREFIX,
    TinychatApprovals,
    TinychatQuestions,
)

logger = logging.getLogger(__name__)

MAX_SKEW_S = 300.0
TEXT_FAILED = "Failed, please retry."
TEXT_NOT_YOURS = "Only the person who started this can do that."


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
        if not timestamp.isascii() or not timestamp.isdigit() or len(timestamp) > 12:
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

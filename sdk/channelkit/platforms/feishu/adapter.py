"""``FeishuChannel``: ChannelBase on Feishu (Lark).

Mapping of the shared channel contract (core lifecycle events and hooks):

=====================  ===============================================================
started                no card (lazy); an ``OnIt`` reaction on the user's message
text_chunk, tool_call  ignored by the lifecycle hook; text flows through
                       ``on_response_chunk`` into the segment's streaming card
segment end            the segment's card gets its terminal label (boundary / input
                       requested / completed -> completed; failed; cancelled, or
                       stopped when the card's Stop button caused it)
completed/cancelled/   every still-live card of the run gets the terminal label; live
failed                 question forms of the run are finalized; the reaction is removed
final response         the open segment's card is completed; a response that was never
                       streamed becomes one completed card
questions              native form card (``forms.enabled``), else the text prompt;
                       while either waits for the person the reaction is removed,
                       and added again once the request was answered
=====================  ===============================================================

Ingress, by ``config.ingress``: ``"http"`` (the default) mounts ``POST /feishu/events``
(message events) and ``POST /feishu/card`` (card actions) with ``channelkit.web``; both
verify synchronously (token, signature, decryption, freshness - see
`channelkit.platforms.feishu.ingress`) and answer the URL-verification challenge.
``"websocket"`` is the long connection `FeishuChannel.long_connection`
(`longconn`; listed in ``connections``, started with
`start_connections()`, stopped by
`close()`), authenticated by the app secret, and mounts no routes. Both transports
go through the same `FeishuChannel.dispatch_event()` /
`FeishuChannel.dispatch_card_action()`, which claim what must be claimed and return
the ACK at once; the hand-offs of agent runs, responders, cancellation and card writes
to the pool are in the response's ``after`` and start only once the ACK was written.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Hashable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, replace
from functools import partial
from typing import TYPE_CHECKING, Any

from channelkit.agents.base import AgentBridge, PermissionRequest
from channelkit.attachments.model import Attachment
from channelkit.attachments.names import sanitize_name
from channelkit.core import (
    CancellationReason,
    ChannelBase,
    ChannelConfig,
    InboundMessage,
    LifecycleEvent,
    LifecycleType,
    OutputSegmentContext,
    SegmentEndReason,
    SessionTarget,
    UserInputPresentationResult,
    UserInputRequestContext,
)
from channelkit.core.approvals import PermissionRequestContext
from channelkit.core.inbound_files import AttachmentSource
from channelkit.core.queue_notices import QueueNotices
from channelkit.core.types import RunQueuedEvent
from channelkit.errors import AttachmentRefused
from channelkit.ingress import IngressRequest, IngressResponse, IngressRoute
from channelkit.platforms import platform_offers
from channelkit.platforms.common.cluster import ClusterOptions
from channelkit.platforms.common.connection import LongConnection
from channelkit.platforms.common.contract import Decision, Interaction
from channelkit.platforms.common.delivery import DeliveryChain, DeliveryTarget
from channelkit.platforms.common.limits import attach_pacer
from channelkit.platforms.common.registry import MemoryStateRegistry, StateRegistry
from channelkit.platforms.common.replay import sent_at_seconds
from channelkit.platforms.common.router import InteractionRouter, decide_inbound
from channelkit.platforms.common.run_journal import TEXT_INTERRUPTED, channel_journal
from channelkit.platforms.common.shared_dedup import SharedDedup
from channelkit.platforms.common.store_watch import unavailable_notice
from channelkit.platforms.feishu import cards
from channelkit.platforms.feishu.api import FeishuApi
from channelkit.platforms.feishu.approvals import APPROVAL_ACTION, FeishuApprovalPresenter
from channelkit.platforms.feishu.cards import OutputState, queue_notice_card
from channelkit.platforms.feishu.config import FeishuConfig, card_language
from channelkit.platforms.feishu.files import resource_source
from channelkit.platforms.feishu.ingress import (
    CardAction,
    FeishuIngressVerifier,
    IngressRejected,
    VerifiedCallback,
    card_interaction,
    parse_card_action,
    parse_message_event,
)
from channelkit.platforms.feishu.longconn import FeishuLongConnection, request_endpoint
from channelkit.platforms.feishu.output import OutputCardPresenter
from channelkit.platforms.feishu.questions import QuestionPresenter
from channelkit.runtime import KeyedSerialQueue, Scheduler, WorkerPool
from channelkit.runtime.clock import Clock

if TYPE_CHECKING:
    from channelkit.attachments.outbound import OutboundSource
    from channelkit.state.base import StateStore

__all__ = ["CARD_PATH", "EVENTS_PATH", "FeishuChannel"]

logger = logging.getLogger(__name__)

EVENTS_PATH = "/feishu/events"
CARD_PATH = "/feishu/card"
MESSAGE_EVENT = "im.message.receive_v1"
#: Seconds an event id is remembered for de-duplication of Feishu's redeliveries.
#: How long Feishu may redeliver an event it thinks was not received: retries 15 s,
#: 5 min, 1 h and 6 h after the first push (about 7.1 h), plus a margin. An event_id is
#: remembered until its ``create_time`` + this window (memory permitting: when the bound
#: is reached the window shrinks and older ids are refused, platforms/common/replay.py).
EVENT_REDELIVERY_WINDOW_S = 8 * 3600.0
EVENT_DEDUP_TTL = EVENT_REDELIVERY_WINDOW_S  # the former name

_TERMINAL_STATES: dict[str, OutputState] = {
    LifecycleType.COMPLETED.value: "completed",
    LifecycleType.FAILED.value: "failed",
    LifecycleType.CANCELLED.value: "cancelled",
}


@dataclass
class _Reaction:
    message_id: str
    reaction_id: str | None = None
    ended: bool = False


#: Seconds between checks whether a text prompt that paused the reaction was answered.
WAIT_POLL_S = 1.0


class FeishuChannel(ChannelBase):
    """A Feishu channel; see the module docstring for the behaviour.

    ``FeishuChannel(config, bridge, *, channel_config=None, api=None, executor=None,
    scheduler=None, clock=None)``. ``channel_config`` is the shared
    `ChannelConfig` (default ``ChannelConfig(name="feishu")``);
    ``api`` replaces the `FeishuApi` built from the app credentials.
    ``long_connection_options`` go to the
    `FeishuLongConnection` with
    ``ingress="websocket"`` (``open_endpoint``, ``backoff``, ``wait``, ``poll_s``).

    ``cluster_options`` (``instanceName``, ``leaseRenewS``, ``leaseExpiryS``: the
    ``state`` section's lease settings, which ``channelkit serve`` passes with
    ``state.redis``) time the lease the run journal keeps in ``store``: a process that
    starts tells the people of the runs dead instances left, never those of runs
    another live instance is running (`channelkit.platforms.common.run_journal`).
    """

    def __init__(
        self,
        config: FeishuConfig,
        bridge: AgentBridge,
        *,
        channel_config: ChannelConfig | None = None,
        api: FeishuApi | None = None,
        executor: WorkerPool | None = None,
        run_executor: WorkerPool | None = None,
        scheduler: Scheduler | None = None,
        clock: Clock | None = None,
        registry: StateRegistry | None = None,
        long_connection_options: Mapping[str, Any] | None = None,
        store: StateStore | None = None,
        cluster_options: ClusterOptions | Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(
            channel_config or ChannelConfig(name="feishu"),
            bridge,
            executor=executor,
            run_executor=run_executor,
            scheduler=scheduler,
            clock=clock,
            threads=platform_offers("feishu", "threads"),  # groups: a session per thread
        )
        # the channel's ``locale`` (when set) picks the card language; else ``language``
        config = replace(config, language=card_language(config.language, self.config.locale))
        self.feishu = config
        #: every piece of cross-callback state (cards, claims, tombstones, redeliveries)
        self.registry: StateRegistry = (
            registry if registry is not None else MemoryStateRegistry(self.clock)
        )
        self._owns_api = api is None
        self.api = api or FeishuApi.create(
            config.app_id,
            config.app_secret,
            base_url=config.base_url,
            max_workers=self.config.api_pool_size,
        )
        #: Per-run projection queues (key = run id): card writes of one run in order.
        self.projections = KeyedSerialQueue(self.pool, name=f"[{self.name}] feishu cards")
        self.verifier = FeishuIngressVerifier(
            config.verification_token,
            config.encrypt_key,
            time=self.clock.time,
            max_clock_skew_s=config.max_clock_skew_s,
        )
        #: (chat id, thread id) -> the newest message a person wrote in that thread: what
        #: the bot replies to (``reply_in_thread``) so a thread's output lands in it
        self._thread_anchors = self.registry.map("feishu-thread-anchors", policy="lru")
        self.output = OutputCardPresenter(
            self.api,
            clock=self.clock,
            scheduler=self.scheduler,
            submit=self._submit_projection,
            language=config.language,
            title=config.title,
            cardkit=config.cardkit,
            registry=self.registry.cards("feishu-output"),
            delivery=DeliveryChain(self.scheduler, on_outcome=self.note_final_delivery),
            channel_name=self.name,
            thread_anchor=lambda chat_id, thread_id: self._thread_anchors.get((chat_id, thread_id)),
        )
        #: the final answer's retries and alternate paths (card -> text, with uuids)
        self.delivery = self.output.delivery
        #: queue notices: one small card per queued run, PATCHed as the run moves up
        #: (at most once a second) and to "Starting now." when it starts
        self.queue_notices: QueueNotices[str] = QueueNotices(
            self, show=self._show_queue_notice, edit=self._edit_queue_notice
        )
        #: delivered / retried / failed / uncertain final answers
        self.delivery_health = self.delivery.health
        # per request, the form also ends EXPIRY_MARGIN before core's own deadline
        # (context.expires_at), so it is finalized expired before core answers
        lifetime = min(config.forms.timeout_s, self.config.permission_timeout)
        self.questions = QuestionPresenter(
            self.api,
            clock=self.clock,
            scheduler=self.scheduler,
            submit=self._submit_projection,
            language=config.language,
            timeout_s=lifetime,
            custom_text=config.forms.custom_text,
            send_text=self._send_text_now,
            registry=self.registry.cards("feishu-questions"),
            thread_anchor=self.output.reply_anchor,
        )
        #: approval buttons for ordinary tool permissions (`approvals`)
        self.approvals = FeishuApprovalPresenter(
            self.api,
            submit=self._submit_projection,
            clock=self.clock,
            language=config.language,
            registry=self.registry.cards("feishu-approvals"),
            thread_anchor=self.output.reply_anchor,
        )
        #: card actions, in order: Stop, question forms, approval buttons, presentation
        #: buttons (anything else is acknowledged with ``{}``)
        self.card_router = InteractionRouter(
            (
                self._stop_pressed,
                self._form_action,
                self._approval_pressed,
                self._presentation_pressed,
            ),
            name=f"{self.name} card action",
        )
        # a signed event is acceptable for max_clock_skew_s on both sides of its
        # timestamp: remember its id at least that long so a replay is ignored; with a
        # store shared by every instance, an event reaching two of them runs once
        self.state_store = store
        #: outbound rate limits of every API call that writes (limits.py), shared
        #: through the store by every process of the bot
        self.outbound_pacer = attach_pacer(
            getattr(self.api, "client", None),
            "feishu",
            clock=self.clock,
            store=store,
        )
        #: the people's runs in progress (in ``store``, else in ``config.run_journal``):
        #: a run a crash cut off is told at the next start (`recover_interrupted_runs`)
        self.run_journal = channel_journal(
            self.name,
            store=store,
            path=config.run_journal,
            scheduler=self.scheduler,
            lease=cluster_options,
        )
        self._events_seen = SharedDedup(
            self.clock.time,
            ttl=max(EVENT_REDELIVERY_WINDOW_S, 2.0 * config.max_clock_skew_s),
            scope="feishu-event",
            store=store,
        )
        self._reactions = self.registry.map("feishu-reactions")
        self._reaction_lock = threading.Lock()
        self._streamed_runs = self.registry.map("feishu-streamed-runs")
        #: runs whose card's answer every delivery path refused (no card shows them)
        self._refused_answers = self.registry.map("feishu-refused-answers")
        #: run id -> (message id, waiting requests) of runs whose reaction is paused
        self._paused = self.registry.map("feishu-paused-reactions")
        #: the long connection (None with ``"ingress": "http"``)
        self.long_connection: FeishuLongConnection | None = None
        if config.ingress == "websocket":
            options: dict[str, Any] = {
                "open_endpoint": lambda: request_endpoint(
                    config.base_url, config.app_id, config.app_secret
                ),
                "name": f"{self.name}-ws",
                "clock": self.clock,
                **dict(long_connection_options or {}),
            }
            self.long_connection = FeishuLongConnection(self, **options)

    # =================================================================================
    # Output
    # =================================================================================

    def _submit_projection(self, key: Hashable, fn: Any) -> Future[Any]:
        return self.projections.submit(key, fn)

    def _send_text_now(self, chat_id: str, text: str, reply_to: str | None = None) -> None:
        self.api.send_text(chat_id, text, reply_to=reply_to)

    def await_run_output(self, run_id: str, timeout: float) -> None:
        """A run's presentation follows its cards: wait for the card writes it queued."""
        self.projections.call(run_id, lambda: None, timeout)

    def presentation_sender(self, target: SessionTarget, *, silent: bool = False) -> Any:
        """Presentations as interactive cards (`channelkit.platforms.feishu.sender`)."""
        from channelkit.platforms.feishu.sender import FeishuSender

        return FeishuSender(self.api.client)

    def send_message(self, chat_id: str, text: str, *, thread_id: str | None = None) -> None:
        """Send plain text (command replies, permission prompts, fallbacks), into
        ``thread_id`` when the conversation is a thread."""
        self.api.send_text(chat_id, text, reply_to=self.output.reply_anchor(chat_id, thread_id))

    def on_run_queued(self, event: RunQueuedEvent) -> None:
        """The queue notice is one card, PATCHed as the run moves up (at most once a
        second, coalesced) and to "Starting now." when it starts."""
        self.queue_notices.queued(event)

    def _show_queue_notice(self, event: RunQueuedEvent, text: str) -> str:
        into = self.output.reply_anchor(event.chat_id, event.thread_id)
        return self.api.send_card(event.chat_id, queue_notice_card(text), reply_to=into)

    def _edit_queue_notice(self, message_id: str, text: str, final: bool) -> None:
        self.api.patch_card(message_id, queue_notice_card(text))

    def on_response_chunk(
        self,
        chat_id: str,
        chunk: str,
        session_id: str,
        segment: OutputSegmentContext | None = None,
    ) -> None:
        """Stream visible text into the segment's card (created on the first text)."""
        if segment is None:
            return  # loop / webhook runs: delivered as plain text at the end
        self._streamed_runs[segment.run_id] = True
        self.output.append(segment, chunk)

    def on_output_segment_end(
        self,
        chat_id: str,
        session_id: str,
        segment: OutputSegmentContext,
        reason: SegmentEndReason,
    ) -> None:
        """Give the segment's card its terminal label (once): a run cancelled by the
        channel closing (SIGTERM) keeps its text, labelled stopped."""
        stopped = reason is SegmentEndReason.CANCELLED and self.closed
        self.output.close_segment(segment, "stopped" if stopped else str(reason))

    def on_response_complete(
        self,
        chat_id: str,
        text: str,
        session_id: str,
        segment: OutputSegmentContext | None = None,
    ) -> None:
        """Complete the streamed card, or deliver a never-streamed response as one card."""
        if segment is None:
            target = DeliveryTarget(self.name, chat_id, self.active_run_id(session_id))
            self.output.deliver_text(chat_id, text, target, as_card=False).raise_if_refused()
            return
        wait = max(1.0, self.config.delivery_timeout - 1.0)
        if self.output.get(segment.segment_id) is not None:
            try:
                self.output.finish_answer(segment.segment_id, wait=wait)
            except Exception:
                # every path refused the card's answer: nothing shows it, so no card
                # shows the failure either; the run fails and is told (see below)
                self._refused_answers[segment.run_id] = True
                raise
            return
        if self._streamed_runs.get(segment.run_id):
            return  # the text was already shown in this run's cards
        target = DeliveryTarget(self.name, segment.target.chat_id, segment.run_id, segment.owner.id)
        future = self._submit_projection(
            segment.run_id, lambda: self.output.deliver_text(target.chat_id, text, target)
        )
        future.result(timeout=wait).raise_if_refused()

    def _deliver_state(self, chat_id: str, state: OutputState) -> None:
        card = cards.output_card("", state, self.feishu.language, title=self.feishu.title)
        try:
            self.api.send_card(chat_id, card)
        except Exception:
            logger.warning("%s card delivery failed; sending plain text", state, exc_info=True)
            try:
                self.api.send_text(chat_id, cards.strings(self.feishu.language)[state])
            except Exception:
                logger.warning("%s text delivery failed", state, exc_info=True)

    # =================================================================================
    # Lifecycle
    # =================================================================================

    def recover_interrupted_runs(self) -> None:
        """Tell each person whose run the previous process left unfinished (killed mid-run)
        `TEXT_INTERRUPTED`, once (on the pool; the service calls this when it starts)."""
        self.run_journal.tell_leftovers(
            lambda chat, _thread, _record: self.pool.post(self._tell_interrupted, chat)
        )

    def _tell_interrupted(self, chat_id: str) -> None:
        try:
            self.send_message(chat_id, TEXT_INTERRUPTED)
        except Exception as exc:
            logger.warning("feishu notice not sent: %s", type(exc).__name__)

    def on_task_lifecycle(self, event: LifecycleEvent) -> None:
        """started -> OnIt reaction; terminal -> card labels, forms finalized, reaction off.

        ``text_chunk`` and ``tool_call`` are ignored here (content flows through the
        response/segment path; tool calls add no UI).
        """
        self.run_journal.follow(event)
        kind = str(event.type)
        if kind == LifecycleType.STARTED.value:
            self.queue_notices.started(event.run_id)
            if event.owner is not None:
                self._streamed_runs[event.run_id] = False  # a person's run, no text yet
            self._start_reaction(event)
            return
        state = _TERMINAL_STATES.get(kind)
        if state is None:
            return
        self.queue_notices.forget(event.run_id)
        labelled = self.output.finish_run(event.run_id, state)
        streamed = self._streamed_runs.pop(event.run_id)
        refused = self._refused_answers.pop(event.run_id)
        if (
            kind == LifecycleType.FAILED.value
            and not labelled
            and (streamed is False or (streamed is True and not event.segment_failed) or refused)
        ):
            # a person's run failed before any output, after its last card ended at a
            # boundary (the agent died while a question waited), or when its answer's
            # card was never shown: no card carries the failed label yet (a card still
            # live was just labelled failed above)
            target = event.chat_id
            self._submit_projection(event.run_id, lambda: self._deliver_state(target, "failed"))
        stopped = kind == LifecycleType.CANCELLED.value and str(event.reason) in (
            CancellationReason.CANCEL_COMMAND.value,
            CancellationReason.CLEAR.value,
        )
        self.questions.cancel_run(event.run_id, "cancelled" if stopped else "expired")
        with self._reaction_lock:
            self._paused.pop(event.run_id)
        self._end_reaction(event.run_id)

    def _start_reaction(self, event: LifecycleEvent) -> None:
        if not self.feishu.reaction or not event.message_id or event.owner is None:
            return
        record = _Reaction(event.message_id)
        self._reactions[event.run_id] = record
        self.pool.post(self._add_reaction, event.run_id, record)

    def _add_reaction(self, run_id: str, record: _Reaction) -> None:
        try:
            reaction_id = self.api.add_reaction(record.message_id, self.feishu.reaction)
        except Exception as exc:
            logger.info("adding the %s reaction failed: %s", self.feishu.reaction, exc)
            reaction_id = None
        with self._reaction_lock:
            record.reaction_id = reaction_id
            ended = record.ended
        if ended and reaction_id is not None:
            self._remove_reaction(record.message_id, reaction_id)

    def _end_reaction(self, run_id: str) -> None:
        record = self._reactions.pop(run_id)
        if record is None:
            return
        with self._reaction_lock:
            if record.ended:
                return
            record.ended = True
            reaction_id = record.reaction_id
        if reaction_id is not None:
            self.pool.post(self._remove_reaction, record.message_id, reaction_id)

    def _remove_reaction(self, message_id: str, reaction_id: str) -> None:
        try:
            self.api.delete_reaction(message_id, reaction_id)
        except Exception as exc:
            logger.info("removing the reaction failed: %s", exc)

    # =================================================================================
    # Input
    # =================================================================================

    def present_user_input_request(
        self, context: UserInputRequestContext
    ) -> UserInputPresentationResult:
        """Native form card when ``forms.enabled``; otherwise UNSUPPORTED (text prompt)."""
        if not self.feishu.forms.enabled:
            return UserInputPresentationResult.UNSUPPORTED
        run_id, key = context.run_id, (context.session_id, context.request_id)
        self._pause_reaction(run_id, key)
        context.on_settled(lambda _reason: self._resume_reaction(run_id, key))
        return self.questions.present(context)

    def present_permission_request(
        self, context: PermissionRequestContext
    ) -> UserInputPresentationResult:
        """A card with one button per agent option, owner-only (`approvals`) when
        ``forms.enabled``; otherwise UNSUPPORTED (text prompt)."""
        if not self.feishu.forms.enabled:
            return UserInputPresentationResult.UNSUPPORTED
        run_id, key = context.run_id, (context.session_id, context.request_id)
        self._pause_reaction(run_id, key)
        context.on_settled(lambda _reason: self._resume_reaction(run_id, key))
        result = self.approvals.present(context)
        return UserInputPresentationResult(result)

    def format_permission_request(self, request: PermissionRequest) -> str:
        """The core's text prompt; the reaction is off until the request is answered."""
        run_id = self.active_run_id(request.session_id)
        if run_id is not None and self._pause_reaction(
            run_id, (request.session_id, request.request_id)
        ):
            self.scheduler.call_later(WAIT_POLL_S, self._check_paused, run_id)
        return super().format_permission_request(request)

    def _pause_reaction(self, run_id: str, key: tuple[str, str]) -> bool:
        """Remove the run's working reaction while ``key`` waits; True when it paused."""
        with self._reaction_lock:
            paused = self._paused.get(run_id)
            if paused is not None:
                paused[1].add(key)
                return True
            record = self._reactions.get(run_id)
            if record is None or record.ended:
                return False
            self._paused[run_id] = (record.message_id, {key})
        self._end_reaction(run_id)
        return True

    def _resume_reaction(self, run_id: str, key: tuple[str, str]) -> None:
        """``key`` was answered: add the reaction again when no other wait is left."""
        with self._reaction_lock:
            paused = self._paused.get(run_id)
            if paused is None:
                return
            paused[1].discard(key)
            if paused[1]:
                return
            self._paused.pop(run_id)
        if self.active_run_id(key[0]) != run_id:
            return  # the run ended meanwhile
        record = _Reaction(paused[0])
        self._reactions[run_id] = record
        if self.active_run_id(key[0]) != run_id:
            self._end_reaction(run_id)  # it ended while we resumed
            return
        self.pool.post(self._add_reaction, run_id, record)

    def _check_paused(self, run_id: str) -> None:
        """Resume the reaction of text prompts that are no longer pending."""
        with self._reaction_lock:
            paused = self._paused.get(run_id)
            keys = list(paused[1]) if paused is not None else []
        if not keys:
            return
        over = [k for k in keys if k[1] not in self.pending_request_ids(k[0])]
        for key in over:
            self._resume_reaction(run_id, key)
        if len(over) < len(keys):
            self.scheduler.call_later(WAIT_POLL_S, self._check_paused, run_id)

    # =================================================================================
    # Shutdown
    # =================================================================================

    def on_close(self) -> None:
        """Stop the long connection, finalize live cards and forms, then release the API
        client."""
        if self.long_connection is not None:
            self.long_connection.stop(timeout=5.0)
        self.queue_notices.close()
        self.output.close_all("stopped", wait=5.0)  # a shutdown stopped their runs
        self.questions.close()
        self.pool.wait_idle(5.0)  # bounded: let queued card projections finish
        self.run_journal.close()  # the lease given up: nothing of this process is left
        self.delivery.close()  # pending final-answer retries are reported failed
        if self._owns_api:
            self.api.close()

    # =================================================================================
    # Ingress
    # =================================================================================

    @property
    def connections(self) -> tuple[LongConnection, ...]:
        """The long connections this channel owns: the long connection in websocket mode."""
        return (self.long_connection,) if self.long_connection is not None else ()

    def ingress_routes(self) -> list[IngressRoute]:
        """``POST /feishu/events`` and ``POST /feishu/card`` with ``"ingress": "http"``;
        none in websocket mode (nothing would call them)."""
        if self.long_connection is not None:
            return []
        return [
            IngressRoute(EVENTS_PATH, self.handle_event_request, ("POST",), "feishu-events"),
            IngressRoute(CARD_PATH, self.handle_card_request, ("POST",), "feishu-card"),
        ]

    def _verify(self, request: IngressRequest) -> Any:
        try:
            return self.verifier.verify(request)
        except IngressRejected as exc:
            logger.warning("rejected Feishu callback on %s: %s", request.path, exc.reason)
            return exc.response()

    def _claim_delivery(
        self, event_id: str | None, payload: Any = None, *, sent_at: float | None = None
    ) -> str:
        """``"first"`` for the first delivery of ``event_id``, ``"seen"`` for a copy
        (remembered until its ``header.create_time`` (in ``payload``, else ``sent_at``)
        + the redelivery window, refused as stale after that), ``"unavailable"`` when the
        shared store is down (`SharedDedup.claim()`: nothing runs, `_store_unavailable()`
        tells the person)."""
        if not event_id:
            return "first"
        header = payload.get("header") if isinstance(payload, Mapping) else None
        if isinstance(header, Mapping):
            sent_at = sent_at_seconds(header.get("create_time"))
        return self._events_seen.claim(event_id, sent_at)  # racing copies dispatch once

    def _store_unavailable(self, chat: str, person: str, thread: str | None) -> Decision:
        """The ACK of a message or button press the shared store could not vouch for:
        nothing runs; the first time its person is met during the outage,
        ``MSG_STORE_UNAVAILABLE`` goes to the chat (its thread) after the ACK (on the
        pool, through `send_message()`; the rule of `unavailable_notice()`)."""
        tell = unavailable_notice(
            self.state_store,
            channel=self.name,
            person=person,
            messages=self.messages_for(person),
            send=partial(self.send_message, chat, thread_id=thread),
            post=self.pool.post,
        )
        return Decision.ignored() if tell is None else Decision.ignored().then(tell)

    def _handle(
        self,
        request: IngressRequest,
        what: str,
        route: Callable[[Any], IngressResponse],
    ) -> IngressResponse:
        """The HTTP opening of both callbacks: verify, answer the URL challenge, then the
        transport-neutral ``route`` (which never raises).

        Rejections pass through as the verifier answers them; a failure is logged and
        ACKed (a Feishu retry would not help).
        """
        try:
            verified = self._verify(request)
            if isinstance(verified, IngressResponse):
                return verified
            if verified.kind == "challenge":
                return IngressResponse.json(200, {"challenge": verified.challenge})
        except Exception:
            logger.exception("Feishu %s handler failed", what)
            return IngressResponse.json(200, {})
        return route(verified.payload)

    def handle_event_request(self, request: IngressRequest) -> IngressResponse:
        """The event callback: challenge, then ``im.message.receive_v1`` -> a run.

        The run is started by the response's ``after`` (after the ACK)."""
        return self._handle(request, "event", self.dispatch_event)

    def dispatch_event(self, payload: Any) -> IngressResponse:
        """Route an authenticated event body (``im.message.receive_v1`` -> a run,
        ``card.action.trigger`` -> `dispatch_card_action()`); dedup by event id.

        The transport-neutral part both ingresses share: the HTTP handler calls it once
        the callback checked out, the long connection for each ``event`` frame (the
        connection is authenticated). 503 when the channel is closed, else 200 whose
        ``after`` starts the run. Never raises."""
        try:
            return self._route_event(VerifiedCallback(kind="event", payload=payload))
        except Exception:
            logger.exception("Feishu event handler failed")
            return IngressResponse.json(200, {})

    def _route_event(self, verified: VerifiedCallback) -> IngressResponse:
        if verified.event_type == "card.action.trigger":
            return self._card_response(verified.payload)
        decision = Decision.ignored()
        if verified.event_type != MESSAGE_EVENT:
            return decision.to_response()
        claim = self._claim_delivery(verified.event_id, verified.payload)
        if claim == "unavailable":  # the shared store is down: tell the person once
            message = parse_message_event(verified.payload)
            if message is not None and message.sender_type == "user":
                if message.thread_id:  # the notice lands in the thread
                    self._thread_anchors[(message.chat_id, message.thread_id)] = message.message_id
                chat, who = message.chat_id, message.sender_open_id
                decision = self._store_unavailable(chat, who, message.thread_id)
        elif claim == "first":
            decision = self._dispatch_message(verified.payload)
            if decision.status != 200 and verified.event_id:
                self._events_seen.forget(verified.event_id)  # a redelivery may be served
        return decision.to_response()

    def _dispatch_message(self, payload: Any) -> Decision:
        """Hand a message event to the channel; its decision's status is the HTTP status
        to answer (`channelkit.platforms.common.inbound`: 503 when closed, else
        200) and its work starts the run."""
        message = parse_message_event(payload)
        if message is None or message.sender_type != "user":
            return Decision.ignored()
        if not message.text.strip() and not message.attachments:
            return Decision.ignored()
        inbound = InboundMessage(
            channel_name=self.name,
            chat_id=message.chat_id,
            sender_id=message.sender_open_id,
            text=message.text,
            message_id=message.message_id,
            thread_id=message.thread_id,
            is_group=message.is_group,
            # in groups the core answers only when addressed (access.requireMention)
            mentions_bot=message.mentions_bot(self.feishu.bot_open_id)
            if message.is_group
            else None,
            attachments=message.attachments,
        )
        if message.thread_id:
            self._thread_anchors[(message.chat_id, message.thread_id)] = message.message_id
        try:
            return decide_inbound(self, inbound)[1]
        except Exception as exc:
            logger.warning("inbound Feishu message not accepted: %s", exc)
            return Decision.ignored()

    def attachment_source(self, attachment: Attachment) -> AttachmentSource:
        """The message resource download (``GET .../messages/{message_id}/resources/
        {file_key}?type=image|file``) on the Open Platform host, with the tenant token
        (`channelkit.platforms.feishu.files`); no redirect is followed."""
        client = self.api.client
        provider = client.token_provider
        if provider is None:
            raise AttachmentRefused(
                name=sanitize_name(attachment.name), reason="the channel has no tenant token"
            )
        return resource_source(attachment, client.server_url(), provider.get_token())

    def upload_file(
        self,
        target: SessionTarget,
        file: OutboundSource,
        *,
        image: bool = False,
        caption: str | None = None,
    ) -> str:
        """The agent's file uploaded (``im/v1/images`` for an image Feishu shows, else
        ``im/v1/files``) and sent as an image or file message, as a reply in the
        target's thread when it has one, the caption after it as text
        (`channelkit.platforms.feishu.files`)."""
        from channelkit.platforms.feishu.files import upload

        chat = target.chat_id
        anchor = self.output.reply_anchor(chat, target.thread_id)

        def send(msg_type: str, content: str) -> str:
            return self.api.send_content(chat, msg_type, content, reply_to=anchor)

        def send_caption(text: str) -> str:
            return self.api.send_text(chat, text, reply_to=anchor)

        return upload(
            self.api.client, send, file, image=image, caption=caption, send_caption=send_caption
        )

    def handle_card_request(self, request: IngressRequest) -> IngressResponse:
        """The card action callback: Stop, form Submit and Cancel, presentation buttons.

        Claimed in the handler; cancellation and responders start from ``after``."""
        return self._handle(request, "card", self.dispatch_card_action)

    def dispatch_card_action(self, payload: Any) -> IngressResponse:
        """Correlate, authorize and claim an authenticated card action; the body is the
        card callback's answer (toast, card). Shared by the HTTP handler and the long
        connection (``card`` frames). Never raises."""
        try:
            return self._card_response(payload)
        except Exception:
            logger.exception("Feishu card handler failed")
            return IngressResponse.json(200, {})

    def _card_response(self, payload: Any) -> IngressResponse:
        action = parse_card_action(payload)
        if action is None:
            return IngressResponse.json(200, {})
        return self.card_router.route(card_interaction(action)).to_response()

    def _form_action(self, interaction: Interaction) -> Decision | None:
        """Submit or Cancel of a question form (`questions`)."""
        action = interaction.raw
        if action.action not in (cards.SUBMIT_ACTION, cards.CANCEL_ACTION):
            return None
        return self.questions.handle_action(action)

    def _approval_pressed(self, interaction: Interaction) -> Decision | None:
        """An approval button (`approvals`)."""
        action = interaction.raw
        if action.action != APPROVAL_ACTION:
            return None
        return self.approvals.handle_action(action)

    def _presentation_pressed(self, interaction: Interaction) -> Decision | None:
        """A presentation button (`renderer`: ``{"command": ...}`` or ``{"value":
        ...}``): its command or value reaches the channel as a message the clicking
        person typed in the card's chat (a command runs as a command). A redelivered
        callback (same ``header.event_id``) is ignored; 503 when the channel is closed.
        None for an action with a name (not a presentation button)."""
        action: CardAction = interaction.raw
        if action.action:
            return None
        raw = action.value.get("command", action.value.get("value"))
        who, chat = action.operator_open_id, action.open_chat_id
        if not isinstance(raw, str) or not raw.strip() or who is None or chat is None:
            return Decision.ignored()
        event_id = action.event_id
        claim = self._claim_delivery(event_id, sent_at=action.sent_at)  # None: "first"
        if claim == "unavailable":  # the shared store is down: tell the person once
            return self._store_unavailable(chat, who, None)
        if claim != "first":
            return Decision.ignored()
        inbound = InboundMessage(channel_name=self.name, chat_id=chat, sender_id=who, text=raw)
        decision = decide_inbound(self, inbound)[1]
        if decision.status != 200 and event_id is not None:
            self._events_seen.forget(event_id)  # a redelivery may be served
        return decision

    # -- Stop ---------------------------------------------------------------------------

    def _stop_pressed(self, interaction: Interaction) -> Decision | None:
        """Correlate, authorize (owner only, fail closed) and claim a Stop press.

        The decision is the ACK body and the hand-off of the cancellation to the pool.
        """
        action: CardAction = interaction.raw
        if action.action != cards.STOP_ACTION:
            return None
        strings = cards.strings(self.feishu.language)
        segment_id = action.value.get("segment")
        if not isinstance(segment_id, str):
            return Decision.ignored()
        card = self.output.get(segment_id)
        if card is None:
            return Decision.ignored()  # historical or unknown: it never stops a later run
        if card.message_id is not None and action.open_message_id != card.message_id:
            return Decision.ignored()
        if action.operator_open_id is None or action.operator_open_id != card.owner_id:
            logger.info("Stop refused: operator is not the run owner")
            body = {"toast": {"type": "warning", "content": strings["toast_not_owner"]}}
            return Decision.ack(body, outcome="forbidden")
        if card.state.state != "running" or not card.stop_claim.try_claim():
            return Decision.ignored()
        card.stop_requested = True
        body = {"toast": {"type": "info", "content": strings["toast_stopped"]}}
        return Decision.ack(body).then(lambda: self.pool.post(self._stop, card))

    def _stop(self, card: Any) -> None:
        try:
            ok = self.cancel_run(card.session_id, card.run_id, CancellationReason.CANCEL_COMMAND)
        except Exception:
            logger.exception("Stop: cancel_run failed")
            ok = False
        if ok:
            self.output.finish(card.segment_id, "stopped")
            return
        card.stop_requested = False
        card.stop_claim.release()

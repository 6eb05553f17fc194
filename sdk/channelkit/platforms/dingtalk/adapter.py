"""``DingtalkChannel``: the DingTalk adapter (robot messages, status and question cards).

Ingress, by ``config.ingress``: ``"stream"`` (the default) is the Stream mode connection
`DingtalkChannel.stream` (`stream`; listed in ``connections``, started with
`start_connections()` or ``stream.start()``,
stopped by `close()`); ``"http"`` mounts ``POST /dingtalk/robot`` (robot messages,
``timestamp``/``sign`` checked) and ``POST /dingtalk/card`` (card actions,
``x-ddpaas-signature`` checked when ``card_callback_secret`` is set) with
``channelkit.web``. Both transports go through the same `dispatch_robot_message()` /
`dispatch_card_callback()`, which parse, correlate, authorize and claim
synchronously and return the ACK; the work that goes to the pool (the agent run,
responders, Card OpenAPI writes, notices) is in the response's ``after`` and starts only
once the ACK was written.

Behaviour:

* a real inbound message records ``msgId -> owner`` (senderStaffId, else senderId; at
  most 1,000 entries); the matching ``started`` event consumes it and binds the run to
  cards. Loop, webhook and other synthetic runs bind nothing and get no card;
* status cards (one per visible output segment) when ``interactiveCards.enabled`` and
  ``statusCard.enabled`` and block streaming is off; otherwise Markdown replies (the
  final answer through the delivery chain of `channelkit.platforms.common.delivery`:
  the trusted session webhook bound to the chat and the run's owner - the pair it
  arrived with, see `DingtalkChannel.record_inbound()` - while it is valid, then
  the robot API); the
  eye reaction on the inbound message while the run works (attached on ``started``,
  recalled on the terminal event), with or without status cards;
* question cards for structured questions when ``questionCard.enabled`` (and tool
  permissions with 2-4 options, `approvals`); otherwise the text prompt;
* a person whose run must wait for a slot sees a status card saying so ("Queued, 3
  ahead..."), updated in place as runs ahead finish (at most once a second per card,
  coalesced: `QueueNotices`), finalized "Starting
  now." at the start (status cards off or unavailable: one Markdown message);
* card actions are owner-only: a foreign user is acknowledged and gets one notice per
  card through the outbound group (or direct) message path, never into agent context;
* with a ``store`` (a `StateStore` shared by several
  processes serving the bot) run and card records, claims and tombstones live in the
  store: a card action reaching any instance is claimed once and applied by the
  instance that owns the run, and the cards of a dead instance are finalized by a
  survivor (`cluster`).
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, cast

from channelkit.agents.base import AgentBridge
from channelkit.attachments.model import Attachment
from channelkit.core import (
    ChannelBase,
    ChannelConfig,
    InboundMessage,
    LifecycleEvent,
    LifecycleType,
    OutputSegmentContext,
    PermissionRequestContext,
    SegmentEndReason,
    UserInputPresentationResult,
    UserInputRequestContext,
)
from channelkit.core.catalog import en, messages
from channelkit.core.commands import parse_command
from channelkit.core.inbound_files import AttachmentSource
from channelkit.core.queue_notices import QueueNotices
from channelkit.core.types import CancellationReason, RunQueuedEvent, SessionTarget
from channelkit.errors import ChannelKitError
from channelkit.http.auth import TokenProvider
from channelkit.ingress import IngressRequest, IngressResponse, IngressRoute
from channelkit.platforms.common.cluster import Cluster, ClusterOptions
from channelkit.platforms.common.connection import LongConnection
from channelkit.platforms.common.contract import Decision, Interaction
from channelkit.platforms.common.delivery import DeliveryChain, DeliveryPath, DeliveryTarget
from channelkit.platforms.common.limits import attach_pacer
from channelkit.platforms.common.observed_registry import ObservedStateRegistry
from channelkit.platforms.common.registry import MemoryStateRegistry, StateRegistry
from channelkit.platforms.common.replay import ReplayGuard, sent_at_seconds
from channelkit.platforms.common.router import InteractionRouter, decide_inbound
from channelkit.platforms.common.run_journal import TEXT_INTERRUPTED, RunJournal
from channelkit.platforms.common.shared_dedup import SharedDedup
from channelkit.platforms.common.store_watch import unavailable_notice
from channelkit.platforms.dingtalk.api import (
    STATUS_CARD_TEMPLATE_ID,
    CardApi,
    CardTarget,
    log_card_error,
)
from channelkit.platforms.dingtalk.approvals import ApprovalCards
from channelkit.platforms.dingtalk.cluster import (
    DingtalkCluster,
    FencedCardApi,
    queue_card_params,
)
from channelkit.platforms.dingtalk.config import DingtalkConfig
from channelkit.platforms.dingtalk.files import file_hosts, file_source
from channelkit.platforms.dingtalk.ingress import (
    card_interaction,
    check_card_signature,
    check_robot_signature,
    parse_card_callback,
    parse_robot_message,
)
from channelkit.platforms.dingtalk.markdown import message_markdown
from channelkit.platforms.dingtalk.output import DingtalkPresenter
from channelkit.platforms.dingtalk.stream import TOPICS, DingtalkStream
from channelkit.runtime import Clock, Scheduler, WorkerPool

if TYPE_CHECKING:
    from channelkit.attachments.outbound import OutboundSource
    from channelkit.state import StateStore

__all__ = [
    "CARD_PATH",
    "FAILED_TEXT",
    "FORBIDDEN_DIRECT_TEXT",
    "FORBIDDEN_GROUP_TEXT",
    "FORBIDDEN_TITLE",
    "ROBOT_PATH",
    "DingtalkChannel",
]

logger = logging.getLogger(__name__)

#: How long a robot message may still be redelivered after its ``createAt`` (DingTalk
#: publishes no figure: a Stream frame or HTTP callback not acknowledged is sent again
#: within minutes; an hour keeps a wide margin).
MESSAGE_REDELIVERY_WINDOW_S = 3600.0

ROBOT_PATH = "/dingtalk/robot"
CARD_PATH = "/dingtalk/card"
FORBIDDEN_TITLE = en("owner.card_title")
FORBIDDEN_GROUP_TEXT = en("owner.card_group")
FORBIDDEN_DIRECT_TEXT = en("owner.card_direct")
#: The Markdown a person sees when their run fails without a Failed status card.
FAILED_TEXT = en("notice.failed")
#: DingTalk Markdown messages are split at this many characters.
MARKDOWN_CHUNK = 3_800
# Constant ACK bodies (no JSON encoding on the web thread).
_CARD_ACK = b"{}"
_REJECTED = b'{"success":false}'


@dataclass(frozen=True)
class _InboundOwner:
    owner_key: str
    chat_id: str
    is_group: bool
    msg_id: str


@dataclass(frozen=True)
class _ChatRoute:
    is_group: bool
    user_id: str


@dataclass(frozen=True)
class _SessionWebhook:
    """A ``sessionWebhook`` bound to the (conversation, sender) pair it arrived with."""

    url: str
    expires_ms: int | None


def agent_label(bridge: object) -> str | None:
    """The name a status line shows for ``bridge`` when no model is configured: its
    ``model`` or ``name`` attribute (a non-blank string), else None."""
    for attribute in ("model", "name"):
        value = getattr(bridge, attribute, None)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def _split(text: str, size: int = MARKDOWN_CHUNK) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _title(text: str) -> str:
    first = next((line.strip(" #>*-`") for line in text.splitlines() if line.strip()), "")
    return (first[:20] or "Reply").strip() or "Reply"


class DingtalkChannel(ChannelBase):
    """The DingTalk adapter; see the module docstring.

    ``DingtalkChannel(config, bridge, *, api=None, token_provider=None,
    channel_config=None, executor=None, scheduler=None, clock=None)``. ``api`` replaces
    the `CardApi` built from ``config`` (tests, emulator); ``channel_config`` is
    the shared `ChannelConfig` (built from ``config`` when omitted; its
    ``permission_timeout`` is the host permission lifetime). ``stream_options`` go to the
    `DingtalkStream` (``backoff``, ``wait``,
    keepalive) in Stream mode.
    """

    def __init__(
        self,
        config: DingtalkConfig,
        bridge: AgentBridge,
        *,
        api: CardApi | None = None,
        token_provider: TokenProvider | Callable[[], str] | None = None,
        channel_config: ChannelConfig | None = None,
        executor: WorkerPool | None = None,
        run_executor: WorkerPool | None = None,
        scheduler: Scheduler | None = None,
        clock: Clock | None = None,
        registry: StateRegistry | None = None,
        stream_options: Mapping[str, Any] | None = None,
        store: StateStore | None = None,
        cluster_options: ClusterOptions | Mapping[str, Any] | None = None,
    ) -> None:
        if channel_config is None:
            channel_config = ChannelConfig(
                name=config.name,
                model=config.model,
                permission_timeout=config.host_permission_timeout_s,
            )
        super().__init__(
            channel_config,
            bridge,
            executor=executor,
            scheduler=scheduler,
            clock=clock,
            run_executor=run_executor,
        )
        self.dingtalk = config
        if api is None:
            # the token fetch shares the calls' pool and overall deadline (requestTimeout)
            api = CardApi.create(
                config.client_id,
                config.client_secret,
                token_provider=token_provider,
                base_url=config.api_base_url,
                timeout=config.request_timeout_s,
                # cards ask for the callbacks the ingress receives: HTTP under the
                # route key, else STREAM
                callback_route_key=None if config.stream else config.card_callback_route_key,
                pool_size=self.config.api_pool_size,
            )
        self.api = api
        #: outbound rate limits of every API call that writes (limits.py), shared
        #: through the store by every process of the bot
        self.outbound_pacer = attach_pacer(
            getattr(self.api, "client", None),
            "dingtalk",
            clock=self.clock,
            store=store,
        )
        #: the Stream mode connection (None with ``"ingress": "http"``)
        self.stream: DingtalkStream | None = None
        if config.stream:
            self.stream = DingtalkStream(
                self,
                lambda: self.api.open_stream_connection(config.client_secret, TOPICS),
                name=f"{config.name}-stream",
                clock=self.clock,
                **dict(stream_options or {}),
            )
        #: every piece of cross-callback state (owners, routes, cards, claims, tombstones)
        self.registry: StateRegistry = (
            registry if registry is not None else MemoryStateRegistry(self.clock)
        )
        #: the state store shared by several processes (None: this process alone)
        self.state_store: StateStore | None = store
        #: several processes, one bot (None without a state store)
        self.cluster: DingtalkCluster | None = None
        if store is not None:
            self.cluster = self._cluster(
                store,
                cluster_options,
                model=config.model or channel_config.model or agent_label(bridge),
            )
            self.registry = ObservedStateRegistry(self.registry, self.cluster)
        #: the people's runs in progress, in ``config.run_journal`` without a store (with
        #: one, the cluster's leases recover a dead instance's runs and tell their people)
        self.run_journal = RunJournal(self.name, path=config.run_journal if store is None else None)
        self._owners = self.registry.map("dingtalk-owners")
        # A msgId is remembered until its createAt + the redelivery window (and at
        # least the signed request's skew window on both sides); a redelivery after
        # that, or after the memory bound dropped it, is refused as stale (the rule of
        # platforms/common/replay.py). With a store, claimed there too: a copy on
        # another instance is dropped.
        ttl = max(MESSAGE_REDELIVERY_WINDOW_S, 2.0 * config.robot_max_skew_s)
        self._seen = SharedDedup(self.clock.time, ttl=ttl, scope="dingtalk-msg", store=store)
        #: robot and card signatures already accepted (each is one-use)
        self._signatures = ReplayGuard(self.clock.time)
        self._chats = self.registry.map("dingtalk-chats")
        #: (conversation id, sender) -> the session webhook that arrived with that pair,
        #: and the reverse binding (webhook URL -> its pair): a body naming a webhook
        #: already bound to another pair is not believed (see `record_inbound()`)
        self._webhooks = self.registry.map("dingtalk-webhooks")
        self._webhook_pairs = self.registry.map("dingtalk-webhook-pairs")
        self._webhook_lock = threading.Lock()
        self._reactions = self.registry.map("dingtalk-reactions")
        #: run_id -> its queue notice card, recorded in the store while the run waits
        self._queue_cards = self.registry.map("dingtalk-queue-cards")
        #: the final Markdown answer's retries and alternate paths (webhook -> robot API)
        self.delivery = DeliveryChain(self.scheduler, on_outcome=self.note_final_delivery)
        #: delivered / retried / failed / uncertain final answers
        self.delivery_health = self.delivery.health
        self.presenter: DingtalkPresenter | None = None
        card_api = api
        if self.cluster is not None:  # a fenced instance writes to no card again
            card_api = cast(CardApi, FencedCardApi(api, self.cluster.cluster.holds_lease))
            self.cluster.cluster.on_fenced = self._stop_runs_after_fencing
        if config.status_cards_enabled or config.question_cards_enabled:
            self.presenter = DingtalkPresenter(
                card_api,
                clock=self.clock,
                scheduler=self.scheduler,
                submit=self.pool.post,
                send_fallback=self._send_fallback,
                cancel_run=lambda session_id, run_id: self.cancel_run(session_id, run_id),
                status_cards=config.status_cards_enabled,
                question_cards=config.question_cards_enabled,
                model=config.model or channel_config.model or agent_label(bridge),
                question_timeout=self.question_lifetime(),
                registry=self.registry,
                notify_forbidden=self._send_forbidden_notice,
                on_card_text=self.cluster.card_text if self.cluster is not None else None,
                texts_for=self.messages_for,
            )
        #: approval cards for tool permissions with 2-4 options (question cards on)
        self.approvals: ApprovalCards | None = None
        if self.presenter is not None and self.presenter.questions is not None:
            self.approvals = ApprovalCards(
                card_api,
                presenter=self.presenter,
                registry=self.presenter.questions.registry,
                clock=self.clock,
                scheduler=self.scheduler,
                timeout_seconds=self.question_lifetime(),
                send_text=lambda chat_id, text: self._send_fallback(chat_id, text, ""),
                notify_forbidden=self._send_forbidden_notice,
                lifetime=self.question_lifetime,
                texts_for=self.messages_for,
            )
        #: card actions: the store's claim first (several processes), else this
        #: instance's Stop and question / approval forms
        self.card_router = InteractionRouter(
            (self._cluster_card_action, self._local_card_action),
            name=f"{config.name} card action",
        )
        #: queue notices on status cards, updated as the run moves up
        self.queue_notices: QueueNotices[tuple[str, str]] = QueueNotices(
            self, show=self._show_queue_notice, edit=self._edit_queue_notice
        )
        if self.cluster is not None:
            self.cluster.presenter = self.presenter
            self.cluster.cluster.start()

    def _cluster(
        self,
        store: StateStore,
        options: ClusterOptions | Mapping[str, Any] | None,
        *,
        model: str | None,
    ) -> DingtalkCluster:
        """The store-backed routing and recovery (`cluster`) of this instance."""
        if not isinstance(options, ClusterOptions):
            options = ClusterOptions.from_mapping(options)
        holder: list[DingtalkCluster] = []
        cluster = Cluster(
            store,
            channel=self.name,
            clock=self.clock,
            scheduler=self.scheduler,
            submit=self.pool.post,
            apply=lambda message: holder[0].apply(message),
            sweep=lambda first: holder[0].sweep(first),
            options=options,
        )
        holder.append(
            DingtalkCluster(
                cluster,
                api=self.api,
                clock=self.clock,
                submit=self.pool.post,
                notify=self._notify_owner,
                model=model,
            )
        )
        return holder[0]

    def _notify_owner(self, chat_id: str, owner: str, is_group: bool, text: str) -> None:
        text = self.messages_for(owner).text(text)  # a catalog message in their language
        if is_group:
            self.api.send_group_markdown(chat_id, _title(text), text)
        else:
            self.api.send_direct_markdown([owner], _title(text), text)

    def question_lifetime(self) -> float:
        """Seconds a question card stays answerable: ``min(questionCard.timeoutMs, host
        permission lifetime)`` (`ChannelBase.permission_lifetime()`). Each card also
        ends ``EXPIRY_MARGIN`` (1 s) before its request's ``context.expires_at``, so it is
        finalized ``expired`` before core's own timer answers the request.
        """
        return min(
            self.dingtalk.interactive_cards.question_card.timeout_s,
            self.permission_lifetime(),
        )

    # =================================================================================
    # Ingress
    # =================================================================================

    @property
    def connections(self) -> tuple[LongConnection, ...]:
        """The long connections this channel owns: the Stream connection in Stream mode."""
        return (self.stream,) if self.stream is not None else ()

    def ingress_routes(self) -> list[IngressRoute]:
        """``POST /dingtalk/robot`` and ``POST /dingtalk/card`` for the web layer with
        ``"ingress": "http"``; none in Stream mode (nothing would call them, and an
        unused card route would be one more way in).

        Logs a warning when card callbacks will be accepted unsigned (interactive cards
        on, no ``cardCallbackSecret``): anyone who can reach the URL and knows a card's
        ``outTrackId`` could then act as its owner.
        """
        if self.stream is not None:
            return []
        if self.presenter is not None and not self.dingtalk.card_callback_secret:
            logger.warning(
                "[%s] DingTalk card callbacks are not authenticated: set cardCallbackSecret "
                "(the apiSecret registered for the callback route) before exposing %s",
                self.name,
                CARD_PATH,
            )
        return [
            IngressRoute(ROBOT_PATH, self.handle_robot_request, ("POST",), "dingtalk-robot"),
            IngressRoute(CARD_PATH, self.handle_card_request, ("POST",), "dingtalk-card"),
        ]

    def handle_robot_request(self, request: IngressRequest) -> IngressResponse:
        """Verify (``timestamp``/``sign``, <= 1 h skew), parse and dispatch a robot message.

        401 missing signature headers, 403 bad signature or skew, 400 malformed JSON,
        then `dispatch_robot_message()`. Never raises.
        """
        try:
            payload, rejection = self._verified_json(
                request, check_robot_signature, self.dingtalk.client_secret
            )
            if rejection is not None:
                return rejection
        except Exception:
            logger.exception("[%s] robot callback failed", self.name)
            return IngressResponse.json(500, {"success": False})
        return self.dispatch_robot_message(payload)

    def dispatch_robot_message(self, payload: Any) -> IngressResponse:
        """Parse, dedup (``msgId``) and dispatch an authenticated robot message.

        The transport-neutral part both ingresses share: the HTTP handler calls it once
        the signature checked out, the Stream connection for each robot ``CALLBACK``
        frame (the connection is authenticated by its ticket). 503 when the channel is
        closed, else 200 ``{"success": true}`` whose ``after`` starts the run (or the
        command; a full queue is acknowledged too: core tells the person it is busy).
        See `channelkit.platforms.common.inbound`. Never raises.
        """
        try:
            message = parse_robot_message(payload)
            if message is None:
                return IngressResponse.json(200, {"success": True})
            sent_at = sent_at_seconds(message.raw.get("createAt"))
            claim = self._seen.claim(message.msg_id, sent_at)  # racing copies run once
            if claim == "unavailable":  # the store is down: tell the person once
                return self._store_unavailable_response(message)
            if claim != "first":
                return IngressResponse.json(200, {"success": True})  # redelivery / replay
            self.record_inbound(message)
            outcome, decision = decide_inbound(
                self,
                InboundMessage(
                    channel_name=self.name,
                    chat_id=message.conversation_id,
                    sender_id=message.owner_key,
                    text=message.text,
                    message_id=message.msg_id,
                    is_group=message.is_group,
                    sender_name=message.sender_nick,
                    mentions_bot=message.mentions_bot,
                    attachments=message.attachments,
                ),
            )
            if outcome != "accepted":
                self._owners.pop(message.msg_id)  # no run will consume it
            if outcome == "closed":
                self._seen.forget(message.msg_id)  # a redelivery may be served elsewhere
                return IngressResponse.json(decision.status, {"success": False})
            return decision.with_body({"success": True}, status=200).to_response()
        except Exception:
            logger.exception("[%s] robot message failed", self.name)
            return IngressResponse.json(500, {"success": False})

    def upload_file(
        self,
        target: SessionTarget,
        file: OutboundSource,
        *,
        image: bool = False,
        caption: str | None = None,
    ) -> str:
        """The agent's file: ``/media/upload`` on the legacy host, then the robot's
        ``sampleImageMsg`` (an image) or ``sampleFile`` message to the group or the 1:1
        chat the target routes to (`channelkit.platforms.dingtalk.files.upload`)."""
        from channelkit.platforms.dingtalk.files import upload
        from channelkit.platforms.dingtalk.sender import default_route

        known = self._chats.get(target.chat_id)
        route = (
            default_route(target.chat_id)
            if known is None
            else ((True, target.chat_id) if known.is_group else (False, known.user_id))
        )
        return upload(
            self.api.client, self.api.robot_code, route, file, image=image, caption=caption
        )

    def attachment_source(self, attachment: Attachment) -> AttachmentSource:
        """The message file download: the ``downloadCode`` exchanged for a temporary
        URL (``POST /v1.0/robot/messageFiles/download``), fetched without credentials
        and only on DingTalk's own hosts (`channelkit.platforms.dingtalk.files`)."""
        url = self.api.message_file_url(attachment.reference)
        return file_source(attachment, url, file_hosts(self.dingtalk.api_base_url))

    def _stop_runs_after_fencing(self) -> None:
        """A survivor took over this instance's cards: cancel the runs they show (on
        the pool; the cards themselves are no longer written)."""
        cluster = self.cluster
        if cluster is None:
            return
        for session_id, run_id in cluster.live_runs():
            try:
                self.cancel_run(session_id, run_id, CancellationReason.SHUTDOWN)
            except Exception:
                logger.exception("[%s] stopping run %s after fencing failed", self.name, run_id)

    def _store_unavailable_response(self, message: Any) -> IngressResponse:
        """The ACK of a message the state store could not vouch for: nothing runs; the
        first time this sender is met during the outage, ``MSG_STORE_UNAVAILABLE`` goes
        to the chat after the ACK (on the pool, through `send_message()`; the rule of
        `unavailable_notice()`)."""
        ack = IngressResponse.json(200, {"success": True})
        tell = unavailable_notice(
            self.state_store,
            channel=self.name,
            person=message.owner_key,
            messages=self.messages_for(message.owner_key),
            send=partial(self.send_message, message.conversation_id),
            post=self._post_notice,
        )
        if tell is None:
            return ack
        self.record_inbound(message)  # the chat's route and session webhook
        self._owners.pop(message.msg_id)  # no run will consume it
        return ack.with_after(tell)

    def _post_notice(self, work: Callable[[], None]) -> None:
        self.pool.post(work)

    def record_inbound(self, message: Any) -> None:
        """Remember a real inbound message: its owner (for run binding) and chat route."""
        self._owners.pop(message.msg_id)
        if parse_command(message.text) is None:  # a command starts no run: nothing to bind
            self._owners[message.msg_id] = _InboundOwner(
                message.owner_key, message.conversation_id, message.is_group, message.msg_id
            )
        self._chats[message.conversation_id] = _ChatRoute(message.is_group, message.owner_key)
        if message.session_webhook:
            self._bind_webhook(
                message.conversation_id,
                message.owner_key,
                _SessionWebhook(message.session_webhook, message.session_webhook_expires_ms),
            )

    def _bind_webhook(self, chat_id: str, owner_key: str, webhook: _SessionWebhook) -> None:
        """Bind ``webhook`` to ``(chat_id, owner_key)``. The body carrying it is not
        signed: a URL already bound to another pair is dropped (the replies of this pair
        go through the robot API), so a forged body can neither borrow another
        conversation's webhook nor replace that conversation's binding."""
        pair = (chat_id, owner_key)
        with self._webhook_lock:
            bound = self._webhook_pairs.get(webhook.url)
            if bound is not None and bound != pair:
                logger.warning(
                    "[%s] a sessionWebhook bound to another conversation or sender arrived "
                    "for chat %s; it is not used",
                    self.name,
                    chat_id,
                )
                return
            previous = self._webhooks.get(pair)
            if previous is not None and previous.url != webhook.url:
                self._webhook_pairs.pop(previous.url)
            self._webhooks[pair] = webhook
            self._webhook_pairs[webhook.url] = pair

    def _session_webhook(self, chat_id: str, owner_key: str | None) -> _SessionWebhook | None:
        """The webhook bound to ``(chat_id, owner_key)`` while it is valid, else None."""
        if not owner_key:
            return None
        with self._webhook_lock:
            webhook: _SessionWebhook | None = self._webhooks.get((chat_id, owner_key))
        if webhook is None or not self._webhook_valid(webhook):
            return None
        return webhook

    def handle_card_request(self, request: IngressRequest) -> IngressResponse:
        """Verify a card action (``x-ddpaas-signature`` when ``card_callback_secret`` is
        set: 401/403; 400 malformed JSON), then `dispatch_card_callback()`. Never
        raises."""
        try:
            payload, rejection = self._verified_json(
                request, check_card_signature, self.dingtalk.card_callback_secret
            )
            if rejection is not None:
                return rejection
        except Exception:
            logger.exception("[%s] card callback failed", self.name)
            return IngressResponse(200, _CARD_ACK)
        return self.dispatch_card_callback(payload)

    def dispatch_card_callback(self, payload: Any) -> IngressResponse:
        """Parse, correlate, authorize and claim an authenticated card action; ACK at once.

        Shared by the HTTP handler and the Stream connection (card ``CALLBACK`` frames).
        Everything (unknown card, duplicate, stale, foreign user) is acknowledged with
        200 ``{}`` (the card callback response) after its synchronous checks. Responders,
        card writes and notices are handed to the pool by the response's ``after``.
        Never raises.
        """
        try:
            return self.route_card_callback(payload).with_body(_CARD_ACK).to_response()
        except Exception:
            logger.exception("[%s] card callback failed", self.name)
            return IngressResponse(200, _CARD_ACK)

    def _verified_json(
        self,
        request: IngressRequest,
        check: Callable[..., int | None],
        secret: str | None,
    ) -> tuple[Any, IngressResponse | None]:
        """Check the signature (when ``secret`` is set) and decode the JSON body.

        Returns ``(payload, None)`` or ``(None, rejection)``: 401/403 for the signature,
        400 for a body that is not JSON.
        """
        if secret:
            status = check(
                request.headers,
                secret,
                now=self.clock.time(),
                max_skew_seconds=self.dingtalk.robot_max_skew_s,
                replay=self._signatures,
            )
            if status is not None:
                return None, IngressResponse(status, _REJECTED)
        try:
            return request.json(), None
        except ValueError:
            return None, IngressResponse(400, _REJECTED)

    def route_card_callback(self, payload: Any) -> Decision:
        """The synchronous part of a card callback (no network): its `Decision`, whose
        work runs on the pool after the ACK (`card_router`)."""
        callback = parse_card_callback(payload)
        if callback is None or self.presenter is None:
            return Decision.ignored()
        return self.card_router.route(card_interaction(callback)).handed_to(self.pool.post)

    def _cluster_card_action(self, interaction: Interaction) -> Decision | None:
        """With a state store every card action is correlated and claimed there, after
        the ACK (`DingtalkCluster.route()`); None without one."""
        if self.cluster is None:
            return None
        return self.cluster.route(interaction.raw)

    def _local_card_action(self, interaction: Interaction) -> Decision | None:
        """Stop, then question and approval forms, on this instance's cards."""
        if self.presenter is None:
            return None
        return self.presenter.router.route(interaction)

    def _send_forbidden_notice(self, target: CardTarget, actor_id: str) -> None:
        texts = self.messages_for(actor_id)  # the language of the person who pressed
        title = texts.text(FORBIDDEN_TITLE)
        try:
            if target.is_group:
                text = texts.text(FORBIDDEN_GROUP_TEXT)
                self.api.send_group_markdown(target.chat_id, title, text)
            else:
                text = texts.text(FORBIDDEN_DIRECT_TEXT)
                self.api.send_direct_markdown([actor_id], title, text)
        except ChannelKitError as exc:
            logger.warning("[%s] card interaction notice failed: %s", self.name, exc)

    # =================================================================================
    # Hooks
    # =================================================================================

    def send_message(self, chat_id: str, text: str, *, thread_id: str | None = None) -> None:
        """Markdown to a chat: the session webhook bound to the chat and its last sender
        while valid, else the robot API."""
        route = self._chats.get(chat_id)
        for part in _split(text):
            webhook = self._session_webhook(chat_id, route.user_id if route else None)
            if webhook is not None:
                self.api.send_webhook_markdown(webhook.url, _title(part), part)
            elif (route is not None and route.is_group) or (
                route is None and chat_id.startswith("cid")
            ):
                self.api.send_group_markdown(chat_id, _title(part), part)
            elif route is not None:
                self.api.send_direct_markdown([route.user_id], _title(part), part)
            else:
                raise ChannelKitError(f"no DingTalk route known for chat {chat_id!r}")

    def _final_parts(
        self, chat_id: str, text: str, owner_key: str | None
    ) -> list[tuple[DeliveryPath, ...]]:
        """The final answer's Markdown parts, each tried on the session webhook bound to
        the chat and the run's owner (``owner_key``) while it is valid (checked at each
        attempt), then on the robot API (group or direct). Neither has an idempotency
        key: no path is ``idempotent``."""
        route = self._chats.get(chat_id)
        webhook = self._session_webhook(chat_id, owner_key)
        parts: list[tuple[DeliveryPath, ...]] = []
        for part in message_markdown(text, MARKDOWN_CHUNK, self.messages_for(owner_key)):
            title = _title(part)
            paths: list[DeliveryPath] = []
            if webhook is not None:
                send = partial(self._send_by_webhook, webhook, title, part)
                paths.append(DeliveryPath("session webhook", send))
            if (route is not None and route.is_group) or (
                route is None and chat_id.startswith("cid")
            ):
                send = partial(self.api.send_group_markdown, chat_id, title, part)
                paths.append(DeliveryPath("robot groupMessages/send", send))
            elif route is not None:
                send = partial(self.api.send_direct_markdown, [route.user_id], title, part)
                paths.append(DeliveryPath("robot oToMessages/batchSend", send))
            parts.append(tuple(paths))
        return parts

    def _webhook_valid(self, webhook: _SessionWebhook) -> bool:
        now_ms = int(self.clock.time() * 1000)
        return webhook.expires_ms is None or webhook.expires_ms > now_ms + 5000

    def _send_by_webhook(self, webhook: _SessionWebhook, title: str, text: str) -> None:
        if not self._webhook_valid(webhook):
            raise ChannelKitError("the session webhook expired")  # a refusal: next path
        self.api.send_webhook_markdown(webhook.url, title, text)

    def presentation_sender(self, target: SessionTarget, *, silent: bool = False) -> Any:
        """Presentations as robot Markdown messages (`renderer`), to the group or
        the 1:1 chat a known chat routes to (else ``cid...`` / ``user:<id>``)."""
        from channelkit.platforms.dingtalk.sender import DingtalkSender, default_route

        def route(chat_id: str) -> tuple[bool, str]:
            known = self._chats.get(chat_id)
            if known is None:
                return default_route(chat_id)
            return (True, chat_id) if known.is_group else (False, known.user_id)

        return DingtalkSender.for_api(self.api, route=route)

    def await_run_output(self, run_id: str, timeout: float) -> None:
        """A run's presentation follows its cards: wait for the card writes it queued."""
        binding = self.presenter.run(run_id) if self.presenter is not None else None
        if binding is not None:
            binding.queue.call(lambda: None, timeout)

    def _send_fallback(self, chat_id: str, text: str, session_id: str) -> None:
        """The agent's Markdown (or a question's delivery-failure notice) as Markdown
        messages when its card cannot show it, rendered like a card
        (`message_markdown()`)."""
        try:
            target = self.target_for_session(session_id) if session_id else None
            texts = self.messages_for(target.sender_id if target is not None else None)
            for part in message_markdown(text, MARKDOWN_CHUNK, texts):
                self.send_message(chat_id, part)
        except Exception:
            logger.exception("[%s] Markdown fallback failed for chat %s", self.name, chat_id)

    def on_run_queued(self, event: RunQueuedEvent) -> None:
        """The queue notice on a status card kept current (see the module docstring)."""
        self.queue_notices.queued(event)

    def _show_queue_notice(self, event: RunQueuedEvent, text: str) -> tuple[str, str] | None:
        """The queue card (its outTrackId and its owner's locale), or None after sending
        the notice as a message."""
        owner = self._owners.get(event.message_id) if event.message_id else None
        presenter = self.presenter
        if (
            owner is None
            or presenter is None
            or presenter.status is None
            or event.owner is None
            or event.owner.id != owner.owner_key
            or not presenter.status_switch.allows(owner.chat_id)
        ):
            self.send_message(event.chat_id, text, thread_id=event.thread_id)
            return None
        track = f"ck-queue-{uuid.uuid4().hex}"
        target = CardTarget(owner.chat_id if owner.is_group else owner.owner_key, owner.is_group)
        texts = self.messages_for(owner.owner_key)
        try:
            self.api.create_and_deliver(
                STATUS_CARD_TEMPLATE_ID,
                track,
                target,
                queue_card_params(text, final=False, texts=texts),
            )
        except ChannelKitError as exc:
            log_card_error("queue card", exc, STATUS_CARD_TEMPLATE_ID, track)
            self.send_message(event.chat_id, text, thread_id=event.thread_id)
            return None
        if self.cluster is not None:  # a survivor ends it if this instance dies first
            self._queue_cards[event.run_id] = track
            self.cluster.queue_card_shown(
                track,
                run_id=event.run_id,
                owner=owner.owner_key,
                chat=owner.chat_id,
                group=owner.is_group,
            )
        return track, texts.locale

    def _queue_card_done(self, run_id: str) -> None:
        track = self._queue_cards.pop(run_id)
        if track is not None and self.cluster is not None:
            self.cluster.queue_card_done(track)

    def _edit_queue_notice(self, card: tuple[str, str], text: str, final: bool) -> None:
        track, locale = card
        self.api.update_instance(
            track, queue_card_params(text, final=final, texts=messages(locale))
        )

    def recover_interrupted_runs(self) -> None:
        """Without a store: tell each person whose run the previous process left
        unfinished (killed mid-run) `TEXT_INTERRUPTED`, once (on the pool; the service
        calls this when it starts). With a store the cluster does it."""
        self.run_journal.tell_leftovers(
            lambda chat, _thread, record: self.pool.post(self._tell_interrupted, chat, record)
        )

    def _tell_interrupted(self, chat_id: str, record: Mapping[str, Any]) -> None:
        user, group = record.get("user") or record.get("owner"), record.get("group")
        try:
            if isinstance(user, str) and user:
                self._notify_owner(chat_id, user, group is True, TEXT_INTERRUPTED)
            else:
                text = self.messages_for().text(TEXT_INTERRUPTED)
                self.api.send_group_markdown(chat_id, _title(text), text)
        except Exception as exc:
            logger.warning("dingtalk notice not sent: %s", type(exc).__name__)

    def on_task_lifecycle(self, event: LifecycleEvent) -> None:
        """Bind eligible runs on ``started``; end cards and reactions on terminal events."""
        if self.run_journal.enabled:
            route = self._chats.get(event.chat_id)
            extra = {"group": route.is_group, "user": route.user_id} if route else None
            self.run_journal.follow(event, extra)
        if event.type is LifecycleType.STARTED:
            self.queue_notices.started(event.run_id)
            self._queue_card_done(event.run_id)
            owner = self._owners.pop(event.message_id) if event.message_id else None
            if owner is None:
                return  # loop / webhook / synthetic / unknown message: no card, no reaction
            if (
                self.presenter is not None
                and event.owner is not None
                and event.owner.id == owner.owner_key
                and event.chat_id == owner.chat_id
            ):
                self.presenter.register_run(
                    event.run_id, event.session_id, owner.owner_key, owner.chat_id, owner.is_group
                )
            # the eye reaction shows the run works, with or without status cards; added
            # here on the run's lane (one quick call, failures only logged), so the
            # recall posted at the terminal event always follows it
            self._reactions[event.run_id] = (owner.msg_id, owner.chat_id)
            self._react(owner, True)
            return
        if not event.type.terminal:
            return
        self.queue_notices.forget(event.run_id)
        self._queue_card_done(event.run_id)
        failure_shown = False
        if self.presenter is not None:
            binding = self.presenter.run(event.run_id)
            # a Failed status card shows it only when the segment open at the failure
            # ended failed on a card with text (not when the last card ended at a
            # question's boundary, e.g. the agent died while a question waited)
            failure_shown = (
                binding is not None
                and event.segment_failed
                and self.presenter.status_switch.allows(binding.chat_id)
                and binding.streamed.length > 0
            )
            detail = event.reason if event.type is LifecycleType.CANCELLED else event.error
            self.presenter.terminalize_run(event.run_id, str(event.type), str(detail or "") or None)
        if event.type is LifecycleType.FAILED and event.owner is not None and not failure_shown:
            # no Failed status card shows it (none was opened, or cards are off)
            failed = self.messages_for(event.owner.id).text(FAILED_TEXT)
            self._send_fallback(event.chat_id, failed, event.session_id)
        reaction = self._reactions.pop(event.run_id)
        if reaction is not None:
            owner = _InboundOwner("", reaction[1], True, reaction[0])
            self.lanes.post(("dingtalk-reaction", event.run_id), self._react, owner, False)

    def _react(self, owner: _InboundOwner, add: bool) -> None:
        try:
            if add:
                self.api.reply_emotion(owner.msg_id, owner.chat_id)
            else:
                self.api.recall_emotion(owner.msg_id, owner.chat_id)
        except Exception as exc:  # an indicator never fails the run
            logger.info(
                "[%s] eye reaction %s failed: %s", self.name, "add" if add else "recall", exc
            )

    def on_response_chunk(
        self,
        chat_id: str,
        chunk: str,
        session_id: str,
        segment: OutputSegmentContext | None = None,
    ) -> None:
        """Stream visible text into the segment's status card (if it has one)."""
        if self.presenter is not None and segment is not None:
            self.presenter.append(segment, chunk)

    def on_output_segment_end(
        self,
        chat_id: str,
        session_id: str,
        segment: OutputSegmentContext,
        reason: SegmentEndReason,
    ) -> None:
        """Close the segment's card (boundary / input requested / failed / cancelled)."""
        if self.presenter is not None:
            self.presenter.close_segment(segment, str(reason))

    def on_response_complete(
        self,
        chat_id: str,
        text: str,
        session_id: str,
        segment: OutputSegmentContext | None = None,
    ) -> None:
        """Finalize the segment's card, or send the text as Markdown.

        A segment that streamed text ends with exactly that text on its card; ``text``
        (the whole run's text) is used only for a segment that streamed nothing, minus
        what earlier cards of the run already showed.
        """
        if self.presenter is not None and segment is not None:
            if self.presenter.close_output(segment, text, "completed", wait=True):
                return
            text = self.presenter.undelivered_text(segment.run_id, text)
            if not text:
                return
        if segment is not None:
            owner_key: str | None = segment.owner.id
            target = DeliveryTarget(self.name, chat_id, segment.run_id, owner_key)
        else:
            session_target = self.target_for_session(session_id)
            owner_key = session_target.sender_id if session_target is not None else None
            target = DeliveryTarget(self.name, chat_id, self.active_run_id(session_id))
        parts = self._final_parts(chat_id, text, owner_key)
        self.delivery.deliver(parts, target).raise_if_refused()

    def present_permission_request(
        self, context: PermissionRequestContext
    ) -> UserInputPresentationResult:
        """A tool permission with 2-4 options as an approval card (`approvals`),
        else UNSUPPORTED (the text prompt)."""
        if self.approvals is None:
            return UserInputPresentationResult.UNSUPPORTED
        return self.approvals.present(context)

    def present_user_input_request(
        self, context: UserInputRequestContext
    ) -> UserInputPresentationResult:
        """One question card per request (owner-bound run only), else UNSUPPORTED."""
        if self.presenter is None:
            return UserInputPresentationResult.UNSUPPORTED
        result = self.presenter.present_input(context, timeout=self.question_lifetime())
        return UserInputPresentationResult(result)

    def on_close(self) -> None:
        """Stop the Stream connection; finalize live cards as cancelled; pending
        final-answer retries are reported failed."""
        if self.stream is not None:
            self.stream.stop(timeout=5.0)
        if self.cluster is not None:
            self.cluster.cluster.stop(timeout=5.0)
        self.queue_notices.close()
        if self.presenter is not None:
            self.presenter.close()
        self.delivery.close()

    # -- introspection (tests, diagnostics) -------------------------------------------
    def map_sizes(self) -> Mapping[str, int]:
        """Sizes of the adapter's bounded maps."""
        sizes = {
            "owners": len(self._owners),
            "seen": len(self._seen),
            "chats": len(self._chats),
            "webhooks": len(self._webhooks),
            "reactions": len(self._reactions),
        }
        if self.presenter is not None:
            sizes["runs"] = self.presenter.live_runs
            if self.presenter.questions is not None:
                sizes.update(
                    {f"question_{k}": v for k, v in self.presenter.questions.map_sizes().items()}
                )
            if self.presenter.status is not None:
                sizes["status_live"] = self.presenter.status.live_count
                sizes["status_tombstones"] = self.presenter.status.registry.tombstone_count()
        return sizes

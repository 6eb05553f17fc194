"""``TelegramChannel``: typing keep-alive, native inline-keyboard questions, webhook.

Capabilities: Telegram implements *native input*
(inline-keyboard questions, `channelkit.platforms.telegram.questions`); the open
segment streams (``streaming``: drafts in private chats, post-and-edit in groups,
`channelkit.platforms.telegram.output`) and the agent's text is sent as messages
(its Markdown rendered as Telegram HTML by `channelkit.markdown`, split at block
boundaries within 4,096 characters, with a plain-rendering retry), one output segment
at a time: a segment that ends with ``response_boundary`` or ``input_requested`` is
sent at once, so the text written before a question arrives before the question's
messages; the final response sends only what was not sent yet; a cancelled segment
sends its text so far with a cancelled marker. Command replies and prompts stay plain text.

Lifecycle mapping (adapter-local): ``started`` -> start typing (one
keep-alive per chat, ``sendChatAction typing`` every 4 s on the core scheduler);
``completed`` / ``cancelled`` / ``failed`` -> stop typing when the chat's last run
ended; ``text_chunk`` / ``tool_call`` are ignored. Indicator failures are logged and
never fail the task.

Queue notice: a run that must wait for a slot gets one message ("Queued, 3 ahead..."),
edited in place with ``editMessageText`` as runs ahead finish (at most once a second per
notice, coalesced: `QueueNotices`) and to
"Starting now." when the run starts.

Setup: `TelegramChannel.register_command_menus()` registers the command menu
(``setMyCommands``, including ``/cancel``) once at startup: the default menu in the
channel's ``locale`` and one per catalog language (``language_code`` ``zh``, ``de``), so
Telegram shows each person the menu of their client's language.

Inbound (``TelegramConfig.ingress``): ``"polling"`` (default) puts a ``getUpdates``
long-polling runner in ``channel.connections`` (`channelkit.platforms.telegram.polling`;
start it with ``start_connections([channel])``, ``close`` stops it); ``"webhook"``: mount
`TelegramChannel.ingress_routes()` (``POST /telegram/webhook``, verified with
``X-Telegram-Bot-Api-Secret-Token``; the update's pool work starts from the response's
``after``, once the ACK was written). Both take the same path,
`TelegramChannel.receive_update()`. ``/cancel``, ``/approve``,
``/approve-always`` and ``/deny`` are handled by `ChannelBase`
(``/cancel@yourbot`` works in groups); ``/start`` and ``/help`` answer locally. A tap on
a presentation button (not a question keyboard) is answered and handled as the tapper
typing the button's value or command in that chat
(`presentation_tap()`).

Groups: ``group_policy`` (default ``"mention"``) lets only messages addressed to the bot
through, the mention removed (`channelkit.platforms.telegram.groups`); give
``bot_username`` or call `TelegramChannel.fetch_identity()` at startup.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from functools import partial
from typing import TYPE_CHECKING, Any

from channelkit.agents.base import AgentBridge, PermissionRequest
from channelkit.attachments.model import Attachment
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
    parse_command,
)
from channelkit.core.approvals import PermissionRequestContext
from channelkit.core.catalog import LOCALES, Messages, en, messages
from channelkit.core.inbound_files import AttachmentSource
from channelkit.core.queue_notices import QueueNotices
from channelkit.core.types import RunQueuedEvent, SessionTarget
from channelkit.errors import ApiError, ConfigurationError
from channelkit.ingress import IngressResponse, IngressRoute
from channelkit.platforms import platform_offers
from channelkit.platforms.common.cluster import ClusterOptions
from channelkit.platforms.common.connection import LongConnection, stop_connections
from channelkit.platforms.common.contract import Decision, Interaction
from channelkit.platforms.common.delivery import DeliveryChain, DeliveryTarget
from channelkit.platforms.common.inbound import CLOSED_STATUS
from channelkit.platforms.common.rate_limit import ChatRateLimiter, telegram_chat_limit
from channelkit.platforms.common.registry import MemoryStateRegistry, StateRegistry
from channelkit.platforms.common.router import InteractionRouter, decide_inbound
from channelkit.platforms.common.run_journal import RunJournal, channel_journal
from channelkit.platforms.common.shared_dedup import SharedDedup
from channelkit.platforms.common.shutdown import flush_run_lanes
from channelkit.platforms.common.store_watch import unavailable_notice
from channelkit.platforms.telegram.api import TelegramApi
from channelkit.platforms.telegram.approvals import TelegramApprovalPresenter
from channelkit.platforms.telegram.config import TelegramConfig
from channelkit.platforms.telegram.groups import GroupGate
from channelkit.platforms.telegram.indicators import TypingKeepAlive
from channelkit.platforms.telegram.ingress import (
    TelegramWebhook,
    TgCallbackQuery,
    TgMessage,
    TgUpdate,
    TgUser,
    parse_update,
    presentation_tap,
    tap_interaction,
)
from channelkit.platforms.telegram.ingress import receive_update as receive_decoded
from channelkit.platforms.telegram.output import (
    PARSE_MODE,
    STOPPED,
    LiveStreams,
    SegmentOutput,
    StreamCalls,
    final_parts,
    formatted_parts,
    is_entity_error,
    split_message,
)
from channelkit.platforms.telegram.polling import TelegramPolling
from channelkit.platforms.telegram.questions import (
    TEXT_UNKNOWN,
    TelegramQuestionPresenter,
)
from channelkit.runtime import Clock, Scheduler, WorkerPool

if TYPE_CHECKING:
    from channelkit.attachments.outbound import OutboundSource
    from channelkit.state.base import StateStore

__all__ = [
    "BOT_COMMANDS",
    "HELP_TEXT",
    "MENU_LANGUAGES",
    "TEXT_FAILED",
    "TEXT_INTERRUPTED",
    "WEBHOOK_PATH",
    "TelegramChannel",
    "command_menu",
    "split_message",
]

logger = logging.getLogger(__name__)

#: The webhook route `TelegramChannel.ingress_routes()` exposes.
WEBHOOK_PATH = "/telegram/webhook"
#: Seconds ``close`` waits for the polling thread to end (its long poll is cut at once).
CONNECTION_STOP_S = 5.0
#: Seconds an ``update_id`` is remembered (at most 10,000 of them) to drop redeliveries;
#: an id forgotten by either bound stays refused by the high-water mark (Telegram keeps an
#: unconfirmed update for 24 h and its ids increase).
UPDATE_DEDUP_TTL = 3600.0

#: What the person sees when their run fails (the agent could not start, failed before
#: any output, or died mid-run).
TEXT_FAILED = en("notice.failed")
#: What the person is told by a restarted process when their run was cut off by the
#: previous one's crash (``kill -9``): the run was recorded, it never ended.
TEXT_INTERRUPTED = en("notice.interrupted")

HELP_TEXT = en("telegram.help")

#: Telegram's command menu (``setMyCommands``) for the commands this adapter serves.
#: (``/approve-always`` works but cannot be listed: menu commands allow only a-z 0-9 _.)
#: The descriptions are catalog texts (``menu.<command>``), English here;
#: `command_menu()` gives them in another language.
BOT_COMMANDS: tuple[tuple[str, str], ...] = tuple(
    (name, en(f"menu.{name}"))
    for name in ("start", "help", "cancel", "approve", "deny", "last", "new", "status", "stop")
)
#: The Telegram ``language_code`` (ISO 639-1) of each catalog locale but ``en``, the
#: languages `TelegramChannel.register_command_menus()` registers a menu for.
MENU_LANGUAGES: tuple[str, ...] = tuple(
    dict.fromkeys(locale.split("-", 1)[0] for locale in LOCALES if locale != "en")
)


def command_menu(texts: Messages | None = None) -> tuple[tuple[str, str], ...]:
    """`BOT_COMMANDS` with their descriptions in the language of ``texts`` (default
    English)."""
    m = texts or messages()
    return tuple((name, m.text(description)) for name, description in BOT_COMMANDS)


_LOCAL_COMMANDS = ("start", "help")


def _language_code(user: TgUser) -> str | None:
    """The language the person's Telegram client uses (``language_code``), if told."""
    return user.language_code or None


def _thread_int(thread_id: str | None) -> int | None:
    if thread_id is None or thread_id == "":
        return None
    try:
        return int(thread_id)
    except ValueError:
        return None


def _wait_key(session_id: str, request_id: str) -> str:
    return f"{session_id}\0{request_id}"


class TelegramChannel(ChannelBase):
    """A `ChannelBase` for Telegram bots.

    ``TelegramChannel(config, bridge, *, channel_config=None, api=None, executor=None,
    scheduler=None, clock=None)``: ``config`` is the `TelegramConfig`;
    ``channel_config`` the shared `ChannelConfig` (default:
    ``ChannelConfig(name=config.channel_name)``); ``api`` replaces the Bot API wrapper
    (tests, shared clients); ``store`` a `StateStore` shared
    by every instance of the bot: an update reaching two of them starts one run.
    ``cluster_options`` (``instanceName``, ``leaseRenewS``, ``leaseExpiryS``: the
    ``state`` section's lease settings, which ``channelkit serve`` passes with
    ``state.redis``) time the lease the run journal keeps in ``store`` with webhook
    ingress, where several processes may serve the bot: a process that starts tells the
    people of the runs dead instances left, never those of another live instance's runs
    (`channelkit.platforms.common.run_journal`).
    """

    def __init__(
        self,
        config: TelegramConfig,
        bridge: AgentBridge,
        *,
        channel_config: ChannelConfig | None = None,
        api: TelegramApi | None = None,
        executor: WorkerPool | None = None,
        run_executor: WorkerPool | None = None,
        scheduler: Scheduler | None = None,
        clock: Clock | None = None,
        registry: StateRegistry | None = None,
        store: StateStore | None = None,
        cluster_options: ClusterOptions | Mapping[str, Any] | None = None,
    ) -> None:
        if not isinstance(config, TelegramConfig):
            raise ConfigurationError("must be a TelegramConfig", path="config")
        if channel_config is None:
            channel_config = ChannelConfig(name=config.channel_name)
        super().__init__(
            channel_config,
            bridge,
            executor=executor,
            scheduler=scheduler,
            clock=clock,
            run_executor=run_executor,
            threads=platform_offers("telegram", "threads"),  # groups: a session per thread
        )
        self.telegram_config = config
        #: every piece of cross-callback state (questions, claims, tombstones, updates)
        self.registry: StateRegistry = (
            registry if registry is not None else MemoryStateRegistry(self.clock)
        )
        self.api: TelegramApi = api or TelegramApi(
            config.bot_token,
            base_url=config.api_base_url,
            timeout_s=config.request_timeout_s,
            pool_size=self.config.api_pool_size,
        )
        self.typing = TypingKeepAlive(
            self._send_typing,
            scheduler=self.scheduler,
            submit=self.pool.post,
            interval_s=config.typing_interval_s,
            still_waiting=self._still_waiting,
        )
        self.questions = TelegramQuestionPresenter(
            self.api,
            submit=lambda key, fn: self.lanes.post(("telegram-question", key), fn),
            scheduler=self.scheduler,
            clock=self.clock,
            timeout_s=min(config.question_timeout_s, channel_config.permission_timeout),
            registry=self.registry.cards("telegram-questions"),
        )
        #: inline-keyboard approval buttons for ordinary tool permissions
        self.approvals = TelegramApprovalPresenter(
            self.api,
            submit=lambda key, fn: self.lanes.post(("telegram-approval", key), fn),
            clock=self.clock,
            registry=self.registry.cards("telegram-approvals"),
            prompt=lambda context: self.format_permission_request(context.request),
        )
        self.questions.texts_for = self.approvals.texts_for = self.messages_for
        #: button taps, in order: questions, approval buttons, presentation buttons;
        #: any other tap is still answered (the client's spinner stops)
        self.tap_router = InteractionRouter(
            (self._question_tapped, self._approval_tapped, self._presentation_tapped),
            fallback=self._unknown_tap,
            name=f"{self.name} button",
        )
        #: per-chat token buckets of every outbound message and edit of a streamed or
        #: final answer, in ``store`` when given (shared by every process of the bot)
        self.rate_limiter = ChatRateLimiter(
            "telegram", limit=telegram_chat_limit, clock=self.clock, store=store
        )
        self.output = SegmentOutput(
            self._send_segment_text,
            clock=self.clock,
            streams=self._live_streams(config),
            send_part=self._part_sender,
        )
        #: queue notices edited in place as the run moves up (editMessageText)
        self.queue_notices: QueueNotices[tuple[str, int]] = QueueNotices(
            self, show=self._show_queue_notice, edit=self._edit_queue_notice
        )
        #: which group messages are for the bot (``group_policy``, mentions, replies)
        self.groups = GroupGate(config.group_policy, config.bot_id, config.bot_username)
        #: the store shared by every instance of this bot (None: this process only)
        self.state_store = store
        #: update_ids already dispatched (here or, with ``store``, on any instance): a
        #: redelivered (or replayed) update is ignored; a store outage drops it. Update
        #: ids increase, so an id at or below the highest one forgotten (memory bound or
        #: TTL) is refused too: a high-water mark, never a second run.
        self._seen_updates = SharedDedup(
            self.clock.time,
            ttl=UPDATE_DEDUP_TTL,
            scope="telegram-update",
            store=store,
            ordered=True,
        )
        #: runs in progress, recorded (in ``store``, else in ``config.run_journal``)
        #: before the polling offset moves past their update (or the webhook's ACK),
        #: removed when they end: what a crash leaves is told "interrupted" by the next
        #: process that polls (the one poller of the bot takes every record left), or
        #: with webhook ingress by the next process that starts (a lease per instance:
        #: a live instance's runs are never told)
        self.run_journal = (
            channel_journal(
                self.name,
                store=store,
                path=config.run_journal,
                scheduler=self.scheduler,
                lease=cluster_options,
            )
            if config.ingress == "webhook"
            else RunJournal(self.name, store=store, path=config.run_journal)
        )
        #: the final answer's retries and alternate paths (formatted -> plain)
        self.delivery = DeliveryChain(self.scheduler, on_outcome=self.note_final_delivery)
        #: delivered / retried / failed / uncertain final answers
        self.delivery_health = self.delivery.health
        #: the getUpdates runner (``ingress="polling"``), else None
        self.polling: TelegramPolling | None = None
        if config.ingress == "polling":
            self.polling = TelegramPolling(
                config, self.receive_update, clock=self.clock, on_start=self._recover_runs
            )
        #: the long connections this channel owns (started by ``start_connections``)
        self.connections: list[LongConnection] = [self.polling] if self.polling else []

    def _live_streams(self, config: TelegramConfig) -> LiveStreams | None:
        """Live output of open segments (``streaming``), None when ``"off"``."""
        if config.streaming == "off":
            return None
        api = self.api
        calls = StreamCalls(
            draft=lambda chat, draft_id, text, thread, mode: api.send_message_draft(
                chat, draft_id, text, message_thread_id=thread, parse_mode=mode
            ),
            post=lambda chat, text, thread, mode: api.send_message(
                chat, text, message_thread_id=thread, parse_mode=mode
            ),
            edit=lambda chat, mid, text, mode: api.edit_message_text(
                chat, mid, text, parse_mode=mode
            ),
        )
        return LiveStreams(
            calls,
            clock=self.clock,
            scheduler=self.scheduler,
            submit=lambda run_id, fn: self.lanes.post(("telegram-stream", run_id), fn),
            deliver=lambda parts, target: self.delivery.deliver(parts, target),
            mode=config.streaming,
            interval=config.stream_interval_s,
            channel_name=self.name,
            rate_limiter=self.rate_limiter,
        )

    def _send_segment_text(self, chat_id: str, text: str, thread_id: str | None) -> None:
        """A closed segment's text: sent before what follows, once the chat's rate limit
        gives a token (this thread waits for it, bounded: `ChatRateLimiter.wait()`)."""
        self.rate_limiter.wait(chat_id)
        self.send_reply(chat_id, text, thread_id=thread_id)

    def _part_sender(self, chat_id: str, thread_id: str | None) -> Any:
        """``send(part, parse_mode)``: one ``sendMessage`` in the chat (and topic), once
        the chat's rate limit gives a token (else `Throttled`: the delivery chain waits)."""
        thread = _thread_int(thread_id)
        gate = self.rate_limiter.gate(chat_id)

        def send(part: str, parse_mode: str | None) -> object:
            gate()
            return self.api.send_message(
                chat_id, part, message_thread_id=thread, parse_mode=parse_mode
            )

        return send

    # -- setup ---------------------------------------------------------------------------
    def register_commands(
        self,
        *,
        scope: Mapping[str, Any] | None = None,
        language_code: str | None = None,
    ) -> None:
        """Register `BOT_COMMANDS` (including ``/cancel``) as the bot's menu.

        One ``setMyCommands`` request (it raises the `channelkit.errors` error when it
        fails). ``scope`` is a ``BotCommandScope`` such as
        ``{"type": "all_private_chats"}``. With ``language_code`` (``"de"``) the menu is
        the one people whose client uses that language see, its descriptions in that
        language (English when the catalog has no such language); without it, the
        default menu, in English. `register_command_menus()` registers every language.
        """
        texts = messages(language_code) if language_code else messages()
        self.api.set_my_commands(command_menu(texts), scope=scope, language_code=language_code)

    def register_command_menus(self, *, scope: Mapping[str, Any] | None = None) -> None:
        """Register the command menu once per catalog language; call once at startup.

        The default menu (no ``language_code``: people whose client language has no
        menu of its own) is in the channel's ``locale`` (English when not set); then
        one menu per `MENU_LANGUAGES` (``zh``, ``de``) in that language: at most
        ``1 + len(MENU_LANGUAGES)`` ``setMyCommands`` requests, in that order. Raises
        the `channelkit.errors` error of the first request that fails (the menus before
        it stay registered).
        """
        default = self.messages_for()
        self.api.set_my_commands(command_menu(default), scope=scope)
        for language in MENU_LANGUAGES:
            self.register_commands(scope=scope, language_code=language)

    def fetch_identity(self) -> str:
        """Learn the bot's username with ``getMe`` (for group mention detection).

        Call once at startup when ``bot_username`` is not configured (it makes one
        request and raises the `channelkit.errors` error when it fails). Returns
        the username.
        """
        username = self.api.get_me_username()
        self.groups.set_username(username)
        return username

    # -- ingress -------------------------------------------------------------------------
    def ingress_routes(self) -> list[IngressRoute]:
        """``POST /telegram/webhook``: secret-token check, parse, dispatch, ACK.

        The update's pool work (runs, commands, answerCallbackQuery, responders) is in
        the response's ``after``: it starts once the ACK was written. None with
        ``ingress="polling"`` (updates arrive through ``connections``)."""
        if self.telegram_config.ingress != "webhook":
            return []
        if not self.telegram_config.webhook_secret:
            logger.warning(
                "[%s] the Telegram webhook is not authenticated: set webhook_secret (and pass "
                "it to setWebhook as secret_token) before exposing %s",
                self.name,
                WEBHOOK_PATH,
            )
        handler = TelegramWebhook(self.telegram_config.webhook_secret, self._webhook_dispatch)
        return [IngressRoute(WEBHOOK_PATH, handler, ("POST",), "telegram-webhook")]

    def receive_update(self, data: Any) -> IngressResponse:
        """One decoded ``Update`` from either ingress: parse, dedup, authorize, claim;
        the answer a webhook would give (its ``after`` holds the pool hand-offs)."""
        return receive_decoded(data, self._webhook_dispatch, transport=self.telegram_config.ingress)

    def dispatch_update(self, update: TgUpdate | Mapping[str, Any]) -> Decision:
        """The synchronous part of one ``Update``: parse, correlate, authorize, claim.

        Its `Decision`'s work holds quick callables that hand the update's network work
        to the pool; run them after the ACK (the webhook route does, via
        ``IngressResponse.after``).
        """
        return self._dispatch(update)

    def _webhook_dispatch(self, update: TgUpdate) -> IngressResponse:
        """The webhook's answer to one update (`channelkit.platforms.common.inbound`:
        503 when the channel is closed, else 200 with the update's ``after``)."""
        decision = self._dispatch(update)
        if decision.status != 200:
            decision = decision.with_body({"ok": False})
        return decision.to_response()

    def _dispatch(self, update: TgUpdate | Mapping[str, Any]) -> Decision:
        parsed = update if isinstance(update, TgUpdate) else parse_update(update)
        sent = parsed.message.date if parsed.message is not None else 0
        # a tap carries no time of its own: taken as sent now (never refused after a wipe)
        sent_at = float(sent) if sent else self.clock.time()
        claim = self._seen_updates.claim(parsed.update_id, sent_at=sent_at)
        if claim == "unavailable":  # the shared store is down: tell the person once
            return self._store_unavailable(parsed)
        if claim != "first":
            logger.info("telegram update %s already handled; ignored", parsed.update_id)
            return Decision.ignored()
        decision = Decision.ignored()
        if parsed.callback_query is not None:
            tapper = parsed.callback_query.from_user  # their language answers the tap
            self.locales.note(str(tapper.id), _language_code(tapper))
            decision = self.tap_router.route(tap_interaction(parsed.callback_query))
        elif parsed.message is not None:
            decision = self._handle_message(parsed.message)
        if decision.status == CLOSED_STATUS:
            self._seen_updates.forget(parsed.update_id)  # a redelivery may be served
        return decision

    def _store_unavailable(self, parsed: TgUpdate) -> Decision:
        """The ACK of an update the state store could not vouch for: nothing runs; the
        first time its sender is met during the outage, ``MSG_STORE_UNAVAILABLE`` goes to
        the chat after the ACK (on the pool, through `send_message()`; the rule of
        `unavailable_notice()`)."""
        query = parsed.callback_query
        message, user = parsed.message, None
        if message is not None:
            user = message.from_user
        elif query is not None:
            message, user = query.message, query.from_user
        if message is None or user is None:
            return Decision.ignored()
        person = str(user.id)
        thread = str(message.message_thread_id) if message.message_thread_id else None
        tell = unavailable_notice(
            self.state_store,
            channel=self.name,
            person=person,
            messages=self.messages_for(person),
            send=partial(self.send_message, str(message.chat.id), thread_id=thread),
            post=self.pool.post,
        )
        return Decision.ignored() if tell is None else Decision.ignored().then(tell)

    def process_update(self, update: TgUpdate | Mapping[str, Any]) -> None:
        """Handle one ``Update`` you fetched yourself (no ACK to wait for).

        Runs synchronously and returns quickly: messages become runs or commands on the
        pool, button taps are claimed in memory and answered on the pool.
        """
        self.dispatch_update(update).run_after()

    def _question_tapped(self, interaction: Interaction) -> Decision | None:
        """A question keyboard's tap (`questions`)."""
        return self.questions.decide_callback(interaction.raw)

    def _approval_tapped(self, interaction: Interaction) -> Decision | None:
        """An approval button's tap (`approvals`)."""
        return self.approvals.decide_callback(interaction.raw)

    def _presentation_tapped(self, interaction: Interaction) -> Decision | None:
        """A presentation button: the person "typed" its value (or command) here."""
        query: TgCallbackQuery = interaction.raw
        tap = presentation_tap(query)
        if tap is None:
            return None
        query_id = query.id
        answer = Decision.ack().then(lambda: self.pool.post(self._answer_quietly, query_id, None))
        typed = self._handle_message(tap, tapped=True)
        return answer.merge(typed).with_body(None, status=200)  # a tap is always ACKed

    def _unknown_tap(self, interaction: Interaction) -> Decision:
        """Not one of ours: still answer it so the client's spinner stops."""
        query_id = interaction.raw.id
        return Decision.ignored().then(
            lambda: self.pool.post(self._answer_quietly, query_id, TEXT_UNKNOWN)
        )

    def _answer_quietly(self, query_id: str, text: str | None) -> None:
        try:
            self.api.answer_callback_query(query_id, text)
        except Exception as exc:
            logger.warning("telegram answerCallbackQuery failed: %s", type(exc).__name__)

    def _handle_message(self, message: TgMessage, *, tapped: bool = False) -> Decision:
        """A person's message (``tapped``: a presentation button's value, addressed to the
        bot by the tap itself, so only ``group_policy="disabled"`` drops it in groups);
        its decision's status is 503 when the channel is closed."""
        sender = message.from_user
        if sender is None or sender.is_bot:
            return Decision.ignored()  # service messages, channel posts
        if message.text is None:
            if not message.attachments or not self._takes_media_only(message):
                return Decision.ignored()  # nothing for the bot (or not addressed to it)
            text: str | None = ""  # a photo or a file alone starts a run too
        elif tapped:
            private = message.chat.type == "private"
            text = message.text if private or self.groups.policy != "disabled" else None
        else:
            text = self.groups.admit(message)
        if text is None:
            return Decision.ignored()  # a group message not addressed to the bot (group_policy)
        thread = message.message_thread_id if message.is_topic_message else None
        command = (
            text.strip().split(maxsplit=1)[0][1:].split("@", 1)[0].lower() if text.strip() else ""
        )
        if text.startswith("/") and command in _LOCAL_COMMANDS:
            chat_id = str(message.chat.id)
            self.locales.note(str(sender.id), _language_code(sender))
            help_text = self.messages_for(str(sender.id)).text(HELP_TEXT)
            return Decision.ack().then(
                lambda: self.pool.post(self._send_quietly, chat_id, help_text, thread)
            )
        msg = InboundMessage(
            channel_name=self.name,
            chat_id=str(message.chat.id),
            sender_id=str(sender.id),
            text=text,
            message_id=None if tapped else str(message.message_id),
            thread_id=str(thread) if thread is not None else None,
            is_group=message.chat.type != "private",
            sender_name=sender.first_name or sender.username,
            language=_language_code(sender),
            attachments=message.attachments,
            # None (counts as addressed): a tapped button addresses the bot by itself,
            # and group_policy "open" admitted every group message already
            mentions_bot=None
            if tapped or message.chat.type == "private" or self.groups.policy == "open"
            else self.groups.addressed(message),
        )
        outcome, decision = decide_inbound(self, msg)
        if (
            outcome == "accepted"
            and msg.message_id is not None
            and parse_command(text) is None
            and self.access.admits(msg)
        ):
            self._record_run(msg)
        return decision

    def _takes_media_only(self, message: TgMessage) -> bool:
        """Whether a photo or file without a caption is for the bot: always in a
        private chat; in a group only with ``group_policy="open"`` or as a reply to
        the bot (there is no caption to mention it in)."""
        if message.chat.type == "private":
            return True
        if self.groups.policy == "disabled":
            return False
        return self.groups.policy == "open" or message.reply_to_from_id == self.groups.bot_id

    def upload_file(
        self,
        target: SessionTarget,
        file: OutboundSource,
        *,
        image: bool = False,
        caption: str | None = None,
    ) -> str:
        """The agent's file as ``sendPhoto`` (an image Telegram shows as a photo) or
        ``sendDocument``, multipart, in the target's topic (`files`)."""
        from channelkit.platforms.telegram.files import upload

        return upload(self.api, target, file, image=image, caption=caption)

    def attachment_source(self, attachment: Attachment) -> AttachmentSource:
        """``getFile`` for the attachment's ``file_id``, then its path on the Bot API
        host (no redirect is followed: Telegram serves files from that host)."""
        file_path, _size = self.api.get_file(attachment.reference)
        return AttachmentSource(self.api.file_url(file_path))

    # -- runs cut off by a crash ---------------------------------------------------------
    @staticmethod
    def _run_key(chat_id: str, message_id: str) -> str:
        return f"{chat_id}:{message_id}"

    def _record_run(self, msg: InboundMessage) -> None:
        """Record an admitted run (before the polling offset moves past its update)."""
        if not self.run_journal.enabled or msg.message_id is None:
            return
        record = {"chat": msg.chat_id, "thread": msg.thread_id, "at": self.clock.time()}
        self.run_journal.record(self._run_key(msg.chat_id, msg.message_id), record)

    def _recover_runs(self) -> None:
        """Polling starts: tell the person of every run the previous process recorded
        and never ended (it was killed) that it was interrupted (on the pool)."""
        self.run_journal.tell_leftovers(self._tell_interrupted)

    def recover_interrupted_runs(self) -> None:
        """Webhook ingress: tell each person whose run a process that died left
        unfinished that it was interrupted, once (the service calls this when it
        starts; with polling ingress the poller does it when polling starts)."""
        if self.polling is None:
            self.run_journal.tell_leftovers(self._tell_interrupted)

    def _tell_interrupted(self, chat: str, thread: str | None, _record: Any) -> None:
        self.pool.post(
            self._send_quietly,
            chat,
            self.messages_for().text(TEXT_INTERRUPTED),
            _thread_int(thread),
        )

    def presentation_sender(self, target: SessionTarget, *, silent: bool = False) -> Any:
        """Presentations as text + inline keyboard (`renderer`), in the target's
        topic; ``silent`` sends without a notification."""
        from channelkit.core.presenting import FieldsSender
        from channelkit.platforms.telegram.sender import TelegramSender

        fields: dict[str, Any] = {}
        thread = _thread_int(target.thread_id)
        if thread is not None:
            fields["message_thread_id"] = thread
        if silent:
            fields["disable_notification"] = True
        return FieldsSender(TelegramSender(self.api.client), fields)

    def _send_quietly(self, chat_id: str, text: str, thread: int | None) -> None:
        try:
            self.api.send_message(chat_id, text, message_thread_id=thread)
        except Exception as exc:
            logger.warning("telegram sendMessage failed: %s", type(exc).__name__)

    # -- hooks ---------------------------------------------------------------------------
    def send_message(self, chat_id: str, text: str, *, thread_id: str | None = None) -> None:
        """Plain text (no parse mode), split at 4,096 characters."""
        for part in split_message(text or " "):
            self.api.send_message(chat_id, part, message_thread_id=_thread_int(thread_id))

    def send_reply(self, chat_id: str, text: str, *, thread_id: str | None = None) -> None:
        """The agent's text, formatted: its Markdown rendered as Telegram HTML
        (`channelkit.markdown`), split at block boundaries within 4,096 characters; a part
        Telegram rejects ("can't parse entities") goes out as its plain rendering."""
        thread = _thread_int(thread_id)
        for html, plain in formatted_parts(text) or [(" ", " ")]:
            self._send_formatted(chat_id, html, plain, thread)

    def _send_formatted(self, chat_id: str, html: str, plain: str, thread: int | None) -> None:
        if html == plain:
            self.api.send_message(chat_id, plain, message_thread_id=thread)
            return
        try:
            self.api.send_message(chat_id, html, message_thread_id=thread, parse_mode=PARSE_MODE)
        except ApiError as exc:
            if not is_entity_error(exc):
                raise
            logger.info("telegram rejected the formatted reply; sending it as plain text")
            self.api.send_message(chat_id, plain, message_thread_id=thread)

    def on_task_lifecycle(self, event: LifecycleEvent) -> None:
        """started -> typing keep-alive; terminal -> stop it (and forget the run's
        output state); ``failed`` of a person's run also sends `TEXT_FAILED`;
        other events ignored."""
        thread = _thread_int(event.thread_id)
        if event.type is LifecycleType.STARTED:
            self.queue_notices.started(event.run_id)
            self.typing.start(event.chat_id, event.run_id, thread)
        elif event.type in (LifecycleType.TEXT_CHUNK, LifecycleType.TOOL_CALL):
            self.typing.refresh(event.chat_id, thread)  # the agent goes on: answered
        elif LifecycleType(event.type).terminal:
            self.queue_notices.forget(event.run_id)
            if event.message_id is not None and event.owner is not None:
                self.run_journal.done(self._run_key(event.chat_id, event.message_id))
            self.typing.stop(event.chat_id, event.run_id, thread)
            self.output.discard(event.run_id)
            if event.type is LifecycleType.FAILED and event.owner is not None:
                failed = self.messages_for(event.owner.id).text(TEXT_FAILED)
                self._send_quietly(event.chat_id, failed, thread)

    def on_run_queued(self, event: RunQueuedEvent) -> None:
        """The queue notice is one message, edited (``editMessageText``) as the run
        moves up, at most once a second, and to "Starting now." when it starts."""
        self.queue_notices.queued(event)

    def _show_queue_notice(self, event: RunQueuedEvent, text: str) -> tuple[str, int]:
        thread = _thread_int(event.thread_id)
        return event.chat_id, self.api.send_message(event.chat_id, text, message_thread_id=thread)

    def _edit_queue_notice(self, notice: tuple[str, int], text: str, final: bool) -> None:
        self.api.edit_message_text(notice[0], notice[1], text)

    def on_response_chunk(
        self,
        chat_id: str,
        chunk: str,
        session_id: str,
        segment: OutputSegmentContext | None = None,
    ) -> None:
        """Collect the segment's visible text (nothing is shown while it streams)."""
        if segment is not None:
            self.output.append(segment, chunk)

    def on_output_segment_end(
        self,
        chat_id: str,
        session_id: str,
        segment: OutputSegmentContext,
        reason: SegmentEndReason,
    ) -> None:
        """``response_boundary`` / ``input_requested`` (and ``completed``): send the
        segment's text now, before a following question; ``cancelled``: its text with
        the cancelled marker, or the stopped marker when the channel is closing (SIGTERM);
        ``failed``: its text as it was, before the failure notice."""
        ending = str(reason)
        if reason == SegmentEndReason.CANCELLED and self.closed:
            ending = STOPPED
        self.output.close_segment(segment, ending)
        super().on_output_segment_end(chat_id, session_id, segment, reason)

    def on_response_complete(
        self,
        chat_id: str,
        text: str,
        session_id: str,
        segment: OutputSegmentContext | None = None,
    ) -> None:
        """Send the part of the run's ``text`` no earlier segment sent (nothing when
        nothing remains) through the delivery chain (retries with backoff on the
        scheduler, formatted -> plain); only a definite refusal of every path raises (the
        run fails in phase delivery)."""
        if segment is None:  # loop / webhook runs have no segments: the whole text
            session_target = self.target_for_session(session_id)
            thread_id = session_target.thread_id if session_target else None
            run_id, owner_id, due = self.active_run_id(session_id), None, text
        else:
            thread_id, run_id = segment.target.thread_id, segment.run_id
            owner_id = segment.owner.id
        send = self._part_sender(chat_id, thread_id)
        if segment is None:
            parts = final_parts(due, send)
        else:  # over the streamed message when there is one (editMessageText first)
            parts = self.output.final_answer(segment, text, send)
            if not parts:
                return
        target = DeliveryTarget(self.name, chat_id, run_id, owner_id)
        self.delivery.deliver(parts, target).raise_if_refused()

    def present_user_input_request(
        self, context: UserInputRequestContext
    ) -> UserInputPresentationResult:
        """Inline-keyboard questions bound to this request (UNSUPPORTED when disabled,
        for a second request in the same run, or when delivery fails)."""
        if not self.telegram_config.native_questions:
            return UserInputPresentationResult.UNSUPPORTED
        chat, thread = context.target.chat_id, _thread_int(context.target.thread_id)
        key = _wait_key(context.session_id, context.request_id)
        self.typing.pause(chat, key, thread)  # the person's turn: typing pauses
        context.on_settled(lambda _reason: self.typing.resume(chat, key, thread))
        return UserInputPresentationResult(self.questions.present(context))

    def present_permission_request(
        self, context: PermissionRequestContext
    ) -> UserInputPresentationResult:
        """The permission prompt with one inline button per agent option, owner-only
        (`channelkit.platforms.telegram.approvals`); UNSUPPORTED (text prompt) when
        ``native_questions`` is off or the keyboard cannot be sent."""
        if not self.telegram_config.native_questions:
            return UserInputPresentationResult.UNSUPPORTED
        # the prompt is format_permission_request's, which pauses typing too
        return UserInputPresentationResult(self.approvals.present(context))

    def format_permission_request(self, request: PermissionRequest) -> str:
        """The core's text prompt; typing pauses until the request is answered."""
        target = self.target_for_session(request.session_id)
        if target is not None:
            key = _wait_key(request.session_id, request.request_id)
            self.typing.pause(target.chat_id, key, _thread_int(target.thread_id))
        return super().format_permission_request(request)

    def _still_waiting(self, key: str) -> bool:
        session_id, _, request_id = key.partition("\0")
        return request_id in self.pending_request_ids(session_id)

    def on_close(self) -> None:
        """Stop polling, every keep-alive; let the cancelled runs show their partial text
        (stopped marker) and end; expire live questions, forget output state."""
        stop_connections(self.connections, CONNECTION_STOP_S)
        flush_run_lanes(self.lanes, self.output.run_ids(), self.name)
        self.typing.close()
        self.queue_notices.close()
        self.run_journal.close()  # the lease given up (webhook ingress)
        self.questions.close()
        self.output.close()
        self.delivery.close()

    def _send_typing(self, chat_id: int | str, thread_id: int | None) -> None:
        self.api.send_chat_action(chat_id, "typing", message_thread_id=thread_id)

"""``WeixinChannel``: text in, text out, typing via iLink getconfig + sendtyping.

Capabilities: Weixin supports *neither* streaming
output *nor* native input, so it inherits `ChannelBase`'s text
behaviour end to end: the final response is plain text (the agent's Markdown rendered
as plain text by `channelkit.markdown`, since Weixin shows Markdown verbatim; sent
through the delivery chain of `channelkit.platforms.common.delivery`, which retries
429 / 5xx / connect failures with backoff on the scheduler), structured questions and
tool permissions arrive as the text permission prompt, and ``/approve``,
``/approve-always``, ``/deny`` and ``/cancel`` answer them.

Lifecycle mapping (adapter-local): ``started`` -> typing on,
``completed`` / ``cancelled`` / ``failed`` -> typing off, ``text_chunk`` / ``tool_call``
ignored (see `channelkit.platforms.weixin.indicators`). While a text permission
prompt waits for the person, typing is off; it is switched on again once the request
is no longer pending (checked every second on the scheduler) and the run goes on.

Ingress (``WeixinConfig.ingress``, ``"polling"`` only): iLink delivers messages by long
polling (``POST /ilink/bot/getupdates``). The channel's ``connections`` hold the runner
(`channelkit.platforms.weixin.polling`; start it with
``start_connections([channel])``, ``close`` stops it), which hands every received
``WeixinMessage`` to `WeixinChannel.handle_weixin_message()`, once per message id.
The latest ``context_token`` per user is kept (bounded, 1,000 users) because
``sendmessage`` and ``getconfig`` need it.

Files (`channelkit.platforms.weixin.files`): a person's images, voice messages, files and
videos become the message's attachments, downloaded from the CDN and decrypted while
they stream (`attachment_source()`); the agent's files are uploaded to the CDN and sent
as an image or file message (`upload_file()`).

Shutdown (SIGTERM, ``close``): Weixin shows nothing while a run writes, so a run stopped
by the shutdown sends what the agent wrote so far, followed by `STOPPED_MARKER`
(the run's visible text is kept per run, bounded: 1,000 runs, 20,000 characters each,
and forgotten at the run's end).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any

from channelkit.agents.base import AgentBridge, PermissionRequest
from channelkit.core import (
    ChannelBase,
    ChannelConfig,
    CommandHandle,
    InboundMessage,
    LifecycleEvent,
    LifecycleType,
    OutputSegmentContext,
    RunHandle,
    SegmentEndReason,
)
from channelkit.core.catalog import en
from channelkit.errors import ConfigurationError
from channelkit.ingress import IngressRoute
from channelkit.markdown import Dialect, looks_plain, render
from channelkit.platforms.common.connection import LongConnection, stop_connections
from channelkit.platforms.common.delivery import DeliveryChain, DeliveryPath, DeliveryTarget
from channelkit.platforms.common.inbound import hand_inbound
from channelkit.platforms.common.limits import attach_pacer
from channelkit.platforms.common.registry import MemoryStateRegistry, StateRegistry
from channelkit.platforms.common.run_journal import RunJournal
from channelkit.platforms.common.shutdown import flush_run_lanes
from channelkit.platforms.common.store_watch import unavailable_notice
from channelkit.platforms.common.text import bound_text
from channelkit.platforms.weixin.api import WeixinApi
from channelkit.platforms.weixin.config import WeixinConfig
from channelkit.platforms.weixin.files import media_source, parse_media, upload
from channelkit.platforms.weixin.indicators import WeixinTyping
from channelkit.platforms.weixin.polling import WeixinPolling
from channelkit.runtime import BoundedMap, Clock, Scheduler, WorkerPool

if TYPE_CHECKING:
    from channelkit.attachments.model import Attachment
    from channelkit.attachments.outbound import OutboundSource
    from channelkit.core.inbound_files import AttachmentSource
    from channelkit.core.types import SessionTarget
    from channelkit.state.base import StateStore

__all__ = [
    "MAX_TEXT_CHARS",
    "STOPPED_MARKER",
    "TEXT_FAILED",
    "TEXT_INTERRUPTED",
    "WeixinChannel",
    "flatten_markdown",
    "parse_weixin_message",
    "plain_parts",
]

logger = logging.getLogger(__name__)

#: Outbound text is split into parts of at most this many characters.
MAX_TEXT_CHARS = 4000
#: What a restarted process tells the person whose run the previous one's crash cut off.
TEXT_INTERRUPTED = en("notice.interrupted")
#: Ends the partial text of a run stopped by a shutdown (SIGTERM).
STOPPED_MARKER = en("marker.stopped")
#: Runs whose visible text is kept at once (for the shutdown notice).
MAX_TEXT_RUNS = 1_000
#: Seconds between checks whether a permission request typing paused for was answered.
WAIT_POLL_S = 1.0
#: Seconds ``close`` waits for the polling thread to end (its long poll is cut at once).
CONNECTION_STOP_S = 5.0
#: What the person sees when their run fails (the agent could not start, failed before
#: any output, or died mid-run).
TEXT_FAILED = en("notice.failed")

_USER_MESSAGE = 1
_TEXT_ITEM = 1


def plain_parts(text: str, limit: int = MAX_TEXT_CHARS) -> list[str]:
    """The agent's Markdown as plain text (`channelkit.markdown`, ``Dialect.PLAIN``:
    headings and emphasis as their text, links as ``text (url)``, code as written, tables
    aligned), split at block boundaries within ``limit``; a text without Markdown as
    written; ``[" "]`` when nothing shows."""
    if looks_plain(text):
        return [text[start : start + limit] for start in range(0, len(text), limit)] or [" "]
    return render(text, Dialect.PLAIN, limit=limit) or [" "]


def flatten_markdown(text: str) -> str:
    """The agent's Markdown as one plain text (`plain_parts()` without a limit)."""
    if looks_plain(text):
        return text
    return "\n\n".join(render(text, Dialect.PLAIN))


def parse_weixin_message(message: Mapping[str, Any]) -> tuple[str, str, str | None, str | None]:
    """``(from_user_id, text, message_id, context_token)`` of a user message.

    A message with media items and no text has the text ``""`` (its media:
    `channelkit.platforms.weixin.files.parse_media`). Raises ``ValueError`` naming the
    field when it is not a user message with text or media.
    """
    if not isinstance(message, Mapping):
        raise ValueError("message: must be an object")
    if message.get("message_type", _USER_MESSAGE) != _USER_MESSAGE:
        raise ValueError("message.message_type: not a user message")
    sender = message.get("from_user_id")
    if not isinstance(sender, str) or not sender:
        raise ValueError("message.from_user_id: must be a non-empty string")
    items = message.get("item_list")
    if not isinstance(items, list):
        raise ValueError("message.item_list: must be a list")
    texts: list[str] = []
    for index, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise ValueError(f"message.item_list[{index}]: must be an object")
        if item.get("type") == _TEXT_ITEM:
            text_item = item.get("text_item")
            text = text_item.get("text") if isinstance(text_item, Mapping) else None
            if not isinstance(text, str):
                raise ValueError(f"message.item_list[{index}].text_item.text: must be a string")
            texts.append(text)
    if not texts and not parse_media(items):
        raise ValueError("message.item_list: no text or media item")
    raw_id = message.get("message_id")
    message_id = str(raw_id) if isinstance(raw_id, str | int) and raw_id != "" else None
    token = message.get("context_token")
    return sender, "\n".join(texts), message_id, token if isinstance(token, str) else None


class WeixinChannel(ChannelBase):
    """A `ChannelBase` for the WeChat iLink bot.

    ``WeixinChannel(config, bridge, *, channel_config=None, api=None, executor=None,
    scheduler=None, clock=None)``; ``channel_config`` defaults to
    ``ChannelConfig(name=config.channel_name)``.
    """

    #: iLink messages cannot be edited: the core sends a segment's text when it ends at a
    #: boundary or a question, the final answer is the rest
    text_only_output = True

    def __init__(
        self,
        config: WeixinConfig,
        bridge: AgentBridge,
        *,
        channel_config: ChannelConfig | None = None,
        api: WeixinApi | None = None,
        executor: WorkerPool | None = None,
        run_executor: WorkerPool | None = None,
        scheduler: Scheduler | None = None,
        clock: Clock | None = None,
        registry: StateRegistry | None = None,
        store: StateStore | None = None,
    ) -> None:
        if not isinstance(config, WeixinConfig):
            raise ConfigurationError("must be a WeixinConfig", path="config")
        if channel_config is None:
            channel_config = ChannelConfig(name=config.channel_name)
        super().__init__(
            channel_config,
            bridge,
            executor=executor,
            scheduler=scheduler,
            clock=clock,
            run_executor=run_executor,
        )
        self.weixin_config = config
        self.api: WeixinApi = api or WeixinApi(
            config.bot_token,
            base_url=config.base_url,
            channel_version=config.channel_version,
            timeout_s=config.request_timeout_s,
            pool_size=self.config.api_pool_size,
        )
        #: cross-callback state (the latest context token per user)
        self.registry: StateRegistry = (
            registry if registry is not None else MemoryStateRegistry(self.clock)
        )
        self._context_tokens = self.registry.map("weixin-context-tokens", policy="lru")
        self.typing = WeixinTyping(
            self.api,
            submit=lambda key, fn: self.lanes.post(("weixin-typing", key), fn),
            clock=self.clock,
            ticket_ttl_s=config.ticket_ttl_s,
            context_token=self._context_tokens.get,
        )
        #: chat -> (session id, request id) of the prompts that paused its typing
        self._waits: dict[str, set[tuple[str, str]]] = {}
        self._waits_lock = threading.Lock()
        #: the final answer's retries (``sendmessage`` is the only path)
        self.delivery = DeliveryChain(self.scheduler, on_outcome=self.note_final_delivery)
        #: delivered / retried / failed / uncertain final answers
        self.delivery_health = self.delivery.health
        #: the getupdates runner (iLink's only ingress)
        #: the store shared by every instance of this bot (None: this process only)
        self.state_store = store
        #: outbound rate limits of every API call that writes (limits.py), shared
        #: through the store by every process of the bot
        self.outbound_pacer = attach_pacer(
            getattr(self.api, "client", None),
            "weixin",
            clock=self.clock,
            store=store,
        )
        #: runs in progress, recorded (in ``store``, else in ``config.run_journal``)
        #: before the getupdates cursor moves past their message, removed when they end
        self.run_journal = RunJournal(self.name, store=store, path=config.run_journal)
        self.polling = WeixinPolling(
            config,
            self.handle_weixin_message,
            clock=self.clock,
            store=store,
            on_start=self._recover_runs,
            on_unavailable=self._store_unavailable,
        )
        #: the long connections this channel owns (started by ``start_connections``)
        self.connections: list[LongConnection] = [self.polling]
        #: run_id -> what the agent wrote so far (sent with the stopped marker when a
        #: shutdown stops the run; Weixin shows nothing while a run writes)
        self._run_text: BoundedMap[str, str] = BoundedMap(MAX_TEXT_RUNS, clock=self.clock)

    # -- inbound -------------------------------------------------------------------------
    def ingress_routes(self) -> list[IngressRoute]:
        """None: iLink has no webhook, messages arrive through ``connections`` (the
        ``getupdates`` long poll). Lets a WSGI app mount this channel with the others."""
        return []

    def remember_context_token(self, user_id: str, context_token: str | None) -> None:
        """Record the latest ``context_token`` of ``user_id`` (replies need it)."""
        if context_token:
            self._context_tokens[user_id] = context_token

    def handle_weixin_message(self, message: Mapping[str, Any]) -> RunHandle | CommandHandle | None:
        """Handle one ``WeixinMessage`` from ``getupdates``; returns at once.

        Bot messages and messages without text or media are ignored (``None``); the
        media items become the message's attachments. So is ignored a message
        the channel refuses (closed, or busy: core tells the person), with the shared
        policy of `channelkit.platforms.common.inbound`.
        """
        try:
            sender, text, message_id, token = parse_weixin_message(message)
        except ValueError as exc:
            logger.debug("weixin message ignored: %s", exc)
            return None
        self.remember_context_token(sender, token)
        # the run starts (and a command answers) only once its record is written: a
        # process killed the moment its agent starts must leave the record behind
        deferred: list[Callable[[], None]] = []
        try:
            outcome, handle = hand_inbound(
                self,
                InboundMessage(
                    channel_name=self.name,
                    chat_id=sender,
                    sender_id=sender,
                    text=text,
                    message_id=message_id,
                    attachments=parse_media(message.get("item_list") or ()),
                ),
                defer=deferred,
            )
            if (
                outcome == "accepted"
                and message_id
                and isinstance(handle, RunHandle)  # not a command, not refused by access
                and self.run_journal.enabled
            ):
                record = {"chat": sender, "token": token, "at": self.clock.time()}
                self.run_journal.record(f"{sender}:{message_id}", record)
        finally:
            for work in deferred:
                work()
        return handle

    def _store_unavailable(self, message: Mapping[str, Any]) -> None:
        """A message the shared store could not vouch for (dropped, nothing runs): the
        first time its sender is met during the outage, ``MSG_STORE_UNAVAILABLE`` goes to
        them on the pool, through `send_message()` (with the message's context token; the
        rule of `unavailable_notice()`); the polling thread never waits on it."""
        try:
            sender, _, _, token = parse_weixin_message(message)
        except ValueError:
            return  # not a person's message: nobody to tell
        self.remember_context_token(sender, token)  # a reply needs the latest one
        tell = unavailable_notice(
            self.state_store,
            channel=self.name,
            person=sender,
            messages=self.messages_for(sender),
            send=partial(self.send_message, sender),
            post=self.pool.post,
        )
        if tell is not None:
            tell()

    def _recover_runs(self) -> None:
        """Polling starts: tell the person of every run the previous process recorded
        and never ended (it was killed) that it was interrupted (on the pool)."""
        for record in self.run_journal.take_leftovers():
            chat, token = record.get("chat"), record.get("token")
            if not isinstance(chat, str) or not chat:
                continue
            if isinstance(token, str) and token:
                self.remember_context_token(chat, token)
            logger.warning("[%s] a run of %s was interrupted by a restart", self.name, chat)
            self.pool.post(self._tell_quietly, chat, self.messages_for().text(TEXT_INTERRUPTED))

    def _tell_quietly(self, chat_id: str, text: str) -> None:
        try:
            self.send_message(chat_id, text)
        except Exception as exc:
            logger.warning("weixin notice not sent: %s", type(exc).__name__)

    # -- files ---------------------------------------------------------------------------
    def attachment_source(self, attachment: Attachment) -> AttachmentSource:
        """The CDN download of the media (``<cdn>/download?encrypted_query_param=...``,
        on `WeixinConfig.cdn_base_url` only, no redirect), decrypted with the message's
        AES key while it streams (`channelkit.platforms.weixin.files`)."""
        return media_source(attachment, self.weixin_config.cdn_base_url)

    def upload_file(
        self,
        target: SessionTarget,
        file: OutboundSource,
        *,
        image: bool = False,
        caption: str | None = None,
    ) -> str:
        """The agent's file: ``getuploadurl``, the bytes encrypted (AES-128-ECB) and
        POSTed to the CDN, then ``sendmessage`` with an ``image_item`` (an image asked
        for with ``send_image``) or a ``file_item``; the caption follows as text. Returns
        the message's ``client_id`` (`channelkit.platforms.weixin.files.upload`)."""
        chat = target.chat_id
        return upload(
            self.api,
            file,
            to_user_id=chat,
            context_token=self._context_tokens.get(chat),
            cdn_base_url=self.weixin_config.cdn_base_url,
            image=image,
            caption=caption,
        )

    # -- hooks ---------------------------------------------------------------------------
    def send_message(self, chat_id: str, text: str, *, thread_id: str | None = None) -> None:
        """Plain text via ``sendmessage`` (Markdown rendered as plain text, split at block
        boundaries within 4,000 chars, `plain_parts()`)."""
        token = self._context_tokens.get(chat_id)
        for part in plain_parts(text):
            self.api.send_text(chat_id, part, token)

    def on_response_complete(
        self,
        chat_id: str,
        text: str,
        session_id: str,
        segment: OutputSegmentContext | None = None,
    ) -> None:
        """The final answer, rendered and split like `send_message()`, through the
        delivery chain; only a definite refusal raises (the run fails in delivery).

        ``sendmessage`` carries a fresh ``client_id`` per call, which iLink does not
        document as a de-duplication key: a read timeout after sending is not retried.
        """

        def send(part: str) -> None:
            self.api.send_text(chat_id, part, self._context_tokens.get(chat_id))

        parts = [(DeliveryPath("sendmessage", partial(send, part)),) for part in plain_parts(text)]
        if segment is not None:
            target = DeliveryTarget(self.name, chat_id, segment.run_id, segment.owner.id)
        else:
            target = DeliveryTarget(self.name, chat_id, self.active_run_id(session_id))
        self.delivery.deliver(parts, target).raise_if_refused()

    def on_response_chunk(
        self,
        chat_id: str,
        chunk: str,
        session_id: str,
        segment: OutputSegmentContext | None = None,
    ) -> None:
        """Keep the run's visible text (bounded) for a shutdown's stopped notice."""
        if segment is not None and chunk:
            text = self._run_text.get(segment.run_id) or ""
            self._run_text[segment.run_id] = bound_text(text + chunk)

    def on_output_segment_end(
        self,
        chat_id: str,
        session_id: str,
        segment: OutputSegmentContext,
        reason: SegmentEndReason,
    ) -> None:
        """A run cancelled by the channel closing (SIGTERM) sends what the agent wrote so
        far with `STOPPED_MARKER`; other ends as `ChannelBase` does."""
        if reason in (SegmentEndReason.RESPONSE_BOUNDARY, SegmentEndReason.INPUT_REQUESTED):
            # the core sent this text before the question (text_only_output): a stopped
            # notice later carries only what was written after it
            self._run_text.pop(segment.run_id)
        if reason is SegmentEndReason.CANCELLED and self.closed:
            text = (self._run_text.pop(segment.run_id) or "").strip()
            if text:
                try:
                    stopped = self.messages_for().text(STOPPED_MARKER)
                    self.send_message(chat_id, f"{text}\n\n{stopped}")
                except Exception as exc:
                    logger.warning("weixin stopped notice not sent: %s", type(exc).__name__)
        super().on_output_segment_end(chat_id, session_id, segment, reason)

    def on_task_lifecycle(self, event: LifecycleEvent) -> None:
        """started -> typing on; terminal -> typing off; ``failed`` of a person's run
        also sends `TEXT_FAILED`; other events ignored."""
        if LifecycleType(event.type).terminal:
            self._run_text.pop(event.run_id)
            if event.message_id and event.owner is not None:
                self.run_journal.done(f"{event.chat_id}:{event.message_id}")
        if event.type is LifecycleType.FAILED and event.owner is not None:
            try:
                self.send_message(
                    event.chat_id, self.messages_for(event.owner.id).text(TEXT_FAILED)
                )
            except Exception as exc:
                logger.warning("weixin failure notice not sent: %s", type(exc).__name__)
        if not self.weixin_config.typing:
            return
        if event.type is LifecycleType.STARTED:
            self.typing.start(event.chat_id)
        elif LifecycleType(event.type).terminal:
            with self._waits_lock:
                self._waits.pop(event.chat_id, None)
            self.typing.stop(event.chat_id)

    def format_permission_request(self, request: PermissionRequest) -> str:
        """The core's text prompt; typing is off until the request is answered."""
        target = self.target_for_session(request.session_id)
        if target is not None and self.weixin_config.typing:
            chat = target.chat_id
            with self._waits_lock:
                first = chat not in self._waits
                if first and len(self._waits) >= WeixinTyping.MAX_USERS:
                    return super().format_permission_request(request)
                self._waits.setdefault(chat, set()).add((request.session_id, request.request_id))
            if first:
                self.typing.stop(chat)
                self.scheduler.call_later(WAIT_POLL_S, self._check_waits, chat)
        return super().format_permission_request(request)

    def _check_waits(self, chat: str) -> None:
        """Typing on again once no prompt of ``chat`` is pending (and its run goes on)."""
        with self._waits_lock:
            waits = self._waits.get(chat)
            if waits is None:
                return
            live = {w for w in waits if w[1] in self.pending_request_ids(w[0])}
            if live:
                self._waits[chat] = live
            else:
                del self._waits[chat]
        if live:
            self.scheduler.call_later(WAIT_POLL_S, self._check_waits, chat)
        elif any(self.active_run_id(session_id) is not None for session_id, _ in waits):
            self.typing.start(chat)

    def on_close(self) -> None:
        """Forget typing state (runs were already cancelled by ``close``); pending
        final-answer retries are reported failed; polling stops."""
        stop_connections(self.connections, CONNECTION_STOP_S)
        flush_run_lanes(self.lanes, self._run_text.keys(), self.name)
        self.typing.close()
        self.delivery.close()

"""`DiscordChannel`: the Gateway, streamed messages with a Stop button, component
questions and approval buttons.

Inbound. Messages always come over the Gateway (`DiscordGateway`, listed in
`connections`, started with `start_connections()`): `MESSAGE_CREATE` of a person
(bots, webhooks and system messages are ignored). In a DM every message is for the bot;
in a guild channel a message is addressed to the bot when it mentions the bot (the
mention is removed from the text) or replies to one of its messages; the core's access
policy answers only those by default (`access.requireMention`, per channel
`access.groupRules`). A message id is handled once (a Gateway resume never repeats a message). A
Discord thread is a channel of its own whose parent is a guild channel: its messages
carry the thread's id as both `chat_id` and `thread_id`, so each thread is its own
session (threads are learned from `GUILD_CREATE`, `THREAD_CREATE`, `THREAD_UPDATE`,
`THREAD_LIST_SYNC` and from interactions, which name their channel's type).

Component clicks (`INTERACTION_CREATE` type 3, modal submits type 5) come over the
Gateway with `ingress="gateway"`, or to the HTTP interactions endpoint
(`ingress_routes()`: `POST /discord/interactions`, Ed25519-verified, one use, PING
answered) with `ingress="interactions"`. Either way the interaction is decided on the
receiving thread without any network call (`action_router`: questions, approvals,
Stop, presentation buttons) into a `Decision` whose body is the interaction response:
a deferred update (type 6) for a click that changes something (the message is edited
afterwards), an ephemeral notice (type 4, flags 64) for a click by someone who may not
press it, a modal (type 9) for a question's "Other" answer. Over HTTP that body is the
answer, within Discord's 3 seconds; over the Gateway the channel sends it to the
interaction callback first thing on the pool, then runs the decision's work.

Output (`channelkit.platforms.discord.output`): one message per visible output
segment, edited as text comes (coalesced, at most one edit per `edit_interval_s` and
within the REST bucket), with a Stop button only the run's owner can use (it cancels
exactly that run; anyone else gets an ephemeral notice). A typing indicator runs while a
run works (`POST /channels/{id}/typing` every `typing_interval_s`, on the scheduler),
paused while the run waits for the person. The final answer ends the live segment; text
no message showed is posted through the delivery chain.

Questions (`questions`) are one message of components per request; tool permissions
(`approvals`) one button per agent option. Both are owner-only, one-shot, and updated
in place to their end state.

Language: every text the channel shows a person (notices, the Stop button, the Stopped /
Failed marks, forms, refusals) comes from the message catalog (`channelkit.core.catalog`)
in the channel's `locale`. An interaction carries the clicking person's Discord client
language (`locale`, e.g. `zh-CN`, `de`, `en-US`): the answer to that click is in it, and
it is remembered for that person (`locales`: bounded, locked) for the messages, forms
and notices they read later.

Presentations (`presentation_sender()`): the existing renderer's components v2 messages
through `DiscordSender` (`pin_message` pins). A click on a presentation's value (or
command) button, or a choice in its select, reaches the channel as the clicking
person's message in that channel.
"""

from __future__ import annotations

import logging
import threading
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
    SessionTarget,
    UserInputPresentationResult,
    UserInputRequestContext,
)
from channelkit.core.approvals import PermissionRequestContext
from channelkit.core.catalog import en
from channelkit.core.inbound_files import AttachmentSource
from channelkit.core.queue_notices import QueueNotices
from channelkit.core.types import CancellationReason, RunQueuedEvent
from channelkit.errors import ConfigurationError
from channelkit.ingress import IngressResponse, IngressRoute
from channelkit.platforms import platform_offers
from channelkit.platforms.common.cluster import ClusterOptions
from channelkit.platforms.common.connection import LongConnection
from channelkit.platforms.common.contract import Decision, Interaction
from channelkit.platforms.common.delivery import DeliveryChain, DeliveryPath, DeliveryTarget
from channelkit.platforms.common.limits import attach_pacer
from channelkit.platforms.common.router import InteractionRouter, decide_inbound
from channelkit.platforms.common.run_journal import TEXT_INTERRUPTED, channel_journal
from channelkit.platforms.common.shared_dedup import SharedDedup
from channelkit.platforms.common.shutdown import flush_run_lanes
from channelkit.platforms.common.store_watch import unavailable_notice
from channelkit.platforms.discord.api import DiscordApi
from channelkit.platforms.discord.approvals import DiscordApprovals
from channelkit.platforms.discord.config import DiscordConfig
from channelkit.platforms.discord.files import file_hosts, file_source
from channelkit.platforms.discord.gateway import DiscordGateway
from channelkit.platforms.discord.indicators import TypingIndicator
from channelkit.platforms.discord.ingress import (
    THREAD_TYPES,
    ComponentClick,
    DiscordInteractions,
    DiscordVerifier,
    clicker_texts,
    deferred_update,
    ephemeral,
    parse_component,
    parse_message,
)
from channelkit.platforms.discord.output import STOP_PREFIX, SegmentMessages, message_parts
from channelkit.platforms.discord.questions import DiscordQuestions
from channelkit.platforms.discord.renderer import decode_custom_id
from channelkit.presentation.text import split_text
from channelkit.runtime import BoundedMap, Clock, Scheduler, WorkerPool

if TYPE_CHECKING:
    from channelkit.attachments.outbound import OutboundSource
    from channelkit.state.base import StateStore

__all__ = [
    "GATEWAY_EVENTS",
    "INTERACTIONS_PATH",
    "MESSAGE_DEDUP_TTL",
    "TEXT_FAILED",
    "TEXT_NOT_YOUR_RUN",
    "DiscordChannel",
]

logger = logging.getLogger(__name__)

INTERACTIONS_PATH = "/discord/interactions"
#: The Gateway dispatches the channel reads.
GATEWAY_EVENTS = frozenset(
    {
        "READY",
        "MESSAGE_CREATE",
        "INTERACTION_CREATE",
        "GUILD_CREATE",
        "THREAD_CREATE",
        "THREAD_UPDATE",
        "THREAD_DELETE",
        "THREAD_LIST_SYNC",
    }
)
#: Seconds a handled message id is remembered (a resumed Gateway never repeats one).
MESSAGE_DEDUP_TTL = 3600.0
#: Told (in the presser's language) to anyone but the owner who presses a Stop button.
TEXT_NOT_YOUR_RUN = en("owner.stop")
#: The one message telling that a person's run failed where no failed segment shows it
#: (in the owner's language).
TEXT_FAILED = en("notice.failed")
#: Threads remembered (channel id -> parent id; least recently used dropped first: a
#: forgotten thread is still its own chat, only its `thread_id` is not set).
MAX_THREADS = 1_000
#: Discord's epoch (2015-01-01) in milliseconds: a snowflake's top bits count from it.
DISCORD_EPOCH_MS = 1_420_070_400_000


def snowflake_time(snowflake: str) -> float | None:
    """When a snowflake id was made (epoch seconds), or None for a non-snowflake."""
    if not snowflake.isdigit():
        return None
    return ((int(snowflake) >> 22) + DISCORD_EPOCH_MS) / 1000.0


class DiscordChannel(ChannelBase):
    """A `ChannelBase` for Discord bots; see the module docstring.

    `DiscordChannel(config, bridge, *, channel_config=None, api=None, executor=None,
    run_executor=None, scheduler=None, clock=None, gateway_options=None, store=None)`:
    `config` is the `DiscordConfig`; `api` replaces the REST wrapper (tests, shared
    clients); `gateway_options` go to the `DiscordGateway` (`backoff`, `wait`,
    `jitter`, `open_timeout`...); `store` is the `StateStore` every instance serving
    this bot shares (`state.redis`): a message id is then handled by one instance only.

    Feeding it without a socket (tests, emulators): `dispatch(name, data)` takes one
    Gateway dispatch (what the connection hands on), `ingress_routes()` holds the
    interactions endpoint's route.

    `cluster_options` (`instanceName`, `leaseRenewS`, `leaseExpiryS`: the `state`
    section's lease settings, which `channelkit serve` passes with `state.redis`) time
    the lease the run journal keeps in `store`: a process that starts tells the people of
    the runs dead instances left, never those of runs another live instance is running
    (`channelkit.platforms.common.run_journal`).
    """

    def __init__(
        self,
        config: DiscordConfig,
        bridge: AgentBridge,
        *,
        channel_config: ChannelConfig | None = None,
        api: DiscordApi | None = None,
        executor: WorkerPool | None = None,
        run_executor: WorkerPool | None = None,
        scheduler: Scheduler | None = None,
        clock: Clock | None = None,
        gateway_options: Mapping[str, Any] | None = None,
        store: StateStore | None = None,
        cluster_options: ClusterOptions | Mapping[str, Any] | None = None,
    ) -> None:
        if not isinstance(config, DiscordConfig):
            raise ConfigurationError("must be a DiscordConfig", path="config")
        if channel_config is None:
            channel_config = ChannelConfig(name=config.channel_name)
        super().__init__(
            channel_config,
            bridge,
            executor=executor,
            scheduler=scheduler,
            clock=clock,
            run_executor=run_executor,
            threads=platform_offers("discord", "threads"),  # groups: a session per thread
        )
        self.discord_config = config
        #: the REST wrapper is closed with the channel only when the channel made it
        self._owns_api = api is None
        self.api: DiscordApi = api or DiscordApi(
            config.bot_token,
            config.application_id,
            scheduler=self.scheduler,
            base_url=config.api_base_url,
            timeout_s=config.request_timeout_s,
        )
        self._bot_lock = threading.Lock()
        self._bot_id = config.application_id
        #: the store shared by every instance of this bot (None: this process only)
        self.state_store = store
        #: the people's runs in progress (in ``store``, else in ``config.run_journal``):
        #: a run a crash cut off is told at the next start (`recover_interrupted_runs`)
        self.run_journal = channel_journal(
            self.name,
            store=store,
            path=config.run_journal,
            scheduler=self.scheduler,
            lease=cluster_options,
        )
        #: outbound rate limits of every API call that writes (limits.py), shared
        #: through the store by every process of the bot
        self.outbound_pacer = attach_pacer(
            getattr(self.api, "client", None),
            "discord",
            clock=self.clock,
            store=store,
        )
        #: message ids already handled (here or, with `store`, on any instance)
        self._seen = SharedDedup(
            self.clock.time, ttl=MESSAGE_DEDUP_TTL, scope="discord-message", store=store
        )
        #: thread channel id -> parent channel id
        self._threads: BoundedMap[str, str] = BoundedMap(MAX_THREADS, policy="lru")
        self.output = SegmentMessages(
            self.api,
            clock=self.clock,
            scheduler=self.scheduler,
            submit=self.lanes.post,
            edit_interval=config.edit_interval_s,
            on_unseen=self._post_unseen,
        )
        self.typing = TypingIndicator(
            self._send_typing,
            scheduler=self.scheduler,
            submit=self.pool.post,
            interval_s=config.typing_interval_s,
        )
        self.questions = DiscordQuestions(
            self.api,
            submit=lambda key, fn: self.lanes.post(("discord-question", key), fn),
            scheduler=self.scheduler,
            clock=self.clock,
            timeout_s=min(config.question_timeout_s, channel_config.permission_timeout),
        )
        self.approvals = DiscordApprovals(
            self.api,
            submit=lambda key, fn: self.lanes.post(("discord-approval", key), fn),
            clock=self.clock,
            prompt=lambda context: self.format_permission_request(context.request),
        )
        # every text a person reads is in their language (`messages_for`): the one their
        # last interaction's `locale` told, else the channel's `locale`
        self.output.texts_for = self.questions.texts_for = self.messages_for
        self.approvals.texts_for = self.messages_for
        #: queue notices edited in place as the run moves up (one message each)
        self.queue_notices: QueueNotices[tuple[str, str]] = QueueNotices(
            self, show=self._show_queue_notice, edit=self._edit_queue_notice
        )
        self.delivery = DeliveryChain(self.scheduler, on_outcome=self.note_final_delivery)
        self.delivery_health = self.delivery.health
        #: runs whose failure a failed segment shows: no TEXT_FAILED for them
        self._failure_shown: BoundedMap[str, bool] = BoundedMap(clock=self.clock)
        #: component clicks and modal submits, in order: questions, approval buttons,
        #: Stop, presentation buttons (anything else: a deferred update, nothing changes)
        self.action_router = InteractionRouter(
            (
                self._question_action,
                self._approval_pressed,
                self._stop_pressed,
                self._presentation_pressed,
            ),
            fallback=Decision.ignored(deferred_update()),
            on_error=Decision.ignored(deferred_update()),
            name=f"{self.name} component",
        )
        events = set(GATEWAY_EVENTS)
        if config.ingress != "gateway":
            events.discard("INTERACTION_CREATE")
        self.gateway = DiscordGateway(
            config.bot_token,
            self.dispatch,
            scheduler=self.scheduler,
            url=config.gateway_url,
            events=frozenset(events),
            name=f"{config.channel_name}-gateway",
            **dict(gateway_options or {}),
        )

    @property
    def connections(self) -> tuple[LongConnection, ...]:
        """The long connections this channel owns: the Gateway."""
        return (self.gateway,)

    @property
    def bot_id(self) -> str:
        """The bot user's id (the application id until `READY` names the bot user)."""
        with self._bot_lock:
            return self._bot_id

    # -- ingress --------------------------------------------------------------------------
    def ingress_routes(self) -> list[IngressRoute]:
        """`POST /discord/interactions` with `ingress="interactions"`, else none."""
        key = self.discord_config.public_key
        if self.discord_config.ingress != "interactions" or key is None:
            return []
        handler = DiscordInteractions(DiscordVerifier(key, self.clock.time), self._on_http)
        return [IngressRoute(INTERACTIONS_PATH, handler, ("POST",), "discord-interactions")]

    def dispatch(self, name: str, data: Mapping[str, Any]) -> None:
        """One Gateway dispatch (on the connection's thread: no network here)."""
        if name == "MESSAGE_CREATE":
            self._on_message(data)
        elif name == "INTERACTION_CREATE":
            self._on_gateway_interaction(data)
        elif name == "READY":
            user = data.get("user")
            user_id = user.get("id") if isinstance(user, Mapping) else None
            if isinstance(user_id, str) and user_id:
                with self._bot_lock:
                    self._bot_id = user_id
        else:
            self._learn_threads(name, data)

    def _learn_threads(self, name: str, data: Mapping[str, Any]) -> None:
        if name in ("THREAD_CREATE", "THREAD_UPDATE"):
            self._remember_thread(data)
        elif name == "THREAD_DELETE":
            thread_id = data.get("id")
            if isinstance(thread_id, str):
                self._threads.pop(thread_id)
        elif name in ("GUILD_CREATE", "THREAD_LIST_SYNC"):
            for thread in data.get("threads") or ():
                if isinstance(thread, Mapping):
                    self._remember_thread(thread)

    def _remember_thread(self, channel: Mapping[str, Any]) -> None:
        thread_id, parent = channel.get("id"), channel.get("parent_id")
        if channel.get("type") in THREAD_TYPES and isinstance(thread_id, str):
            self._threads[thread_id] = parent if isinstance(parent, str) else ""

    def is_thread(self, channel_id: str) -> bool:
        """True for a channel known to be a thread."""
        return channel_id in self._threads

    def _on_message(self, data: Mapping[str, Any]) -> Decision:
        message = parse_message(data, self.bot_id)
        if message is None:
            return Decision.ignored()
        dm = message.guild_id is None
        # the id's own time: a redelivery carries it, so an id the bounded memory let go
        # is refused as stale rather than taken for new (unless no clock compares to it)
        sent_at = snowflake_time(message.message_id)
        if sent_at is not None and abs(sent_at - self.clock.time()) > MESSAGE_DEDUP_TTL:
            sent_at = None  # a clock that is not Discord's (tests): remembered from now
        claim = self._seen.claim(message.message_id, sent_at, sent_at=sent_at)
        if claim == "unavailable":  # the shared store is down: tell the person once
            return self._store_unavailable(message.channel_id, message.author_id)
        if claim != "first":
            logger.info("discord message already handled; ignored")
            return Decision.ignored()
        thread = message.channel_id if self.is_thread(message.channel_id) else None
        msg = InboundMessage(
            channel_name=self.name,
            chat_id=message.channel_id,
            sender_id=message.author_id,
            text=message.text,
            message_id=message.message_id,
            thread_id=thread,
            is_group=not dm,
            sender_name=message.author_name,
            mentions_bot=None if dm else message.mention,
            attachments=message.attachments,
        )
        decision = decide_inbound(self, msg)[1]
        if decision.status != 200:
            self._seen.forget(message.message_id)
        decision.run_after()  # quick hand-offs: the run starts on its own pool
        return decision

    def attachment_source(self, attachment: Attachment) -> AttachmentSource:
        """An attachment's signed CDN ``url``, fetched without credentials and only from
        Discord's CDN hosts (`channelkit.platforms.discord.files`)."""
        return file_source(attachment, file_hosts(self.discord_config.api_base_url))

    def _store_unavailable(self, channel: str, user: str) -> Decision:
        """A message the shared store could not vouch for: nothing runs; the first time
        its sender is met during the outage, `MSG_STORE_UNAVAILABLE` goes to the channel
        (on the pool; the rule of `unavailable_notice()`)."""
        tell = unavailable_notice(
            self.state_store,
            channel=self.name,
            person=user,
            messages=self.messages_for(user),
            send=partial(self.api.post, channel),
            post=self.pool.post,
        )
        if tell is not None:
            tell()  # a Gateway dispatch has no ACK to wait for
        return Decision.ignored()

    def decide_interaction(self, payload: Mapping[str, Any]) -> Decision:
        """Decide a component click or modal submit (no network): its body is the
        interaction response, its work runs after that response was sent."""
        click = parse_component(payload)
        if click is None:
            return Decision.ignored(deferred_update())
        if click.locale is not None:  # the person's language, for what they read later
            self.locales.note(click.user_id, click.locale)
        if click.channel_id is not None and click.channel_type in THREAD_TYPES:
            self._threads[click.channel_id] = click.parent_id or ""
        interaction = Interaction(
            kind="form_submit" if click.is_modal else "button",
            platform="discord",
            actor_id=click.user_id,
            chat_id=click.channel_id,
            thread_id=click.channel_id if click.channel_type in THREAD_TYPES else None,
            token=click.custom_id,
            value=click.values[0] if click.values else None,
            form=dict(click.fields),
            raw=click,
        )
        decision = self.action_router.route(interaction)
        if decision.body is None:
            decision = decision.with_body(deferred_update())
        return decision

    def _on_http(self, payload: Mapping[str, Any]) -> IngressResponse:
        """A verified interaction POSTed to the endpoint: the response body is the ACK."""
        return self.decide_interaction(payload).to_response()

    def _on_gateway_interaction(self, payload: Mapping[str, Any]) -> None:
        """An interaction over the Gateway: the response goes to the callback first
        (on the pool), then the decision's work."""
        decision = self.decide_interaction(payload)
        interaction_id, token = payload.get("id"), payload.get("token")
        if not isinstance(interaction_id, str) or not isinstance(token, str):
            return
        body = decision.body

        def answer() -> None:
            try:
                self.api.respond(interaction_id, token, body)
            except Exception as exc:
                logger.warning("discord interaction response failed: %s", type(exc).__name__)
            decision.run_after()

        self.pool.post(answer)

    # -- interaction handlers (receiving thread: correlate, authorize, claim) -------------
    def _question_action(self, interaction: Interaction) -> Decision | None:
        click: ComponentClick = interaction.raw
        return self.questions.decide(click)

    def _approval_pressed(self, interaction: Interaction) -> Decision | None:
        click: ComponentClick = interaction.raw
        return self.approvals.decide(click)

    def _stop_pressed(self, interaction: Interaction) -> Decision | None:
        """A Stop button: the owner cancels exactly the segment's run (once); anyone else
        gets an ephemeral notice."""
        custom_id = interaction.token or ""
        if not custom_id.startswith(STOP_PREFIX):
            return None
        live = self.output.by_token(custom_id[len(STOP_PREFIX) :])
        if live is None:
            return Decision.ignored(deferred_update())
        verdict = self.output.claim_stop(live, interaction.actor_id or "")
        if verdict == "foreign":  # told in the presser's language
            refusal = clicker_texts(interaction.raw, self.messages_for).text(TEXT_NOT_YOUR_RUN)
            return Decision.ack(ephemeral(refusal), outcome="forbidden")
        if verdict != "owner":
            return Decision.ignored(deferred_update())
        segment = live.segment
        return Decision.ack(deferred_update()).then(
            lambda: self.pool.post(
                self.cancel_run,
                segment.session_id,
                segment.run_id,
                CancellationReason.CANCEL_COMMAND,
            )
        )

    def _presentation_pressed(self, interaction: Interaction) -> Decision | None:
        """A presentation's value or command button, or a choice in its select: its value
        reaches the channel as the clicking person's message in that channel."""
        custom_id = interaction.token or ""
        if custom_id.startswith("ck:select:"):
            decoded = decode_custom_id(interaction.value or "")
        else:
            decoded = decode_custom_id(custom_id)
        if decoded is None:
            return None
        text = decoded[1]
        click: ComponentClick = interaction.raw
        if not text.strip() or click.channel_id is None:
            return Decision.ignored(deferred_update())
        msg = InboundMessage(
            channel_name=self.name,
            chat_id=click.channel_id,
            sender_id=click.user_id,
            text=text,
            thread_id=interaction.thread_id,
            is_group=click.guild_id is not None,
            sender_name=click.user_name,
        )
        return decide_inbound(self, msg)[1].with_body(deferred_update(), status=200)

    # -- hooks ----------------------------------------------------------------------------
    def presentation_sender(self, target: SessionTarget, *, silent: bool = False) -> Any:
        """Presentations as components v2 messages in the target's channel
        (`channelkit.platforms.discord.sender`); `pin_message` pins them."""
        from channelkit.platforms.discord.sender import DiscordSender

        return DiscordSender(self.api.client)

    def upload_file(
        self,
        target: SessionTarget,
        file: OutboundSource,
        *,
        image: bool = False,
        caption: str | None = None,
    ) -> str:
        """The agent's file as a message with one attachment (`files`)."""
        from channelkit.platforms.discord.files import upload

        return upload(self.api, target, file, image=image, caption=caption)

    def send_message(self, chat_id: str, text: str, *, thread_id: str | None = None) -> None:
        """Plain text (Discord Markdown), split at 2,000 characters."""
        for part in message_parts(text, final=True) or split_text(text or " ", 2000):
            self.api.post(thread_id or chat_id, part)

    def on_response_chunk(
        self,
        chat_id: str,
        chunk: str,
        session_id: str,
        segment: OutputSegmentContext | None = None,
    ) -> None:
        """Stream the segment's visible text into its message."""
        if segment is not None:
            self.output.append(segment, chunk)

    def on_output_segment_end(
        self,
        chat_id: str,
        session_id: str,
        segment: OutputSegmentContext,
        reason: SegmentEndReason,
    ) -> None:
        """Close the segment's message: all its text, "Stopped." after a cancelled one,
        "Failed." after a failed one (the run then needs no `TEXT_FAILED`)."""
        if str(reason) == "failed" and self.output.get(segment.segment_id) is not None:
            self._failure_shown[segment.run_id] = True
        self.output.close_segment(segment, str(reason))
        super().on_output_segment_end(chat_id, session_id, segment, reason)

    def _post_unseen(self, segment: OutputSegmentContext, parts: list[str], state: str) -> None:
        """Message contents a closed segment's message could not show: posted in order
        through the delivery chain."""
        chat_id = segment.target.chat_id
        target = DeliveryTarget(self.name, chat_id, segment.run_id, segment.owner.id)
        self.delivery.deliver(self._paths(chat_id, parts), target)

    def _paths(self, chat_id: str, parts: list[str]) -> list[list[DeliveryPath]]:
        def path(part: str) -> list[DeliveryPath]:
            return [DeliveryPath("post", lambda: self.api.post(chat_id, part))]

        return [path(part) for part in parts]

    def on_response_complete(
        self,
        chat_id: str,
        text: str,
        session_id: str,
        segment: OutputSegmentContext | None = None,
    ) -> None:
        """End the live segment with the rest of the answer; post what no message showed
        through the delivery chain (a definite refusal fails the run)."""
        if segment is None:  # loop / webhook runs have no segments: the whole text
            parts, owner = message_parts(text, final=True), None
            run_id = self.active_run_id(session_id)
        else:
            parts = self.output.finish_run(segment, text)
            run_id, owner = segment.run_id, segment.owner.id
        if not parts:
            return
        target = DeliveryTarget(self.name, chat_id, run_id, owner)
        self.delivery.deliver(self._paths(chat_id, parts), target).raise_if_refused()

    def recover_interrupted_runs(self) -> None:
        """Tell each person whose run the previous process left unfinished (killed mid-run)
        `TEXT_INTERRUPTED` in the run's channel or thread, once (on the pool; the service
        calls this when it starts)."""
        self.run_journal.tell_leftovers(
            lambda chat, _thread, _record: self.pool.post(
                self._post_quietly, chat, self.messages_for().text(TEXT_INTERRUPTED)
            )
        )

    def on_task_lifecycle(self, event: LifecycleEvent) -> None:
        """started -> typing; terminal -> typing stops, leftover segments close; a
        person's failed run that no failed segment shows gets `TEXT_FAILED`. A person's
        run is recorded from its start to its end (`run_journal`)."""
        self.run_journal.follow(event)
        if event.type is LifecycleType.STARTED:
            self.queue_notices.started(event.run_id)
            if event.owner is not None:
                self.typing.start(event.chat_id, event.run_id)
        elif event.type in (LifecycleType.TEXT_CHUNK, LifecycleType.TOOL_CALL):
            self.typing.resume_all(event.chat_id)  # the agent goes on: nobody is waited on
        elif LifecycleType(event.type).terminal:
            self.queue_notices.forget(event.run_id)
            self.typing.stop(event.chat_id, event.run_id)
            self.output.discard_run(event.run_id)
            shown = self._failure_shown.pop(event.run_id)
            if event.type is LifecycleType.FAILED and event.owner is not None and not shown:
                failed = self.messages_for(event.owner.id).text(TEXT_FAILED)
                self._post_quietly(event.chat_id, failed)

    def on_run_queued(self, event: RunQueuedEvent) -> None:
        """The queue notice is one message, edited (`PATCH`) as the run moves up, at most
        once a second, and to "Starting now." when it starts."""
        self.queue_notices.queued(event)

    def _show_queue_notice(self, event: RunQueuedEvent, text: str) -> tuple[str, str]:
        channel = event.thread_id or event.chat_id
        return channel, self.api.post(channel, text)

    def _edit_queue_notice(self, notice: tuple[str, str], text: str, final: bool) -> None:
        self.api.edit(notice[0], notice[1], text)

    def _post_quietly(self, channel: str, text: str) -> None:
        try:
            self.api.post(channel, text)
        except Exception as exc:
            logger.warning("discord message failed: %s", type(exc).__name__)

    def _send_typing(self, channel: str) -> None:
        self.api.typing(channel)

    def _wait_for_person(self, session_id: str, request_id: str, context: Any) -> None:
        """Typing pauses while the request waits for the person."""
        target = self.target_for_session(session_id)
        if target is None:
            return
        key = f"{session_id}\0{request_id}"
        self.typing.pause(target.chat_id, key)
        context.on_settled(lambda _reason: self.typing.resume(target.chat_id, key))

    def present_user_input_request(
        self, context: UserInputRequestContext
    ) -> UserInputPresentationResult:
        """A components message bound to this request (UNSUPPORTED when disabled, for a
        second live question of the run, or when posting it fails)."""
        if not self.discord_config.native_questions:
            return UserInputPresentationResult.UNSUPPORTED
        self._wait_for_person(context.session_id, str(context.request_id), context)
        return UserInputPresentationResult(self.questions.present(context))

    def present_permission_request(
        self, context: PermissionRequestContext
    ) -> UserInputPresentationResult:
        """The permission prompt with one button per agent option, owner-only
        (`channelkit.platforms.discord.approvals`); UNSUPPORTED (text prompt) when
        `native_questions` is off or posting fails."""
        if not self.discord_config.native_questions:
            return UserInputPresentationResult.UNSUPPORTED
        return UserInputPresentationResult(self.approvals.present(context))

    def format_permission_request(self, request: PermissionRequest) -> str:
        """The core's text prompt; typing pauses until the request is answered."""
        target = self.target_for_session(request.session_id)
        if target is not None:
            key = f"{request.session_id}\0{request.request_id}"
            self.typing.pause(target.chat_id, key)
        return super().format_permission_request(request)

    def on_close(self) -> None:
        """Stop the Gateway and the typing; let the cancelled runs close their segments;
        expire live questions; fail the REST requests still waiting (when the channel
        made its `DiscordApi`; a given one is its owner's to close)."""
        self.gateway.stop(timeout=5.0)
        flush_run_lanes(self.lanes, self.output.run_ids(), self.name)
        self.typing.close()
        self.questions.close()
        self.output.close()
        self.run_journal.close()  # the lease given up: nothing of this process is left
        self.queue_notices.close()
        self.delivery.close()
        if self._owns_api:
            self.api.close()

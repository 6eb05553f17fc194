"""``SlackChannel``: the Events API, streamed output, Stop buttons and native forms.

Inbound (`channelkit.platforms.slack.ingress`): mount
`SlackChannel.ingress_routes()` (``POST /slack/events`` for the Events API and
``POST /slack/interactivity`` for interactivity; both verified with the signing secret,
signatures one-use, the five-minute window). The ACK is answered first; every network
call happens in the response's ``after``. Retried deliveries (``X-Slack-Retry-Num``)
carry the same ``event_id`` and are handled once: with a shared store (``store``, what
``state.redis`` gives), once across every instance of the bot; while that store is down
an event starts nothing and its person is told once that the bot is temporarily
unavailable (`channelkit.platforms.common.store_watch`). Clicks (Stop, forms, approval
and presentation buttons) are settled in this process's memory and need no store. The
outbound rate-limit buckets live in the same store. A person's message becomes a run:
``message`` events in direct messages, ``app_mention`` events elsewhere (the mention
removed); bot messages and subtypes (edits, joins, bot posts) are ignored. A message in
a thread is in the thread's session; a top-level mention in a channel starts a thread
(the reply goes under it). With ``ingress="socket"`` there are no routes: the Socket
Mode connection `SlackChannel.socket` (`socket_mode`; listed in
``connections``, started with
`start_connections()`) ACKs each envelope
and hands its payload to the same handlers, minus the signature check.

Output (`channelkit.platforms.slack.output`): one streamed message per visible
output segment (``chat.startStream`` / ``appendStream`` / ``stopStream``, coalesced to
one call every 0.6 s at most, Slack's Tier 4 budget; the end paced like the rest),
falling back to ``chat.postMessage`` + ``chat.update`` when
streaming is refused. The live segment has a Stop button: the run's owner cancels
exactly that run; anyone else gets one ephemeral notice and nothing changes. The final
answer ends the live segment, and text no message showed is posted through the delivery
chain (`channelkit.platforms.common.delivery`).

A failed run is told once: a failed segment keeps its text (posted when no message showed
it yet) and reads "Failed." (its Stop message, or the same marker posted right after it);
a person's run that failed with no such segment (before any output) gets one
`TEXT_FAILED` message instead.

Questions (`channelkit.platforms.slack.questions`): a Block Kit form answered
through the request's one-shot ``respond``; at most one per session, owner and run (a
second question of the run gets the text prompt); updated in place to submitted /
cancelled / expired only from the responder's result (when another answer won, the
winner's state). Tool permissions (`channelkit.platforms.slack.approvals`): one button per
agent option, owner-only, one-shot, updated in place to the outcome.

Presentations (`SlackChannel.presentation_sender()`): Block Kit messages through
`SlackSender`, in the conversation's thread;
the message ``ts`` is the message id that ``pin_message`` / ``unpin_message`` /
``pinned_messages`` use (``pins.add`` / ``pins.remove`` / ``pins.list``). A click on a
presentation's value (or command) button, or a choice in its select, reaches the channel
as the clicking person's message in the message's conversation (a command runs as a
command); link buttons are links.

Clicks (``block_actions``, Events API and Socket Mode alike) go through one
`InteractionRouter`
(`SlackChannel.action_router`): question forms, approval buttons, Stop,
presentation buttons, in that order; anything else is acknowledged and ignored.

Lifecycle: in assistant threads (a thread in a direct message) ``started`` sets
``assistant.threads.setStatus`` ("is thinking...") and the end of the run clears it;
failures are logged, never fatal.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from functools import partial
from typing import TYPE_CHECKING, Any

from channelkit.agents.base import AgentBridge
from channelkit.attachments.model import Attachment
from channelkit.attachments.outbound import OutboundSource
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
from channelkit.markdown import Dialect, render
from channelkit.platforms import platform_offers
from channelkit.platforms.common.cluster import ClusterOptions
from channelkit.platforms.common.connection import LongConnection
from channelkit.platforms.common.contract import Decision, Interaction
from channelkit.platforms.common.delivery import DeliveryChain, DeliveryPath, DeliveryTarget
from channelkit.platforms.common.inbound import CLOSED_STATUS
from channelkit.platforms.common.limits import attach_pacer
from channelkit.platforms.common.replay import sent_at_seconds
from channelkit.platforms.common.router import InteractionRouter, decide_inbound
from channelkit.platforms.common.run_journal import TEXT_INTERRUPTED, channel_journal
from channelkit.platforms.common.shared_dedup import SharedDedup
from channelkit.platforms.common.shutdown import flush_run_lanes
from channelkit.platforms.common.store_watch import unavailable_notice
from channelkit.platforms.slack.api import SlackApi
from channelkit.platforms.slack.approvals import SlackApprovals
from channelkit.platforms.slack.config import SlackConfig
from channelkit.platforms.slack.files import file_hosts, file_source
from channelkit.platforms.slack.ingress import (
    SlackAction,
    SlackEvents,
    SlackMessage,
    SlackVerifier,
    action_interaction,
    parse_message,
)
from channelkit.platforms.slack.output import (
    STOP_ACTION,
    TEXT_FINISHED,
    LiveSegment,
    SegmentStreams,
)
from channelkit.platforms.slack.questions import SlackQuestions
from channelkit.platforms.slack.renderer import escape_mass_mentions
from channelkit.platforms.slack.socket_mode import SlackSocket
from channelkit.presentation.text import split_text
from channelkit.runtime import BoundedMap, Clock, Scheduler, WorkerPool

if TYPE_CHECKING:
    from channelkit.state.base import StateStore

__all__ = [
    "EVENTS_PATH",
    "INTERACTIVITY_PATH",
    "PRESENTATION_ACTIONS",
    "TEXT_FAILED",
    "TEXT_NOT_YOUR_RUN",
    "SlackChannel",
]

logger = logging.getLogger(__name__)

EVENTS_PATH = "/slack/events"
INTERACTIVITY_PATH = "/slack/interactivity"
#: Seconds after its ``event_time`` an ``event_id`` is remembered to drop retried
#: deliveries (Slack retries an unacknowledged event three times: at once, after 1 and
#: after 5 minutes; an hour keeps a wide margin). Older copies, and copies of ids the
#: memory bound dropped, are refused as stale (platforms/common/replay.py).
EVENT_DEDUP_TTL = 3600.0
#: Characters per posted part of a final answer.
MAX_POST_CHARS = 4_000
TEXT_NOT_YOUR_RUN = en("owner.stop")
#: The one message telling that a person's run failed where no failed segment shows it.
TEXT_FAILED = en("notice.failed")
#: ``action_id`` prefixes of a presentation's buttons and selects whose value (or
#: command) is the clicking person's message (`renderer`; ``ck:link:`` is a link).
PRESENTATION_ACTIONS = ("ck:button:", "ck:command:", "ck:select:")
TEXT_THINKING = en("slack.thinking")
MAX_TEAMS = 10_000


def _is_dm(channel: str) -> bool:
    return channel.startswith("D")


def _field(payload: Mapping[str, Any], outer: str, inner: str) -> str | None:
    """``payload[outer][inner]`` when it is a non-empty string, else None."""
    value = payload.get(outer)
    found = value.get(inner) if isinstance(value, Mapping) else None
    return found if isinstance(found, str) and found else None


class SlackChannel(ChannelBase):
    """A `ChannelBase` for Slack apps.

    ``SlackChannel(config, bridge, *, channel_config=None, api=None, executor=None,
    run_executor=None, scheduler=None, clock=None, socket_options=None, store=None)``:
    ``config`` is the `SlackConfig`; ``api`` replaces the Web API wrapper (tests, shared
    clients); ``socket_options`` go to the Socket Mode
    `SlackSocket` (``backoff``, ``wait``,
    ``ping_interval``...). ``store`` (a `StateStore` shared by every process of the bot;
    ``channelkit serve`` passes it with ``state.redis``) keeps the event dedup, the
    outbound rate-limit buckets and the runs in progress, so a retried event runs once,
    the processes together stay inside Slack's limits and a run a crash cut off is told
    by the next process; None keeps them in this process (the runs in progress in
    ``config.run_journal``).

    ``cluster_options`` (``instanceName``, ``leaseRenewS``, ``leaseExpiryS``: the
    ``state`` section's lease settings, which ``channelkit serve`` passes with
    ``state.redis``) time the lease the run journal keeps in ``store``: a process that
    starts tells the people of the runs dead instances left, never those of runs
    another live instance is running (`channelkit.platforms.common.run_journal`).
    """

    def __init__(
        self,
        config: SlackConfig,
        bridge: AgentBridge,
        *,
        channel_config: ChannelConfig | None = None,
        api: SlackApi | None = None,
        executor: WorkerPool | None = None,
        run_executor: WorkerPool | None = None,
        scheduler: Scheduler | None = None,
        clock: Clock | None = None,
        socket_options: Mapping[str, Any] | None = None,
        store: StateStore | None = None,
        cluster_options: ClusterOptions | Mapping[str, Any] | None = None,
    ) -> None:
        if not isinstance(config, SlackConfig):
            raise ConfigurationError("must be a SlackConfig", path="config")
        if channel_config is None:
            channel_config = ChannelConfig(name=config.channel_name)
        super().__init__(
            channel_config,
            bridge,
            executor=executor,
            scheduler=scheduler,
            clock=clock,
            run_executor=run_executor,
            threads=platform_offers("slack", "threads"),  # groups: a session per thread
        )
        self.slack_config = config
        #: the people's runs in progress (in ``store``, else in ``config.run_journal``): a
        #: run a crash cut off is told at the next start (`recover_interrupted_runs`)
        self.run_journal = channel_journal(
            self.name,
            store=store,
            path=config.run_journal,
            scheduler=self.scheduler,
            lease=cluster_options,
        )
        self.api: SlackApi = api or SlackApi(
            config.bot_token,
            base_url=config.api_base_url,
            timeout_s=config.request_timeout_s,
            pool_size=self.config.api_pool_size,
        )
        #: the shared store (``state.redis``) every process of the bot uses, else None:
        #: event dedup and rate-limit buckets; ``/healthz`` reports it
        self.state_store = store
        #: outbound rate limits of every API call that writes (limits.py), shared
        #: through the store by every process of the bot
        self.outbound_pacer = attach_pacer(self.api.client, "slack", clock=self.clock, store=store)
        #: event_ids already handled: a retried (or replayed) delivery is ignored; with a
        #: store shared by every instance, an event reaching two of them runs once
        self._seen_events = SharedDedup(
            self.clock.time, ttl=EVENT_DEDUP_TTL, scope="slack-event", store=store
        )
        self._teams: dict[str, str] = {}  # chat id -> team id (recipient of streams)
        self._file_hosts = file_hosts(config.api_base_url)  # where shared files may be
        self.streams = SegmentStreams(
            self.api,
            clock=self.clock,
            scheduler=self.scheduler,
            submit=self.lanes.post,
            mode=config.streaming,
            stream_interval=config.stream_interval_s,
            update_interval=config.update_interval_s,
            on_unseen=self._deliver_unseen,
            team_of=lambda channel: self._teams.get(channel, ""),
            on_closed=self._segment_closed,
        )
        self.questions = SlackQuestions(
            self.api,
            submit=lambda key, fn: self.lanes.post(("slack-question", key), fn),
            scheduler=self.scheduler,
            clock=self.clock,
            timeout_s=min(config.question_timeout_s, channel_config.permission_timeout),
        )
        #: approval buttons for ordinary tool permissions (`approvals`)
        self.approvals = SlackApprovals(
            self.api,
            submit=lambda key, fn: self.lanes.post(("slack-approval", key), fn),
            clock=self.clock,
            prompt=lambda context: self.format_permission_request(context.request),
        )
        self.questions.texts_for = self.approvals.texts_for = self.messages_for
        self.streams.texts_for = self.messages_for
        #: queue notices edited in place as the run moves up (``chat.update``)
        self.queue_notices: QueueNotices[tuple[str, str]] = QueueNotices(
            self, show=self._show_queue_notice, edit=self._edit_queue_notice
        )
        #: the final answer's retries
        self.delivery = DeliveryChain(self.scheduler, on_outcome=self.note_final_delivery)
        self.delivery_health = self.delivery.health
        #: runs whose failure a failed segment shows ("Failed."): no TEXT_FAILED for them
        self._failure_shown: BoundedMap[str, bool] = BoundedMap(clock=self.clock)
        #: ``block_actions`` clicks, in order: question forms, approval buttons, Stop,
        #: presentation buttons (anything else is acknowledged and ignored)
        self.action_router = InteractionRouter(
            (
                self._form_action,
                self._approval_pressed,
                self._stop_pressed,
                self._presentation_pressed,
            ),
            name=f"{self.name} block action",
        )
        #: the Socket Mode connection (``ingress="socket"``), else None
        self.socket: SlackSocket | None = None
        app_token = config.app_token
        if config.ingress == "socket" and app_token is not None:
            self.socket = SlackSocket(
                lambda: self.api.open_socket_url(app_token),
                self._on_event,
                self._on_interaction,
                name=f"{config.channel_name}-socket",
                clock=self.clock,
                **dict(socket_options or {}),
            )

    @property
    def connections(self) -> tuple[LongConnection, ...]:
        """The long connections this channel owns: the Socket Mode connection."""
        return (self.socket,) if self.socket is not None else ()

    # -- ingress -------------------------------------------------------------------------
    def ingress_routes(self) -> list[IngressRoute]:
        """``POST /slack/events`` and ``POST /slack/interactivity`` (one handler)."""
        secret = self.slack_config.signing_secret
        if self.slack_config.ingress != "events" or secret is None:
            return []
        handler = SlackEvents(
            SlackVerifier(secret, self.clock.time), self._on_event, self._on_interaction
        )
        return [
            IngressRoute(EVENTS_PATH, handler, ("POST",), "slack-events"),
            IngressRoute(INTERACTIVITY_PATH, handler, ("POST",), "slack-interactivity"),
        ]

    def _on_event(self, envelope: Mapping[str, Any], retry: bool) -> IngressResponse:
        """An Events API envelope (HTTP or Socket Mode): claimed by its ``event_id``
        (remembered until its ``event_time`` + `EVENT_DEDUP_TTL`; with a shared store,
        on every instance), then a person's message addressed to the bot starts a run
        after the ACK. A copy is acknowledged and dropped; while the store is down the
        event is acknowledged, starts nothing, and its person is told once
        (`_store_unavailable()`)."""
        event_id = str(envelope.get("event_id") or "")
        sent_at = sent_at_seconds(envelope.get("event_time"))
        claim = self._seen_events.claim(event_id, sent_at) if event_id else "first"
        if claim == "seen":
            logger.info("slack event %s already handled; ignored (retry=%s)", event_id, retry)
            return IngressResponse.json(200, {})
        event = envelope.get("event")
        team = envelope.get("team_id")
        message = (
            parse_message(event, team if isinstance(team, str) else None)
            if isinstance(event, Mapping)
            else None
        )
        decision = Decision.ignored()
        if message is not None and self._addressed(message):
            if claim == "unavailable":  # the shared store is down: tell the person once
                decision = self._store_unavailable(message)
            else:
                decision = self._handle_message(message)
        if decision.status == CLOSED_STATUS and event_id:
            self._seen_events.forget(event_id)  # a retry may reach an open instance
        if decision.status != 200:
            decision = decision.with_body({"ok": False})
        return decision.to_response()

    @staticmethod
    def _addressed(message: SlackMessage) -> bool:
        """Direct messages come as ``message``; elsewhere only mentions are for the bot
        (a mention in a channel also arrives as ``message`` when subscribed: once)."""
        dm = message.channel_type == "im" or _is_dm(message.channel)
        return dm != message.mention

    @staticmethod
    def _thread_of(message: SlackMessage) -> str | None:
        """The thread a message belongs to: its own thread, or, for a top-level mention
        in a channel, the thread it starts (the reply goes under it)."""
        if not message.mention:
            return message.thread_ts
        return message.thread_ts or message.ts

    def _store_unavailable(self, message: SlackMessage) -> Decision:
        """The ACK of a message the shared store could not vouch for: nothing runs; the
        first time its person is met during the outage, ``MSG_STORE_UNAVAILABLE`` (in
        their language) goes to the conversation (its thread) after the ACK, on the pool,
        through `send_message()` (the rule of `unavailable_notice()`)."""
        tell = unavailable_notice(
            self.state_store,
            channel=self.name,
            person=message.user,
            messages=self.messages_for(message.user),
            send=partial(self.send_message, message.channel, thread_id=self._thread_of(message)),
            post=self.pool.post,
        )
        return Decision.ignored() if tell is None else Decision.ignored().then(tell)

    def _handle_message(self, message: SlackMessage) -> Decision:
        dm = not message.mention
        thread = self._thread_of(message)
        if message.team:
            self._remember_team(message.channel, message.team)
        msg = InboundMessage(
            channel_name=self.name,
            chat_id=message.channel,
            sender_id=message.user,
            text=message.text,
            message_id=message.ts,
            thread_id=thread,
            is_group=not dm,
            # outside DMs only ``app_mention`` events get here: Slack's structured
            # mention of the bot (``<!here>``, ``<!channel>``, ``<!everyone>`` are none)
            mentions_bot=None if dm else message.mention,
            attachments=message.attachments,
        )
        return decide_inbound(self, msg)[1]

    def attachment_source(self, attachment: Attachment) -> AttachmentSource:
        """A shared file's ``url_private_download`` with the bot token, only on Slack's
        file host (`channelkit.platforms.slack.files`); no redirect is followed."""
        return file_source(attachment, self.slack_config.bot_token, self._file_hosts)

    def _remember_team(self, channel: str, team: str) -> None:
        if len(self._teams) >= MAX_TEAMS and channel not in self._teams:
            self._teams.pop(next(iter(self._teams)), None)
        self._teams[channel] = team

    def _on_interaction(self, payload: Mapping[str, Any]) -> IngressResponse:
        """A ``block_actions`` payload: each action through `action_router`; the
        ACK is always 200 ``{}`` (Slack shows an error for anything else)."""
        decision = Decision.ignored()
        if payload.get("type") == "block_actions":
            for action in payload.get("actions") or ():
                if isinstance(action, Mapping):
                    interaction = action_interaction(action, payload)
                    decision = decision.merge(self.action_router.route(interaction))
        return IngressResponse.json(200, {}, after=decision.after)

    def _form_action(self, interaction: Interaction) -> Decision | None:
        """A question form's action (`questions`)."""
        raw: SlackAction = interaction.raw
        return self.questions.decide_action(raw.action, raw.payload)

    def _approval_pressed(self, interaction: Interaction) -> Decision | None:
        """An approval button (`approvals`)."""
        raw: SlackAction = interaction.raw
        return self.approvals.decide_action(raw.action, raw.payload)

    def _stop_pressed(self, interaction: Interaction) -> Decision | None:
        """A Stop button: the owner cancels exactly the segment's run (once); anyone else
        gets one ephemeral notice."""
        if interaction.token != STOP_ACTION:
            return None
        live = self.streams.get(interaction.value or "")
        if live is None:
            return Decision.ignored()
        user = interaction.actor_id or ""
        verdict = self.streams.claim_stop(live, user)
        segment = live.segment
        if verdict == "owner":
            return Decision.ack().then(
                lambda: self.pool.post(
                    self.cancel_run,
                    segment.session_id,
                    segment.run_id,
                    CancellationReason.CANCEL_COMMAND,
                )
            )
        if verdict == "notice":
            channel, anchor = live.channel, live.anchor
            return Decision.ack(outcome="forbidden").then(
                lambda: self.pool.post(self._ephemeral, channel, user, anchor)
            )
        return Decision.ignored()

    def _presentation_pressed(self, interaction: Interaction) -> Decision | None:
        """A presentation's value or command button, or a choice in its select
        (`PRESENTATION_ACTIONS`): its value reaches the channel as the message the
        clicking person typed in the clicked message's conversation (its thread; a
        top-level message in a channel starts one, like a mention). None for any other
        action."""
        if not (interaction.token or "").startswith(PRESENTATION_ACTIONS):
            return None
        text, user, channel = interaction.value, interaction.actor_id, interaction.chat_id
        if not text or not text.strip() or user is None or channel is None:
            return Decision.ignored()
        raw: SlackAction = interaction.raw
        team = _field(raw.payload, "team", "id")
        if team is not None:
            self._remember_team(channel, team)
        dm = _is_dm(channel)
        thread = interaction.thread_id if dm else (interaction.thread_id or raw.message_ts)
        name = _field(raw.payload, "user", "name")
        msg = InboundMessage(
            channel_name=self.name,
            chat_id=channel,
            sender_id=user,
            text=text,
            thread_id=thread,
            is_group=not dm,
            sender_name=name,
        )
        return decide_inbound(self, msg)[1]

    def _ephemeral(self, channel: str, user: str, anchor: str | None) -> None:
        try:
            refusal = self.messages_for(user).text(TEXT_NOT_YOUR_RUN)  # the presser's language
            self.api.ephemeral(channel, user, refusal, anchor)
        except Exception as exc:
            logger.warning("slack chat.postEphemeral failed: %s", type(exc).__name__)

    # -- hooks ---------------------------------------------------------------------------
    def presentation_sender(self, target: SessionTarget, *, silent: bool = False) -> Any:
        """Presentations as Block Kit messages in the target's thread
        (`channelkit.platforms.slack.sender`): ``send_presentation`` and
        ``Turn.present`` return the message ``ts``; ``pin_message`` /
        ``unpin_message`` / ``pinned_messages`` use ``pins.add`` / ``pins.remove`` /
        ``pins.list``. Slack has no silent messages, so ``silent`` changes nothing."""
        from channelkit.platforms.slack.sender import SlackSender

        return SlackSender(self.api.client, thread_ts=target.thread_id or None)

    def upload_file(
        self,
        target: SessionTarget,
        file: OutboundSource,
        *,
        image: bool = False,
        caption: str | None = None,
    ) -> str:
        """The agent's file through Slack's external upload, shared in the target's
        channel (thread) with the caption (`files`); the file's id."""
        from channelkit.platforms.slack.files import upload

        return upload(self.api, target, file, image=image, caption=caption)

    def send_message(self, chat_id: str, text: str, *, thread_id: str | None = None) -> None:
        """Plain text, split at 4,000 characters, in the thread."""
        for part in split_text(text or " ", MAX_POST_CHARS):
            self.api.post(chat_id, part, thread_id)

    @staticmethod
    def _anchor(segment: OutputSegmentContext) -> str | None:
        return segment.target.thread_id or segment.message_id

    def on_response_chunk(
        self,
        chat_id: str,
        chunk: str,
        session_id: str,
        segment: OutputSegmentContext | None = None,
    ) -> None:
        """Stream the segment's visible text."""
        if segment is None:
            return
        self.streams.append(segment, chunk)

    def on_output_segment_end(
        self,
        chat_id: str,
        session_id: str,
        segment: OutputSegmentContext,
        reason: SegmentEndReason,
    ) -> None:
        """Close the segment's message: all its text (boundary, question), or its text
        so far with a stopped marker (cancelled) or "Failed." (failed: text no message
        showed yet is posted first, so a failed segment keeps its text)."""
        self.streams.close_segment(segment, str(reason))
        super().on_output_segment_end(chat_id, session_id, segment, reason)

    def _segment_closed(
        self,
        segment: OutputSegmentContext,
        state: str,
        live: LiveSegment | None,
        unseen: str | None,
    ) -> None:
        """After a segment's message closed (``SegmentStreams.close_segment``): the text
        of a completed segment no message showed goes through the delivery chain; a
        failed one keeps its text and reads "Failed."."""
        if unseen and state == "completed":
            chat_id = segment.target.chat_id
            target = DeliveryTarget(self.name, chat_id, segment.run_id, segment.owner.id)
            self.delivery.deliver(self._parts(chat_id, unseen, self._anchor(segment)), target)
        elif live is not None:
            self._show_failed(live, unseen or "")

    def _show_failed(self, live: LiveSegment, unseen: str) -> None:
        """A failed segment keeps its text and reads "Failed.": the text no message
        showed is posted, then the "Failed." marker unless the segment's Stop message
        already turned into it. The run then needs no `TEXT_FAILED`."""
        segment, anchor = live.segment, self._anchor(live.segment)
        posted = live.ts is not None
        if unseen.strip():
            posted = all(
                self._post_quietly(live.channel, escape_mass_mentions(part), anchor)
                for part in split_text(unseen, MAX_POST_CHARS)
            )
        if not posted:
            return  # nothing of the segment shows: the failure notice tells it
        if live.control_ts is None:
            text = self.messages_for(live.segment.owner.id).text(TEXT_FINISHED["failed"])
            marker = [{"type": "context", "elements": [{"type": "mrkdwn", "text": text}]}]
            if not self._post_quietly(live.channel, text, anchor, marker):
                return
        self._failure_shown[segment.run_id] = True

    def _post_quietly(
        self,
        channel: str,
        text: str,
        anchor: str | None,
        blocks: list[dict[str, Any]] | None = None,
    ) -> bool:
        """One ``chat.postMessage``; False (logged) when it failed."""
        try:
            self.api.post(channel, text, anchor, blocks)
            return True
        except Exception as exc:
            logger.warning("slack chat.postMessage failed: %s", type(exc).__name__)
            return False

    def _deliver_unseen(self, segment: OutputSegmentContext, text: str) -> None:
        """Text a paced stream end could not show: posted through the delivery chain."""
        chat_id = segment.target.chat_id
        target = DeliveryTarget(self.name, chat_id, segment.run_id, segment.owner.id)
        self.delivery.deliver(self._parts(chat_id, text, self._anchor(segment)), target)

    def _parts(self, chat_id: str, text: str, anchor: str | None) -> list[list[DeliveryPath]]:
        """The answer's Markdown as Slack mrkdwn (`channelkit.markdown`: ``&<>`` escaped,
        so no mass mention; links ``<url|text>``), split at block boundaries within
        `MAX_POST_CHARS`, one ``chat.postMessage`` per part."""

        def path(part: str) -> list[DeliveryPath]:
            return [DeliveryPath("post", lambda: self.api.post(chat_id, part, anchor))]

        parts = render(text, Dialect.SLACK, limit=MAX_POST_CHARS)
        return [path(part) for part in parts or split_text(text, MAX_POST_CHARS)]

    def on_response_complete(
        self,
        chat_id: str,
        text: str,
        session_id: str,
        segment: OutputSegmentContext | None = None,
    ) -> None:
        """End the live segment with the rest of the answer; post what no message
        showed through the delivery chain (a definite refusal fails the run)."""
        if segment is None:
            session_target = self.target_for_session(session_id)
            anchor = session_target.thread_id if session_target else None
            due, run_id, owner = text, self.active_run_id(session_id), None
        else:
            anchor, run_id, owner = self._anchor(segment), segment.run_id, segment.owner.id
            due = self.streams.finish_run(segment, text)
        if not due.strip():
            return
        target = DeliveryTarget(self.name, chat_id, run_id, owner)
        self.delivery.deliver(self._parts(chat_id, due, anchor), target).raise_if_refused()

    def recover_interrupted_runs(self) -> None:
        """Tell each person whose run the previous process left unfinished (killed mid-run)
        `TEXT_INTERRUPTED` in the run's thread, once (on the pool; the service calls this
        when it starts)."""
        self.run_journal.tell_leftovers(
            lambda chat, thread, record: self.pool.post(
                self._post_quietly,
                chat,
                self.messages_for().text(TEXT_INTERRUPTED),
                _anchor_of(record, thread),
            )
        )

    def on_run_queued(self, event: RunQueuedEvent) -> None:
        """The queue notice is one message in the conversation's thread, edited
        (``chat.update``) as the run moves up, at most once a second, and to "Starting
        now." when it starts."""
        self.queue_notices.queued(event)

    def _show_queue_notice(self, event: RunQueuedEvent, text: str) -> tuple[str, str] | None:
        anchor = event.thread_id or event.message_id
        ts = self.api.post(event.chat_id, escape_mass_mentions(text), anchor)
        return (event.chat_id, ts) if ts else None

    def _edit_queue_notice(self, notice: tuple[str, str], text: str, final: bool) -> None:
        self.api.update(notice[0], notice[1], escape_mass_mentions(text))

    def on_task_lifecycle(self, event: LifecycleEvent) -> None:
        """started -> the assistant thread's status; terminal -> cleared (and the run's
        leftover segments closed); ``failed`` of a person's run that no failed segment
        shows also posts `TEXT_FAILED` (a failed run is told once)."""
        self.run_journal.follow(event, {"anchor": event.thread_id or event.message_id})
        if event.type is LifecycleType.STARTED:
            self.queue_notices.started(event.run_id)
        if LifecycleType(event.type).terminal:
            self.queue_notices.forget(event.run_id)
            self.streams.discard_run(event.run_id)
            shown = self._failure_shown.pop(event.run_id)
            if event.type is LifecycleType.FAILED and event.owner is not None and not shown:
                failed = self.messages_for(event.owner.id).text(TEXT_FAILED)
                self._post_quietly(event.chat_id, failed, event.thread_id or event.message_id)
        if not self.slack_config.assistant_status or not event.thread_id:
            return
        if not _is_dm(event.chat_id) or event.owner is None:
            return
        if event.type is LifecycleType.STARTED:
            thinking = self.messages_for(event.owner.id).text(TEXT_THINKING)
            self._set_status(event.chat_id, event.thread_id, thinking)
        elif LifecycleType(event.type).terminal:
            self._set_status(event.chat_id, event.thread_id, "")

    def _set_status(self, channel: str, thread_ts: str, status: str) -> None:
        try:
            self.api.set_status(channel, thread_ts, status)
        except Exception as exc:
            logger.info("slack assistant.threads.setStatus failed: %s", type(exc).__name__)

    def present_user_input_request(
        self, context: UserInputRequestContext
    ) -> UserInputPresentationResult:
        """A Block Kit form bound to this request (UNSUPPORTED when disabled or when
        posting it fails)."""
        if not self.slack_config.native_questions:
            return UserInputPresentationResult.UNSUPPORTED
        return UserInputPresentationResult(self.questions.present(context))

    def present_permission_request(
        self, context: PermissionRequestContext
    ) -> UserInputPresentationResult:
        """The permission prompt with one button per agent option, owner-only
        (`channelkit.platforms.slack.approvals`); UNSUPPORTED (text prompt) when
        ``native_questions`` is off or posting fails."""
        if not self.slack_config.native_questions:
            return UserInputPresentationResult.UNSUPPORTED
        # the prompt is format_permission_request's, in the request's thread
        return UserInputPresentationResult(self.approvals.present(context))

    def on_close(self) -> None:
        """Stop the Socket Mode connection; let the runs the shutdown cancelled end their
        segments (their text so far, marked stopped); expire live forms, forget live
        segments, cancel pending retries."""
        if self.socket is not None:
            self.socket.stop(timeout=5.0)
        flush_run_lanes(self.lanes, self.streams.run_ids(), self.name)
        self.questions.close()
        self.streams.close()
        self.run_journal.close()  # the lease given up: nothing of this process is left
        self.queue_notices.close()
        self.delivery.close()


def _anchor_of(record: Mapping[str, Any], thread: str | None) -> str | None:
    """Where a run journal record's notice goes: the run's thread (or its message)."""
    anchor = record.get("anchor")
    return anchor if isinstance(anchor, str) and anchor else thread

"""ChannelBase: the hook surface and the run state machine.

Threading (see docs/core.md):

* ``handle_inbound`` runs on the caller's (web) thread and returns at once: it parses
  commands, answers permission commands in memory, and queues everything that waits on
  the network (agent runs, replies, /cancel) for after the ACK.
* Agent runs execute on their own pool (``run_pool``: ``bridge.prompt`` blocks there for
  a whole turn). `RunAdmission` decides when a run
  starts: runs of one session one after another, at most ``config.max_concurrent_runs``
  active at once, a run waiting on a person (question, permission) not counted. A person
  whose run cannot start at once is told it is queued; a full queue answers "busy".
* Hooks, projections, deferred ingress work and timer callbacks run on ``pool``, which
  never waits on a run. Every hook of a run is called on the run's *lane* (a serial
  queue on ``pool``, in event order). The run never waits for a hook, except
  ``on_response_complete`` (final delivery, bounded by ``config.delivery_timeout``).
  Nothing on ``pool`` waits for a task that needs another worker of ``pool``: lanes are
  drained by their waiters, so every pool may have a single worker.
* Timers (permission expiry) live on the single scheduler thread.

ChannelBase builds its helpers and hands each the collaborators it needs, never
itself: the `RunTable` (queued and live runs and their
lock), `RunEvents` (segments, hook calls),
`PendingRequests` (requests waiting on a
person), `RunCancellation` and
`ChatCommands`; the helpers call the channel's public
hooks through `ChannelHooks`. The bridge's events enter
through `channelkit.core.sinks`.
"""

from __future__ import annotations

import concurrent.futures
import logging
import math
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Literal

from channelkit.agents.base import AgentBridge, AgentEventSink, PermissionRequest, ToolCallEvent
from channelkit.attachments.fetch import DEFAULT_PER_FILE, DownloadLimits
from channelkit.attachments.model import Attachment
from channelkit.attachments.outbound import OutboundSource, outbound_source
from channelkit.attachments.workspace import Workspaces
from channelkit.core.access import ACCESS_COMMAND, AccessGate, refused
from channelkit.core.admission import RunAdmission, Ticket
from channelkit.core.approvals import PermissionHooks
from channelkit.core.busy import BusyChat, BusyMode
from channelkit.core.cancellation import RunCancellation
from channelkit.core.catalog import Messages
from channelkit.core.commands import COMMANDS, ChatCommands, parse_command
from channelkit.core.config import ChannelConfig
from channelkit.core.context import UserInputRequestContext
from channelkit.core.handles import CommandHandle, RunHandle, RunResult
from channelkit.core.inbound_files import (
    AttachmentSource,
    InboundFiles,
    ReceivedAttachments,
    agent_note,
    file_lines,
    problem_notice,
)
from channelkit.core.last_answers import DeliveryOutcome, LastAnswers
from channelkit.core.locales import PersonLocales
from channelkit.core.outbound_files import FileDeliveries, FileJob
from channelkit.core.pending import CANCELLED_RESPONSE
from channelkit.core.permission_requests import PendingRequests
from channelkit.core.presenting import ChannelPresentations
from channelkit.core.run_events import RunEvents
from channelkit.core.runs import Run, RunKind, RunTable
from channelkit.core.sessions import SessionRouter
from channelkit.core.sinks import ChannelSink, RunSink
from channelkit.core.text import (
    MSG_BUSY,
    MSG_LAST_UNCERTAIN,
    format_permission_request,
    format_queued,
    sanitize_text,
)
from channelkit.core.types import (
    CancellationReason,
    ChannelPromptOwner,
    InboundMessage,
    LifecycleEvent,
    LifecycleType,
    OutputSegmentContext,
    RunQueuedEvent,
    SegmentEndReason,
    SessionTarget,
    SettlementReason,
    UserInputPresentationResult,
)
from channelkit.errors import (
    AttachmentRefused,
    ChannelBusy,
    ChannelClosed,
    ConfigurationError,
    FileNotDelivered,
)
from channelkit.observability import tracing
from channelkit.runtime.clock import Clock, SystemClock
from channelkit.runtime.pool import WorkerPool
from channelkit.runtime.scheduler import Scheduler
from channelkit.runtime.serial import KeyedSerialQueue

__all__ = [
    "CANCELLED_RESPONSE",
    "COMMANDS",
    "ChannelBase",
    "ChannelBusy",
    "ChannelClosed",
    "parse_command",
]

logger = logging.getLogger(__name__)


class ChannelBase(ChannelPresentations, PermissionHooks):
    """The platform-neutral channel: subclass it and override the hooks.

    ``ChannelBase(config, bridge, *, executor=None, scheduler=None, clock=None,
    run_executor=None, threads=False)``: ``executor`` is the `WorkerPool` for hooks, projections,
    deferred ingress work and timer callbacks (created from ``config.max_workers`` when
    omitted); ``run_executor`` the pool agent runs block on (created when omitted, with
    room for ``max_concurrent_runs`` active runs plus every run waiting on a person);
    ``scheduler`` a `Scheduler` (created on ``executor`` and ``clock`` when
    omitted). Resources it created are shut down by `close()`. ``threads``: the
    platform has threads (a platform channel passes its registry entry's ``"threads"``
    capability); with no ``config.session_scope`` a group message then shares the
    session of its thread instead of having one per person (see `SessionRouter`).
    """

    #: True for a platform that shows nothing while an output segment runs (it cannot
    #: edit what it sent): the core then sends a segment's text with ``send_message``
    #: when the segment ends at a response boundary or before a question (so the text
    #: the agent wrote first comes first), and ``on_response_complete`` gets only the
    #: text not sent yet.
    text_only_output: bool = False

    def __init__(
        self,
        config: ChannelConfig,
        bridge: AgentBridge,
        *,
        executor: WorkerPool | None = None,
        scheduler: Scheduler | None = None,
        clock: Clock | None = None,
        run_executor: WorkerPool | None = None,
        threads: bool = False,
    ) -> None:
        if not isinstance(config, ChannelConfig):
            raise ConfigurationError("must be a ChannelConfig", path="config")
        if bridge is None:
            raise ConfigurationError("must be an AgentBridge", path="bridge")
        self.config = config
        self.name = config.name
        self._bridge = bridge
        #: the channel's ``locale`` and the languages people's platforms told
        self.locales = PersonLocales(config.locale)
        if clock is None:
            clock = scheduler.clock if scheduler is not None else SystemClock()
        elif scheduler is not None and scheduler.clock is not clock:
            # Deadlines (context.expires_at) are computed on ``clock`` and fire on the
            # scheduler's clock: two clocks would disagree.
            raise ConfigurationError(
                "must be the scheduler's clock (or omitted to use it)", path="clock"
            )
        self.clock: Clock = clock
        self._owns_pool = executor is None
        self.pool: WorkerPool = (
            executor
            if executor is not None
            else WorkerPool(config.max_workers, name=f"channelkit-{config.name}")
        )
        self._owns_scheduler = scheduler is None
        self.scheduler: Scheduler = (
            scheduler
            if scheduler is not None
            else Scheduler(self.pool, clock=clock, name=f"channelkit-{config.name}-timers")
        )
        #: Serial lanes on the pool; ChannelBase runs each run's hooks on ("run", run_id).
        self.lanes = KeyedSerialQueue(self.pool, name=f"[{config.name}] lane")
        max_runs = config.max_concurrent_runs or 1
        self._owns_run_pool = run_executor is None
        #: The pool agent runs block on; never shared with hooks.
        self.run_pool: WorkerPool = (
            run_executor
            if run_executor is not None
            else WorkerPool(
                max_runs + config.max_pending_permissions, name=f"channelkit-{config.name}-run"
            )
        )
        if self.run_pool is self.pool:
            raise ConfigurationError(
                "must not be the hook executor: runs block for a whole turn", path="run_executor"
            )
        self._admission = RunAdmission(
            limit=max_runs,
            max_queued=config.max_queued_runs,
            max_queued_per_owner=config.max_queued_per_owner,
            max_queued_per_chat=config.max_queued_per_chat,
            start=self._start_ticket,
            moved=self._ticket_moved,
        )
        #: message -> session by the scope (configured, or the default per message)
        self.router = SessionRouter(config.name, config.scope, threads=threads, clock=clock)
        self._runs = RunTable(config.name)
        self._events = RunEvents(config.name, self.lanes, self)
        self._requests = PendingRequests(
            config=config,
            table=self._runs,
            admission=self._admission,
            router=self.router,
            events=self._events,
            hooks=self,
            bridge=self._current_bridge,
            clock=clock,
            scheduler=self.scheduler,
            lanes=self.lanes,
            pool=self.pool,
        )
        self._cancellation = RunCancellation(
            config=config, events=self._events, requests=self._requests, bridge=self._current_bridge
        )
        #: each scope's last final answer, for ``/last`` and the uncertain-delivery hint
        self.last_answers = LastAnswers(
            config.name,
            clock=clock,
            max_age=config.last_answer_max_age,
            store=lambda: getattr(self, "state_store", None),
        )
        self._commands = ChatCommands(
            config=config,
            table=self._runs,
            router=self.router,
            requests=self._requests,
            cancellation=self._cancellation,
            hooks=self,
            lanes=self.lanes,
            pool=self.pool,
            answers=self.last_answers,
            admission=self._admission,
            admins=lambda: self.access.config.admins,  # read per command: updates count
        )
        self._sink = ChannelSink(self._events, self._requests, self._runs)
        #: what a person's message does while their conversation's run is going
        self._busy = BusyChat(
            channel_name=config.name,
            mode=BusyMode(config.busy),
            collect_window=config.collect_window,
            table=self._runs,
            bridge=self._current_bridge,
            enqueue=self._enqueue,
            cancel=self.cancel_run,
            scheduler=self.scheduler,
            clock=clock,
            pool=self.pool,
        )
        #: who may talk to the bot, and where (`AccessConfig`); checked first in
        #: `handle_inbound`; its pairing methods change who is admitted at run time
        self.access = AccessGate(
            config.access_policy,
            clock=clock,
            channel_name=config.name,
            store=lambda: getattr(self, "state_store", None),  # pairings: the shared store
        )
        self._worker_state = threading.local()  # run threads: the run handed to them next
        #: the caps, timeouts and redirect bound of every attachment download
        self.attachment_limits = DownloadLimits()
        #: the per-run directories attachments are downloaded to (removed when the run
        #: ends and by `close()`); replace it before the first run to choose the root
        self.workspaces = Workspaces(clock=clock)
        #: the agent's files and images on their way out (`upload_file`, retries, the
        #: text fallback); a run's files go on its lane
        self.files = FileDeliveries(
            config.name,
            upload=lambda *args, **kwargs: self.upload_file(*args, **kwargs),
            tell=self._tell_file_problem,
            lanes=self.lanes,
            scheduler=self.scheduler,
        )
        self._events.files = self.files

    # =================================================================================
    # Hooks (override in adapters). All run on the run's lane unless noted.
    # =================================================================================

    def send_message(self, chat_id: str, text: str, *, thread_id: str | None = None) -> None:
        """Send plain text to a chat (thread). Adapters must implement it.

        Called on a pool thread (run lane, reply lane or the /cancel task)."""
        raise NotImplementedError(f"{type(self).__name__} must implement send_message")

    def on_task_lifecycle(self, event: LifecycleEvent) -> None:
        """Every lifecycle event of every run, in order. Default: nothing."""

    def on_response_chunk(
        self,
        chat_id: str,
        chunk: str,
        session_id: str,
        segment: OutputSegmentContext | None = None,
    ) -> None:
        """A visible text chunk (attended runs get the segment). Default: nothing."""

    def on_output_segment_end(
        self,
        chat_id: str,
        session_id: str,
        segment: OutputSegmentContext,
        reason: SegmentEndReason,
    ) -> None:
        """A segment closed (exactly once). Default: delegates only response_boundary
        to `on_response_boundary()`."""
        if reason is SegmentEndReason.RESPONSE_BOUNDARY:
            self.on_response_boundary(chat_id, session_id)

    def on_response_boundary(self, chat_id: str, session_id: str) -> None:
        """Legacy boundary hook. Default: nothing."""

    def on_response_complete(
        self,
        chat_id: str,
        text: str,
        session_id: str,
        segment: OutputSegmentContext | None = None,
    ) -> None:
        """Deliver the final response; the run waits for it (``delivery_timeout``).

        Default: ``send_message`` to the run's chat and thread. Raising fails the run
        with phase ``delivery``."""
        target = segment.target if segment is not None else self.target_for_session(session_id)
        self.send_message(chat_id, text, thread_id=target.thread_id if target else None)

    def present_user_input_request(
        self, context: UserInputRequestContext
    ) -> UserInputPresentationResult:
        """Offer a structured question natively. Default: UNSUPPORTED (text prompt)."""
        return UserInputPresentationResult.UNSUPPORTED

    def on_tool_call(self, chat_id: str, event: ToolCallEvent) -> None:
        """Every raw tool call event (including raw input). Default: nothing."""

    def format_permission_request(self, request: PermissionRequest) -> str:
        """The text permission prompt for requests not presented natively, in the
        language of the person whose session asks."""
        target = self.target_for_session(request.session_id)
        texts = self.messages_for(target.sender_id if target is not None else None)
        return format_permission_request(request, texts)

    def attachment_source(self, attachment: Attachment) -> AttachmentSource:
        """How to download one of a person's attachments (platforms override it).

        Called on the run's worker (after the ACK) for each `Attachment` of the
        message, in order; it may call the platform's API (Telegram's ``getFile``) to
        turn `Attachment.reference` into an authenticated URL on the platform's own
        file host. The core then streams that URL into the run's workspace under
        `attachment_limits`. Raising (an `AttachmentError` or any other error) leaves
        that file out: the person is told, the run starts without it. The default
        refuses: this platform does not download attachments yet."""
        raise AttachmentRefused(
            name=attachment.name, reason=f"{type(self).__name__} does not download attachments"
        )

    def upload_file(
        self,
        target: SessionTarget,
        file: OutboundSource,
        *,
        image: bool = False,
        caption: str | None = None,
    ) -> str:
        """Upload one of the agent's files to ``target`` natively (platforms override it).

        One attempt: return the platform's message id, or raise. `file` is an
        `OutboundFile` (confined to the allowed root, checked, not read yet) or
        `OutboundBytes`; read it with ``file.open()`` (a new stream per call), its
        ``name`` (sanitized), ``size`` and sniffed ``content_type()``. ``image`` asks
        for an image message (a platform may send a file it cannot show as one);
        ``caption`` goes with it. Called on a lane of the pool, after the platform ACK.
        A retryable error (`RateLimited`, a 5xx `ApiError`, a `TransportError`) is
        tried again by the core (`channelkit.core.outbound_files`); any other error is
        a refusal: the person gets one line naming the file and why. The default
        refuses: this platform does not take files from the bot yet, so the person
        gets that line (the text fallback)."""
        raise AttachmentRefused(
            name=file.name, reason="this platform does not take files from the bot yet"
        )

    def send_file(
        self,
        target: SessionTarget | str,
        path_or_bytes: str | os.PathLike[str] | bytes,
        *,
        name: str | None = None,
        caption: str | None = None,
        image: bool = False,
        thread_id: str | None = None,
        root: str | os.PathLike[str] | None = None,
        max_size: int = DEFAULT_PER_FILE,
        timeout: float = 120.0,
    ) -> str:
        """Send a file (or, with ``image``, an image) to a conversation; its message id.

        ``path_or_bytes``: a path, confined to ``root`` (default: the current working
        directory; refused before it is opened when outside it, not a regular file or
        larger than ``max_size`` bytes), or bytes with ``name``. Retried and, when the
        platform refuses it, told to the chat as one line naming the file; raises
        `FileNotDelivered` then (``told``), `AttachmentRefused` /
        `AttachmentTooLarge` for a file refused before reading. Waits up to
        ``timeout`` seconds (retries included): call it from a script or a pool
        thread, never from a web handler. An agent's turn uses `Turn.send_file`."""
        where = self._as_target(target, thread_id)
        file = outbound_source(
            path_or_bytes, root if root is not None else os.getcwd(), name=name, max_size=max_size
        )
        reply: Future[str] = Future()
        job = FileJob(
            target=where,
            file=file,
            image=bool(image),
            caption=caption or None,
            reply=reply,
            lane=("file", where.chat_id, where.thread_id or ""),
            texts=self.messages_for(where.sender_id or None),
        )
        self.files.start(job)
        try:
            return reply.result(timeout=timeout)
        except concurrent.futures.TimeoutError:
            raise FileNotDelivered(
                name=file.name, reason=f"no answer within {timeout:g} s", attempts=job.attempts
            ) from None

    def _tell_file_problem(self, target: SessionTarget, text: str) -> None:
        self.send_message(target.chat_id, text, thread_id=target.thread_id)

    def on_close(self) -> None:
        """Called by `close()` after live runs were cancelled and pending requests
        settled, before the scheduler and pool stop. Finalize native presentations."""

    def on_run_queued(self, event: RunQueuedEvent) -> None:
        """A run could not start at once (every run slot is taken): tell the person.

        Called on the run's lane when the run is queued (``event.first``) and again each
        time its place moves (``event.ahead`` runs are before it). The default sends
        the queue notice as text once; adapters that can edit what they sent keep it
        current with `QueueNotices`. The run's
        ``started`` event follows on the same lane."""
        if event.first:
            texts = self.messages_for(event.owner.id if event.owner else None)
            notice = format_queued(event.ahead, texts)
            self.send_message(event.chat_id, notice, thread_id=event.thread_id)

    def on_run_rejected(self, target: SessionTarget, reason: str) -> None:
        """A person's message could not be queued (``reason`` names the bound that was
        reached). The default sends the busy notice as text; nothing else changes."""
        busy = self.messages_for(target.sender_id).text(MSG_BUSY)
        self.send_message(target.chat_id, busy, thread_id=target.thread_id)

    # =================================================================================
    # Entry points
    # =================================================================================

    @property
    def bridge(self) -> AgentBridge:
        """The agent bridge runs prompt (see `set_bridge()`)."""
        return self._bridge

    def _current_bridge(self) -> AgentBridge:
        return self._bridge

    @property
    def run_table(self) -> RunTable:
        """The table of this channel's queued and live runs and their lock (read it;
        the channel is its only writer)."""
        return self._runs

    @property
    def busy_chat(self) -> BusyChat:
        """How this channel treats a message while its conversation's run is going
        (``config.busy``; read it, e.g. ``busy_chat.waiting_messages``)."""
        return self._busy

    @property
    def event_sink(self) -> ChannelSink:
        """A session-routed AgentEventSink for events a bridge reports outside prompt."""
        return self._sink

    @property
    def closed(self) -> bool:
        """True once `close()` started."""
        return self._runs.closed

    def messages_for(self, person: str | None = None) -> Messages:
        """The catalog texts ``person`` (a sender id; None: nobody in particular) reads:
        the language their platform told (`InboundMessage.language`), else the
        channel's ``locale``, else English. Adapters render every text they show a
        person through it (see `channelkit.core.catalog`)."""
        return self.locales.messages_for(person)

    def handle_inbound(
        self, msg: InboundMessage, *, defer: list[Callable[[], None]] | None = None
    ) -> RunHandle | CommandHandle:
        """Entry point for a real human message; returns at once.

        The channel's access policy (`AccessGate`, ``config.access``) decides first: a
        refused message reaches no agent and shows no indicator; its handle is a
        ``CommandHandle`` named ``"access"`` (``reply``: the notice sent, or None).
        /approve, /approve-always and /deny [request-id] are answered in memory here
        (the reply is sent on the pool); /cancel is authorized here and executed on the
        pool; any other text schedules an agent run owned by the sender.

        ``defer`` (web handlers): instead of handing work to the pool now, append quick
        callables that do so to this list, to be run after the platform ACK was written
        (``IngressResponse.after``). Validation, the closed check and the queue bound
        (`ChannelBusy`) still raise here; the run's queue slot is reserved at
        once. A permission command is then answered by its deferred work too (its
        handle's ``reply`` stays None until ``result()``), so no settlement listener,
        responder or reply starts before the ACK. A deferred callable that is never run
        leaves its run queued: always run them.
        """
        self._validate_inbound(msg)
        self._check_open()
        if msg.language is not None:
            self.locales.note(msg.sender_id, msg.language)
        target = SessionTarget(
            channel_name=self.name,
            sender_id=msg.sender_id,
            chat_id=msg.chat_id,
            thread_id=msg.thread_id,
            is_group=msg.is_group,
        )
        access = self.access.check(msg)  # before any run, card, reaction or typing
        if not access.admitted:
            return refused(
                self.name,
                msg,
                access,
                lambda text: self._commands.send_reply(target, ACCESS_COMMAND, text, defer),
            )
        command = parse_command(msg.text)
        if command is not None:
            return self._commands.handle(command[0], command[1], msg, target, defer)
        session_id = self.router.session_for(target)
        run = Run(
            kind="inbound",
            session_id=session_id,
            target=target,
            owner=ChannelPromptOwner(msg.sender_id),
            message_id=msg.message_id,
            text=msg.text,
            attachments=msg.attachments,
        )
        return self._busy.admit(run, defer)

    def run_loop_prompt(
        self,
        target: SessionTarget,
        text: str,
        *,
        job_id: str | None = None,
        session_id: str | None = None,
    ) -> RunHandle:
        """Run a synthetic (scheduled) prompt: no owner, never eligible for native input."""
        return self._synthetic("loop", target, text, job_id, session_id)

    def run_webhook_task(
        self,
        target: SessionTarget,
        text: str,
        *,
        task_id: str | None = None,
        session_id: str | None = None,
    ) -> RunHandle:
        """Run a webhook-produced prompt: no owner, never eligible for native input."""
        return self._synthetic("webhook", target, text, task_id, session_id)

    def cancel_run(
        self,
        session_id: str,
        run_id: str,
        reason: CancellationReason | str = CancellationReason.CANCEL_COMMAND,
    ) -> bool:
        """Cancel exactly ``run_id`` if it is the session's live run.

        Returns False for a missing, stale or mismatched id (never falls back to a
        session cancel), or when delivery already started. Blocks for the bridge's
        cancel call (bounded by ``config.cancel_timeout`` for concurrent callers): call
        it from a pool thread, after the platform ACK.
        """
        if not run_id:
            return False
        run = self._runs.active_run(session_id)
        if run is None or run.run_id != run_id:
            return False
        return self._cancellation.cancel(run, reason)

    def permission_lifetime(self) -> float:
        """Seconds a new pending permission request stays answerable.

        ``config.permission_timeout``, or the bridge's own ``permission_timeout`` when it
        advertises a smaller positive number (``AcpBridge`` and ``FunctionAgent`` do): the
        bridge gives up on the request then, so ChannelBase answers it ``cancelled`` at
        that time too. Read for every request, so a replaced bridge counts.
        """
        lifetime = float(self.config.permission_timeout)
        advertised = getattr(self._bridge, "permission_timeout", None)
        if (
            isinstance(advertised, int | float)
            and not isinstance(advertised, bool)
            and math.isfinite(advertised)
            and advertised > 0
        ):
            lifetime = min(lifetime, float(advertised))
        return lifetime

    def active_run_id(self, session_id: str) -> str | None:
        """The live run of a session, if any."""
        run = self._runs.active_run(session_id)
        return run.run_id if run is not None else None

    def target_for_session(self, session_id: str) -> SessionTarget | None:
        """The live run's target, else the session's last routed target."""
        run = self._runs.active_run(session_id)
        return run.target if run is not None else self.router.target_for(session_id)

    def pending_request_ids(self, session_id: str | None = None) -> list[str]:
        """Live pending permission request ids (optionally of one session), oldest first."""
        return [p.request_id for p in self._requests.live(session_id)]

    def set_bridge(self, bridge: AgentBridge) -> None:
        """Replace the bridge; every pending request settles ``cancelled`` (unanswered)."""
        with self._runs.lock:
            self._bridge = bridge
            pendings = self._requests.live()
        for pending in pendings:
            self._requests.remove(pending, SettlementReason.CANCELLED)

    def wait_idle(self, timeout: float = 5.0) -> bool:
        """Wait until no run is queued or running and the hook pool has no task (tests;
        not from a pool thread). False when ``timeout`` passed first."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = max(0.0, deadline - time.monotonic())
            if not self.run_pool.wait_idle(remaining) or not self.pool.wait_idle(
                max(0.0, deadline - time.monotonic())
            ):
                return False
            if self.run_pool.unfinished == 0 and self.pool.unfinished == 0:
                return True
            if time.monotonic() >= deadline:
                return False

    @property
    def run_stats(self) -> dict[str, int]:
        """Runs ``active`` (executing), ``waiting`` (on a person) and ``queued``."""
        admission = self._admission
        return {
            "active": admission.active,
            "waiting": admission.parked,
            "queued": admission.queued,
        }

    def close(self, timeout: float = 10.0) -> None:
        """Cancel live runs, settle pending requests ``run_cancelled``, call
        `on_close()`, stop the scheduler and join the pool (each within
        ``timeout``). Idempotent. The bridge is not closed (its owner closes it)."""
        runs = self._runs.close()
        if runs is None:
            return
        self._busy.close()
        for ticket in self._admission.drain():
            run = ticket.payload
            run.cancelled = True
            _resolve(run.future, RunResult(run.run_id, run.session_id, "cancelled"))
        for run in runs:
            try:
                self._cancellation.cancel(run, CancellationReason.SHUTDOWN)
            except Exception:
                logger.exception("[%s] cancelling run %s on close failed", self.name, run.run_id)
        for pending in self._requests.live():
            if self._requests.remove(pending, SettlementReason.RUN_CANCELLED):
                self._requests.respond_bridge_cancelled(pending.request_id)
        self.files.close()
        try:
            self.on_close()
        except Exception:
            logger.exception("[%s] on_close failed", self.name)
        deadline = time.monotonic() + timeout

        def left() -> float:
            return max(0.0, deadline - time.monotonic())

        if self._owns_run_pool:
            self.run_pool.wait_idle(left())
        if self._owns_pool:
            self.pool.wait_idle(left())
        if self._owns_scheduler:
            self.scheduler.stop(left())
        if self._owns_run_pool:
            self.run_pool.shutdown(wait=True, timeout=left())
        if self._owns_pool:
            self.pool.shutdown(wait=True, timeout=left())
        self.workspaces.close()

    def __enter__(self) -> ChannelBase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # =================================================================================
    # Runs
    # =================================================================================

    def _check_open(self) -> None:
        self._runs.check_open()

    def _validate_inbound(self, msg: InboundMessage) -> None:
        if not isinstance(msg, InboundMessage):
            raise ConfigurationError("must be an InboundMessage", path="msg")
        for name in ("chat_id", "sender_id"):
            value = getattr(msg, name)
            if not isinstance(value, str) or not value:
                raise ConfigurationError("must be a non-empty string", path=f"msg.{name}")
        if not isinstance(msg.text, str):
            raise ConfigurationError("must be a string", path="msg.text")
        if not isinstance(msg.attachments, tuple):
            raise ConfigurationError("must be a tuple of Attachment", path="msg.attachments")
        for index, attachment in enumerate(msg.attachments):
            if not isinstance(attachment, Attachment):
                raise ConfigurationError("must be an Attachment", path=f"msg.attachments[{index}]")
        if msg.channel_name != self.name:
            raise ConfigurationError(
                f"is {msg.channel_name!r}, this channel is {self.name!r}", path="msg.channel_name"
            )

    def _synthetic(
        self,
        kind: RunKind,
        target: SessionTarget,
        text: str,
        message_id: str | None,
        session_id: str | None,
    ) -> RunHandle:
        if not isinstance(target, SessionTarget):
            raise ConfigurationError("must be a SessionTarget", path="target")
        if not isinstance(text, str):
            raise ConfigurationError("must be a string", path="text")
        self._check_open()
        sid = session_id or self.router.session_for(target)
        run = Run(
            kind=kind,
            session_id=sid,
            target=target,
            owner=None,
            message_id=message_id,
            text=text,
        )
        return self._enqueue(run)

    def _enqueue(
        self, run: Run, defer: list[Callable[[], None]] | None = None, notice: bool = True
    ) -> RunHandle:
        """Admit ``run``; started now, queued (the person is told, also behind their
        own conversation's run, unless ``notice`` is False), or refused as busy.

        A person's run over a queue bound resolves at once as ``rejected`` and the busy
        notice goes to the chat (after the ACK when ``defer`` is given); a synthetic run
        raises `ChannelBusy` (nobody to tell)."""
        future = run.future
        target = run.target
        self._runs.queue(run)
        try:
            ticket = self._admission.admit(
                run,
                session=run.session_id,
                owner=run.owner.id if run.owner is not None else None,
                chat=(target.chat_id, target.thread_id or ""),
                hold=defer is not None,
            )
        except ChannelBusy as busy:
            limit = busy.limit
            self._runs.unqueue(run)
            if run.kind != "inbound":
                raise
            logger.warning("[%s] refusing a run for chat %s: %s", self.name, target.chat_id, busy)
            _resolve(future, RunResult(run.run_id, run.session_id, "rejected", error=busy))
            if defer is None:
                self._events.post_rejected(target, limit)
            else:
                defer.append(lambda: self._events.post_rejected(target, limit))
            return RunHandle(run.run_id, run.session_id, future)
        run.ticket = ticket
        if ticket.state == "queued" and run.kind == "inbound":
            if notice and self._admission.waits(ticket):
                # told at once, whether it waits for a slot or for its conversation's run
                event = self._events.queued_event(run, ticket.ahead, first=True)
                if defer is None:
                    self._events.post_queued(run, event)
                else:
                    defer.append(lambda: self._events.post_queued(run, event))
            else:
                ticket.ahead = -1  # behind its own session: no position notices
        if defer is not None:
            defer.append(lambda: self._start_deferred(run))
        return RunHandle(run.run_id, run.session_id, future)

    def _start_deferred(self, run: Run) -> None:
        """Release a run reserved by ``handle_inbound(defer=...)`` (after the ACK)."""
        ticket = run.ticket
        if ticket is None:
            return
        if self._runs.closed:
            self._admission.finish(ticket)
            self._runs.unqueue(run)
            _resolve(run.future, RunResult(run.run_id, run.session_id, "cancelled"))
            return
        self._admission.release(ticket)

    def _start_ticket(self, ticket: Ticket) -> None:
        """Admission callback: the run may start now (never under the admission lock)."""
        run: Run = ticket.payload
        run.ticket = ticket
        try:
            handoff: list[Run] | None = getattr(self._worker_state, "handoff", None)
            if handoff is not None and not handoff:
                handoff.append(run)  # the finishing run's thread runs it next
            else:
                self.run_pool.post(self._run_on_worker, run)
        except Exception:
            logger.warning("[%s] run pool refused run %s", self.name, run.run_id)
            self._runs.unqueue(run)
            _resolve(run.future, RunResult(run.run_id, run.session_id, "cancelled"))
            self._admission.finish(ticket)

    def _ticket_moved(self, ticket: Ticket, ahead: int) -> None:
        """A queued run's place changed. Each run that starts moves every run behind it
        (n queued runs: n * (n + 1) / 2 moves); a notice shows only the newest place,
        so the moves of one run coalesce: at most one post is on its lane, and it
        carries the place current when it runs."""
        run: Run = ticket.payload
        if run.kind != "inbound" or run.done:
            return
        with run.lock:
            run.queued_ahead = ahead
            if run.move_posted:
                return
            run.move_posted = True
        self._events.post_queued_move(run)

    def _run_on_worker(self, run: Run) -> None:
        """Execute ``run`` and then, on the same thread, the run its end let start (so
        a steady queue reuses threads instead of starting one per run)."""
        nxt: Run | None = run
        while nxt is not None:
            self._worker_state.next = None
            with tracing.run_span(self._events.platform, self.name, nxt):
                self._execute(nxt, nxt.future)
            nxt = self._worker_state.next
            self._worker_state.next = None

    def _execute(self, run: Run, future: Future[RunResult]) -> None:
        with self._runs.lock:
            self._runs.unqueue(run)
            if self._runs.closed or run.is_cancelled() or future.done():
                if not future.done():
                    future.set_result(RunResult(run.run_id, run.session_id, "cancelled"))
                if run.ticket is not None:
                    self._admission.finish(run.ticket)
                return
            self._runs.activate(run)
            bridge = self._bridge
            with run.lock:  # started is on the lane before anything a canceller posts
                if run.kind == "inbound":
                    # first on the run's lane: a hint when this scope's last answer may
                    # not have arrived (it may read the state store: never before the ACK)
                    self.lanes.post(
                        run.lane, self._maybe_hint_last_answer, run.session_id, run.target
                    )
                self._events.post_lifecycle(run, LifecycleType.STARTED)
        status: Literal["completed", "failed", "cancelled"] = "failed"
        response = ""
        error: BaseException | None = None
        received: ReceivedAttachments | None = None
        try:
            if run.attachments and not run.is_cancelled():
                # on this worker, never before the ACK; a Stop meanwhile skips the rest
                received = self._receive_attachments(run)
            with run.lock:
                skip = run.cancelled  # cancelled before the prompt went out
                run.prompting = True
            sink = RunSink(self._events, self._requests, run)
            try:
                platform, run_id = self._events.platform, run.run_id
                turn = {"channelkit.platform": platform, "channelkit.run_id": run_id}
                with tracing.span(tracing.SPAN_AGENT_TURN, turn):  # the agent call
                    raw = "" if skip else self._prompt(bridge, run, received, sink)
            finally:
                self._requests.await_answers(run, self.config.respond_timeout)
            response = raw if isinstance(raw, str) else ("" if raw is None else str(raw))
            self._cancellation.await_decision(run)
            with run.lock:
                cancelled = run.cancelled
                if not cancelled:
                    self._events.release_held_locked(run)
                    segment = None
                    response = self._events.shown_response(run, response)
                    if response:
                        run.delivery_started = True
                        segment = self._events.ensure_segment_locked(run)
                        delivery = self.lanes.submit(
                            run.lane, self._deliver_final, run, response, segment
                        )
            if cancelled:
                status = "cancelled"
            else:
                if response:
                    try:
                        delivery.result(timeout=self.config.delivery_timeout)
                    except concurrent.futures.TimeoutError:
                        raise TimeoutError(
                            f"final delivery took longer than {self.config.delivery_timeout}s"
                        ) from None
                with run.lock:
                    # the delivered segment (or one left open) ends through the hook,
                    # once, after on_response_complete
                    self._events.end_segment_locked(run, SegmentEndReason.COMPLETED)
                    if not run.terminal:
                        run.terminal = True
                        self._events.post_lifecycle(run, LifecycleType.COMPLETED)
                status = "completed"
        except Exception as exc:
            self._cancellation.await_decision(run)
            with run.lock:
                cancelled = run.cancelled
                if not cancelled and not run.terminal:
                    self._events.release_held_locked(run)
                    # a segment open now ends failed and shows it; without one (none
                    # opened, or the last one ended at a question's boundary) the
                    # adapter tells the failure another way (segment_failed=False)
                    segment_failed = self._events.end_segment_locked(run, SegmentEndReason.FAILED)
                    run.terminal = True
                    phase = "delivery" if run.delivery_started else "agent"
                    self._events.post_lifecycle(
                        run,
                        LifecycleType.FAILED,
                        error=sanitize_text(str(exc) or type(exc).__name__, 200),
                        phase=phase,
                        segment_failed=segment_failed,
                    )
            if cancelled:
                logger.warning(
                    "[%s] turn %s threw after cancellation for session %s: %s",
                    self.name,
                    run.message_id or run.run_id,
                    run.session_id,
                    sanitize_text(str(exc), 200),
                )
                status = "cancelled"
            else:
                logger.warning(
                    "[%s] run %s failed for session %s: %s",
                    self.name,
                    run.run_id,
                    run.session_id,
                    sanitize_text(str(exc), 200),
                )
                status, error = "failed", exc
        finally:
            if received is not None:
                received.close()  # the run's files go with it, whatever the outcome
            self._runs.deactivate(run)
            with run.lock:
                run.done = True
                run.held = []
            if run.ticket is not None:
                handoff: list[Run] = []
                self._worker_state.handoff = handoff  # only while this run's slot is freed
                try:
                    self._admission.finish(run.ticket)
                finally:
                    self._worker_state.handoff = None
                self._worker_state.next = handoff[0] if handoff else None
            result = RunResult(run.run_id, run.session_id, status, response, error)
            try:
                self.lanes.post(run.lane, _resolve, future, result)
            except Exception:
                _resolve(future, result)

    def _receive_attachments(self, run: Run) -> ReceivedAttachments:
        """Download the run's attachments into its workspace; tell the person (once, on
        the run's lane) which files it goes without."""
        files = InboundFiles(self.attachment_source, self.workspaces, self.attachment_limits)
        received = files.receive(run.run_id, run.attachments, cancelled=run.is_cancelled)
        if received.problems:
            texts = self.messages_for(run.owner.id if run.owner is not None else None)
            notice = problem_notice(received.problems, texts)
            self.lanes.post(run.lane, self._tell_attachment_problems, run.target, notice)
        return received

    def _tell_attachment_problems(self, target: SessionTarget, notice: str) -> None:
        try:
            self.send_message(target.chat_id, notice, thread_id=target.thread_id)
        except Exception as exc:
            logger.warning("[%s] the attachment notice was not sent: %s", self.name, exc)

    @staticmethod
    def _prompt(
        bridge: AgentBridge, run: Run, received: ReceivedAttachments | None, sink: AgentEventSink
    ) -> str:
        """Prompt the bridge with the run's text and its files: a bridge with
        ``prompt_with_attachments`` (`FunctionAgent`) gets them as `ReceivedFile`s, any
        other a line naming each file's local path; a note names the files not received."""
        text = run.text
        if received is None:
            return bridge.prompt(run.session_id, text, sink)
        note = agent_note(received.problems)
        if note:
            text = f"{text}\n\n{note}" if text else note
        with_files = getattr(bridge, "prompt_with_attachments", None)
        if received.files and callable(with_files):
            result = with_files(run.session_id, text, received.files, sink)
            return result if isinstance(result, str) else ("" if result is None else str(result))
        if received.files:
            lines = file_lines(received.files)
            text = f"{text}\n\n{lines}" if text else lines
        return bridge.prompt(run.session_id, text, sink)

    def _deliver_final(self, run: Run, response: str, segment: OutputSegmentContext | None) -> None:
        if run.kind == "inbound":
            self.last_answers.record(run.session_id, run.run_id, response)
        self.on_response_complete(run.target.chat_id, response, run.session_id, segment)

    def note_final_delivery(self, run_id: str | None, outcome: DeliveryOutcome) -> None:
        """How the final answer of ``run_id`` ended on the platform: ``delivered``,
        ``refused`` (failed at once: the run fails and says so), ``uncertain`` (sent, the
        outcome unknown, not sent again) or ``failed`` (a later retry failed). Adapters'
        delivery chains report here; after ``uncertain`` or ``failed`` the person's next
        message gets a one-line hint about ``/last``. Safe from any thread."""
        self.last_answers.settle(run_id, outcome)

    def _maybe_hint_last_answer(self, session_id: str, target: SessionTarget) -> None:
        if not self.last_answers.take_hint(session_id):
            return
        try:
            hint = self.messages_for(target.sender_id).text(MSG_LAST_UNCERTAIN)
            self.send_message(target.chat_id, hint, thread_id=target.thread_id)
        except Exception as exc:
            logger.warning("[%s] the /last hint was not sent: %s", self.name, exc)


def _resolve(future: Future[RunResult], result: RunResult) -> None:
    if not future.done():
        future.set_result(result)

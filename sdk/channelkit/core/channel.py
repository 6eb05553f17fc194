"""ChannelBase: runs, owners, lifecycle, output segments, pending permissions, settlement.

Threading (see docs/core.md):

* ``handle_inbound`` runs on the caller's (web) thread and returns at once: it parses
  commands, answers permission commands in memory, and queues everything that waits on
  the network (agent runs, replies, /cancel) on the pool.
* An agent run executes on a pool worker (``bridge.prompt`` blocks there). Runs of one
  session execute one after another; at most ``config.max_concurrent_runs`` at once.
* Every hook of a run is called on the run's *lane*: a serial queue on the pool, in
  event order. The run never waits for a hook, except ``on_response_complete`` (final
  delivery, bounded by ``config.delivery_timeout``). A slow hook delays later hooks of
  the same run, never the model.
* Timers (permission expiry) live on the single scheduler thread.
"""

from __future__ import annotations

import concurrent.futures
import logging
import math
import threading
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from typing import Any, Literal, TypeVar

from channelkit.agents.base import (
    AgentBridge,
    PermissionRequest,
    PermissionResolved,
    PermissionResponse,
    SessionDied,
    ToolCallEvent,
)
from channelkit.core.config import ChannelConfig
from channelkit.core.context import SettlementListener, UserInputRequestContext
from channelkit.core.handles import CommandHandle, CommandResult, RunHandle, RunResult
from channelkit.core.questions import (
    always_option_id,
    approval_option_id,
    is_reject_option,
    normalize_user_questions,
    reject_option_id,
)
from channelkit.core.sessions import SessionRouter
from channelkit.core.text import (
    MSG_APPROVED,
    MSG_APPROVED_ALWAYS,
    MSG_CANCEL_FAILED,
    MSG_CANCEL_UNAUTHORIZED,
    MSG_CANCELLED,
    MSG_DENIED,
    MSG_FAILED,
    MSG_NO_ALWAYS,
    MSG_NO_APPROVABLE,
    MSG_NONE,
    MSG_NOT_FOUND_ID,
    MSG_NOT_PENDING,
    MSG_NOTHING_RUNNING,
    MSG_SUBMIT_VIA_CARD,
    MSG_UNAUTHORIZED,
    format_ambiguous,
    format_permission_request,
    sanitize_text,
)
from channelkit.core.types import (
    CancellationReason,
    ChannelPromptOwner,
    InboundMessage,
    LifecycleEvent,
    LifecycleToolCall,
    LifecycleType,
    OutputSegmentContext,
    SegmentEndReason,
    SessionTarget,
    SettlementReason,
    UserInputPresentationResult,
)
from channelkit.errors import ChannelBusy, ChannelClosed, ConfigurationError
from channelkit.runtime.clock import Clock, SystemClock
from channelkit.runtime.pool import ConcurrencyLimiter, WorkerPool
from channelkit.runtime.scheduler import Scheduler, TimerHandle
from channelkit.runtime.serial import KeyedSerialQueue

__all__ = ["COMMANDS", "ChannelBase", "ChannelBusy", "ChannelClosed", "parse_command"]

logger = logging.getLogger(__name__)

#: Commands ChannelBase handles itself (the text after ``/``).
COMMANDS = ("approve", "approve-always", "deny", "cancel")

CANCELLED_RESPONSE: Mapping[str, Any] = {"outcome": {"outcome": "cancelled"}}

_MAX_QUEUED_RUNS = 1000

RunKind = Literal["inbound", "loop", "webhook"]


def parse_command(text: str) -> tuple[str, str | None] | None:
    """``"/deny req-1"`` -> ``("deny", "req-1")``; None for anything else.

    Only :data:`COMMANDS` are recognized; ``/approve@bot`` is accepted as ``/approve``.
    """
    stripped = text.strip()
    if not stripped.startswith("/"):
        return None
    parts = stripped.split()
    name = parts[0][1:].split("@", 1)[0].lower()
    if name not in COMMANDS:
        return None
    return name, (parts[1] if len(parts) > 1 else None)


def _new_id() -> str:
    return uuid.uuid4().hex


def _selected(option_id: str) -> dict[str, Any]:
    return {"outcome": {"outcome": "selected", "optionId": option_id}}


class _CancelAttempt:
    __slots__ = ("decided", "result")

    def __init__(self) -> None:
        self.decided = threading.Event()
        self.result = False


class _Run:
    """One Channel-owned prompt execution (internal)."""

    __slots__ = (
        "cancel_attempt",
        "cancel_pending",
        "cancelled",
        "deferred",
        "delivery_started",
        "done",
        "held",
        "kind",
        "lane",
        "lock",
        "message_id",
        "owner",
        "prompting",
        "run_id",
        "segment",
        "session_id",
        "target",
        "terminal",
        "text",
    )

    def __init__(
        self,
        *,
        kind: RunKind,
        session_id: str,
        target: SessionTarget,
        owner: ChannelPromptOwner | None,
        message_id: str | None,
        text: str,
    ) -> None:
        self.kind = kind
        self.run_id = _new_id()
        self.session_id = session_id
        self.target = target
        self.owner = owner
        self.message_id = message_id
        self.text = text
        self.lane = ("run", self.run_id)
        self.lock = threading.Lock()
        self.segment: OutputSegmentContext | None = None
        self.held: list[str] = []
        self.cancel_attempt: _CancelAttempt | None = None
        self.cancel_pending = False
        self.deferred: list[tuple[_Pending, SettlementReason]] = []
        self.cancelled = False
        self.delivery_started = False
        self.prompting = False
        self.terminal = False
        self.done = False

    def is_cancelled(self) -> bool:
        return self.cancelled

    def past_cancel_point(self) -> bool:
        """Ended, or final delivery started: a cancel can no longer succeed."""
        return self.done or self.delivery_started or self.terminal

    @property
    def attended(self) -> bool:
        return self.kind == "inbound" and self.owner is not None

    def live_locked(self) -> bool:
        return not (self.done or self.cancelled or self.terminal)


class _Pending:
    """A pending permission request; settled exactly once (internal)."""

    __slots__ = (
        "channel",
        "chat_key",
        "context",
        "expires_at",
        "listeners",
        "lock",
        "request",
        "request_id",
        "respond_invoked",
        "response_future",
        "run",
        "session_id",
        "settled_reason",
        "target",
        "timer",
        "user_input_presented",
    )

    def __init__(
        self,
        channel: ChannelBase,
        request: PermissionRequest,
        target: SessionTarget,
        run: _Run | None,
    ) -> None:
        self.channel = channel
        self.request = request
        self.request_id = request.request_id
        self.session_id = request.session_id
        self.target = target
        self.run = run
        self.chat_key = (target.chat_id, target.thread_id or "")
        self.lock = threading.Lock()
        self.listeners: list[SettlementListener] = []
        self.settled_reason: SettlementReason | None = None
        self.response_future: Future[bool] | None = None
        self.respond_invoked = False
        self.user_input_presented = False
        self.context: UserInputRequestContext | None = None
        self.timer: TimerHandle | None = None
        self.expires_at = 0.0

    def respond(self, response: PermissionResponse) -> bool:
        return self.channel._respond(self, response)

    def subscribe(self, listener: SettlementListener) -> Callable[[], None]:
        with self.lock:
            reason = self.settled_reason
            if reason is None:
                self.listeners.append(listener)
        if reason is not None:
            self._call(listener, reason)
            return lambda: None

        def unsubscribe() -> None:
            with self.lock:
                if listener in self.listeners:
                    self.listeners.remove(listener)

        return unsubscribe

    def settle(self, reason: SettlementReason) -> bool:
        with self.lock:
            if self.settled_reason is not None:
                return False
            self.settled_reason = reason
            listeners = self.listeners
            self.listeners = []
            timer = self.timer
            self.timer = None
        if timer is not None:
            timer.cancel()
        for listener in listeners:
            self._call(listener, reason)
        return True

    def _call(self, listener: SettlementListener, reason: SettlementReason) -> None:
        try:
            listener(reason)
        except Exception as exc:
            logger.error(
                "[%s] user input settlement listener failed for request %s "
                "(session %s run %s): %s",
                self.channel.name,
                self.request_id,
                self.session_id,
                self.run.run_id if self.run is not None else None,
                exc,
                exc_info=True,
            )


class _RunSink:
    """The AgentEventSink handed to ``bridge.prompt`` for one run."""

    __slots__ = ("_channel", "_run")

    def __init__(self, channel: ChannelBase, run: _Run) -> None:
        self._channel = channel
        self._run = run

    def text_chunk(self, session_id: str, chunk: str) -> None:
        self._channel._on_chunk(self._run, session_id, chunk)

    def response_boundary(self, session_id: str) -> None:
        self._channel._on_boundary(self._run, session_id)

    def tool_call(self, event: ToolCallEvent) -> None:
        self._channel._on_tool_call(self._run, event)

    def permission_request(self, request: PermissionRequest) -> None:
        self._channel._dispatch_permission_request(request)

    def permission_resolved(self, event: PermissionResolved) -> None:
        self._channel._dispatch_permission_resolved(event)

    def session_died(self, event: SessionDied) -> None:
        self._channel._dispatch_session_died(event)


class _ChannelSink:
    """Session-routed sink for bridges that report events outside ``prompt``."""

    __slots__ = ("_channel",)

    def __init__(self, channel: ChannelBase) -> None:
        self._channel = channel

    def _run(self, session_id: str) -> _Run | None:
        with self._channel._lock:
            return self._channel._active.get(session_id)

    def text_chunk(self, session_id: str, chunk: str) -> None:
        run = self._run(session_id)
        if run is not None:
            self._channel._on_chunk(run, session_id, chunk)

    def response_boundary(self, session_id: str) -> None:
        run = self._run(session_id)
        if run is not None:
            self._channel._on_boundary(run, session_id)

    def tool_call(self, event: ToolCallEvent) -> None:
        run = self._run(event.session_id)
        if run is not None:
            self._channel._on_tool_call(run, event)

    def permission_request(self, request: PermissionRequest) -> None:
        self._channel._dispatch_permission_request(request)

    def permission_resolved(self, event: PermissionResolved) -> None:
        self._channel._dispatch_permission_resolved(event)

    def session_died(self, event: SessionDied) -> None:
        self._channel._dispatch_session_died(event)


class ChannelBase:
    """The platform-neutral channel: subclass it and override the hooks.

    ``ChannelBase(config, bridge, *, executor=None, scheduler=None, clock=None)``;
    ``executor`` is a :class:`WorkerPool` (created from ``config.max_workers`` when
    omitted), ``scheduler`` a :class:`Scheduler` (created on the pool and ``clock``
    when omitted). Resources it created are shut down by :meth:`close`.
    """

    def __init__(
        self,
        config: ChannelConfig,
        bridge: AgentBridge,
        *,
        executor: WorkerPool | None = None,
        scheduler: Scheduler | None = None,
        clock: Clock | None = None,
    ) -> None:
        if not isinstance(config, ChannelConfig):
            raise ConfigurationError("must be a ChannelConfig", path="config")
        if bridge is None:
            raise ConfigurationError("must be an AgentBridge", path="bridge")
        self.config = config
        self.name = config.name
        self._bridge = bridge
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
        self._run_limiter = ConcurrencyLimiter(self.pool, max_runs)
        self._session_queue = KeyedSerialQueue(self._run_limiter, name=f"[{config.name}] session")
        self.router = SessionRouter(config.name, config.scope, clock=clock)
        self._lock = threading.RLock()
        self._active: dict[str, _Run] = {}  # session id -> live run (<= max runs)
        self._queued: dict[str, tuple[_Run, Future[RunResult]]] = {}  # capped
        self._pending: dict[str, _Pending] = {}  # capped, insertion ordered
        self._pending_by_chat: dict[tuple[str, str], list[str]] = {}
        self._closed = False
        self._sink = _ChannelSink(self)

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
        to :meth:`on_response_boundary`."""
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
        """The text permission prompt for requests not presented natively."""
        return format_permission_request(request)

    def on_close(self) -> None:
        """Called by :meth:`close` after live runs were cancelled and pending requests
        settled, before the scheduler and pool stop. Finalize native presentations."""

    # =================================================================================
    # Entry points
    # =================================================================================

    @property
    def bridge(self) -> AgentBridge:
        return self._bridge

    @property
    def event_sink(self) -> _ChannelSink:
        """A session-routed AgentEventSink for events a bridge reports outside prompt."""
        return self._sink

    @property
    def closed(self) -> bool:
        return self._closed

    def handle_inbound(
        self, msg: InboundMessage, *, defer: list[Callable[[], None]] | None = None
    ) -> RunHandle | CommandHandle:
        """Entry point for a real human message; returns at once.

        /approve, /approve-always and /deny [request-id] are answered in memory here
        (the reply is sent on the pool); /cancel is authorized here and executed on the
        pool; any other text schedules an agent run owned by the sender.

        ``defer`` (web handlers): instead of handing work to the pool now, append quick
        callables that do so to this list, to be run after the platform ACK was written
        (``IngressResponse.after``). Validation, the closed check and the queue bound
        (:class:`ChannelBusy`) still raise here; the run's queue slot is reserved at
        once. A permission command is then answered by its deferred work too (its
        handle's ``reply`` stays None until ``result()``), so no settlement listener,
        responder or reply starts before the ACK. A deferred callable that is never run
        leaves its run queued: always run them.
        """
        self._validate_inbound(msg)
        self._check_open()
        target = SessionTarget(
            channel_name=self.name,
            sender_id=msg.sender_id,
            chat_id=msg.chat_id,
            thread_id=msg.thread_id,
            is_group=msg.is_group,
        )
        command = parse_command(msg.text)
        if command is not None:
            return self._handle_command(command[0], command[1], msg, target, defer)
        session_id = self.router.session_for(target)
        run = _Run(
            kind="inbound",
            session_id=session_id,
            target=target,
            owner=ChannelPromptOwner(msg.sender_id),
            message_id=msg.message_id,
            text=msg.text,
        )
        return self._enqueue(run, defer)

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
        with self._lock:
            run = self._active.get(session_id)
        if run is None or run.run_id != run_id:
            return False
        return self._cancel_run_obj(run, reason)

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
        with self._lock:
            run = self._active.get(session_id)
            return run.run_id if run is not None else None

    def target_for_session(self, session_id: str) -> SessionTarget | None:
        """The live run's target, else the session's last routed target."""
        with self._lock:
            run = self._active.get(session_id)
        return run.target if run is not None else self.router.target_for(session_id)

    def pending_request_ids(self, session_id: str | None = None) -> list[str]:
        """Live pending permission request ids (optionally of one session), oldest first."""
        with self._lock:
            return [
                rid
                for rid, p in self._pending.items()
                if session_id is None or p.session_id == session_id
            ]

    def set_bridge(self, bridge: AgentBridge) -> None:
        """Replace the bridge; every pending request settles ``cancelled`` (unanswered)."""
        with self._lock:
            self._bridge = bridge
            pendings = list(self._pending.values())
        for pending in pendings:
            self._remove_pending(pending, SettlementReason.CANCELLED)

    def wait_idle(self, timeout: float = 5.0) -> bool:
        """Wait until the pool has no queued or running task (tests; not from the pool)."""
        return self.pool.wait_idle(timeout)

    def close(self, timeout: float = 10.0) -> None:
        """Cancel live runs, settle pending requests ``run_cancelled``, call
        :meth:`on_close`, stop the scheduler and join the pool (each within
        ``timeout``). Idempotent. The bridge is not closed (its owner closes it)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            runs = list(self._active.values())
            queued = list(self._queued.values())
            self._queued.clear()
        for run, future in queued:
            run.cancelled = True
            if not future.done():
                future.set_result(RunResult(run.run_id, run.session_id, "cancelled"))
        for run in runs:
            try:
                self._cancel_run_obj(run, CancellationReason.SHUTDOWN)
            except Exception:
                logger.exception("[%s] cancelling run %s on close failed", self.name, run.run_id)
        with self._lock:
            pendings = list(self._pending.values())
        for pending in pendings:
            if self._remove_pending(pending, SettlementReason.RUN_CANCELLED):
                self._respond_bridge_cancelled(pending.request_id)
        try:
            self.on_close()
        except Exception:
            logger.exception("[%s] on_close failed", self.name)
        if self._owns_pool:
            self.pool.wait_idle(timeout)
        if self._owns_scheduler:
            self.scheduler.stop(timeout)
        if self._owns_pool:
            self.pool.shutdown(wait=True, timeout=timeout)

    def __enter__(self) -> ChannelBase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # =================================================================================
    # Runs
    # =================================================================================

    def _check_open(self) -> None:
        if self._closed:
            raise ChannelClosed(f"channel {self.name!r} is closed")

    def _validate_inbound(self, msg: InboundMessage) -> None:
        if not isinstance(msg, InboundMessage):
            raise ConfigurationError("must be an InboundMessage", path="msg")
        for name in ("chat_id", "sender_id"):
            value = getattr(msg, name)
            if not isinstance(value, str) or not value:
                raise ConfigurationError("must be a non-empty string", path=f"msg.{name}")
        if not isinstance(msg.text, str):
            raise ConfigurationError("must be a string", path="msg.text")
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
        run = _Run(
            kind=kind,
            session_id=sid,
            target=target,
            owner=None,
            message_id=message_id,
            text=text,
        )
        return self._enqueue(run)

    def _enqueue(self, run: _Run, defer: list[Callable[[], None]] | None = None) -> RunHandle:
        future: Future[RunResult] = Future()
        with self._lock:
            self._check_open()
            if len(self._queued) >= _MAX_QUEUED_RUNS:
                raise ChannelBusy(f"{_MAX_QUEUED_RUNS} runs already queued")
            self._queued[run.run_id] = (run, future)
        if defer is None:
            try:
                self._session_queue.post(run.session_id, self._execute, run, future)
            except Exception:
                with self._lock:
                    self._queued.pop(run.run_id, None)
                _resolve(future, RunResult(run.run_id, run.session_id, "cancelled"))
                raise
        else:
            defer.append(lambda: self._start_deferred(run, future))
        return RunHandle(run.run_id, run.session_id, future)

    def _start_deferred(self, run: _Run, future: Future[RunResult]) -> None:
        """Hand a run reserved by ``handle_inbound(defer=...)`` to its session queue."""
        with self._lock:
            closed = self._closed
            if closed:
                self._queued.pop(run.run_id, None)
        if closed:
            _resolve(future, RunResult(run.run_id, run.session_id, "cancelled"))
            return
        try:
            self._session_queue.post(run.session_id, self._execute, run, future)
        except Exception:
            with self._lock:
                self._queued.pop(run.run_id, None)
            _resolve(future, RunResult(run.run_id, run.session_id, "cancelled"))
            raise

    def _event(self, run: _Run, type_: LifecycleType, **fields: Any) -> LifecycleEvent:
        return LifecycleEvent(
            type_,
            self.name,
            run.target.chat_id,
            run.session_id,
            run.run_id,
            run.owner,
            run.message_id,
            thread_id=run.target.thread_id,
            **fields,
        )

    def _execute(self, run: _Run, future: Future[RunResult]) -> None:
        with self._lock:
            self._queued.pop(run.run_id, None)
            if self._closed or run.is_cancelled() or future.done():
                if not future.done():
                    future.set_result(RunResult(run.run_id, run.session_id, "cancelled"))
                return
            self._active[run.session_id] = run
            bridge = self._bridge
            with run.lock:  # started is on the lane before anything a canceller posts
                self.lanes.post(
                    run.lane, self._call_lifecycle, run, self._event(run, LifecycleType.STARTED)
                )
        status: Literal["completed", "failed", "cancelled"] = "failed"
        response = ""
        error: BaseException | None = None
        try:
            with run.lock:
                skip = run.cancelled  # cancelled before the prompt went out
                run.prompting = True
            raw = "" if skip else bridge.prompt(run.session_id, run.text, _RunSink(self, run))
            response = raw if isinstance(raw, str) else ("" if raw is None else str(raw))
            self._await_cancel_decision(run)
            with run.lock:
                cancelled = run.cancelled
                if not cancelled:
                    self._release_held_locked(run)
                    segment = None
                    if response:
                        run.delivery_started = True
                        segment = self._ensure_segment_locked(run)
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
                    if segment is not None and run.segment is segment:
                        run.segment = None  # delivered: closed silently
                    leftover = self._close_segment_locked(run)
                    if leftover is not None:
                        self._post_segment_end(run, leftover, SegmentEndReason.COMPLETED)
                    if not run.terminal:
                        run.terminal = True
                        self.lanes.post(
                            run.lane,
                            self._call_lifecycle,
                            run,
                            self._event(run, LifecycleType.COMPLETED),
                        )
                status = "completed"
        except Exception as exc:
            self._await_cancel_decision(run)
            with run.lock:
                cancelled = run.cancelled
                if not cancelled and not run.terminal:
                    self._release_held_locked(run)
                    segment = self._close_segment_locked(run)
                    if segment is not None:
                        self._post_segment_end(run, segment, SegmentEndReason.FAILED)
                    run.terminal = True
                    phase = "delivery" if run.delivery_started else "agent"
                    self.lanes.post(
                        run.lane,
                        self._call_lifecycle,
                        run,
                        self._event(
                            run,
                            LifecycleType.FAILED,
                            error=sanitize_text(str(exc) or type(exc).__name__, 200),
                            phase=phase,
                        ),
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
            with self._lock:
                if self._active.get(run.session_id) is run:
                    del self._active[run.session_id]
            with run.lock:
                run.done = True
                run.held = []
            result = RunResult(run.run_id, run.session_id, status, response, error)
            try:
                self.lanes.post(run.lane, _resolve, future, result)
            except Exception:
                _resolve(future, result)

    def _deliver_final(
        self, run: _Run, response: str, segment: OutputSegmentContext | None
    ) -> None:
        self.on_response_complete(run.target.chat_id, response, run.session_id, segment)

    def _await_cancel_decision(self, run: _Run) -> None:
        attempt = run.cancel_attempt
        if attempt is not None:
            attempt.decided.wait(self.config.cancel_timeout)

    # -- segments (callers hold run.lock) ---------------------------------------------

    def _ensure_segment_locked(self, run: _Run) -> OutputSegmentContext | None:
        if run.owner is None or run.kind != "inbound":
            return None
        segment = run.segment
        if segment is None:
            segment = OutputSegmentContext(
                self.name,
                run.session_id,
                run.run_id,
                _new_id(),
                run.owner,
                run.target,
                run.message_id,
            )
            run.segment = segment
        return segment

    def _close_segment_locked(self, run: _Run) -> OutputSegmentContext | None:
        segment = run.segment
        run.segment = None
        return segment

    def _post_segment_end(
        self, run: _Run, segment: OutputSegmentContext, reason: SegmentEndReason
    ) -> None:
        self.lanes.post(run.lane, self._call_segment_end, run, segment, reason)

    def _release_held_locked(self, run: _Run) -> None:
        if not run.held:
            return
        held = run.held
        run.held = []
        for chunk in held:
            self._post_chunk_locked(run, chunk)

    def _post_chunk_locked(self, run: _Run, chunk: str) -> None:
        segment = self._ensure_segment_locked(run)
        event = LifecycleEvent(
            LifecycleType.TEXT_CHUNK,
            self.name,
            run.target.chat_id,
            run.session_id,
            run.run_id,
            run.owner,
            run.message_id,
            chunk,
            thread_id=run.target.thread_id,
        )
        self.lanes.post(run.lane, self._call_chunk, run, event, chunk, segment)

    # -- sink handlers ----------------------------------------------------------------

    def _on_chunk(self, run: _Run, session_id: str, chunk: str) -> None:
        if not chunk or session_id != run.session_id:
            return
        with run.lock:
            if run.done or run.cancelled or run.terminal:
                return
            if run.cancel_pending:
                run.held.append(chunk)
                return
            if run.held:
                self._release_held_locked(run)
            self._post_chunk_locked(run, chunk)

    def _on_boundary(self, run: _Run, session_id: str) -> None:
        if session_id != run.session_id:
            return
        with run.lock:
            if not run.live_locked() or run.cancel_pending:
                return
            segment = self._close_segment_locked(run)
            if segment is not None:
                self._post_segment_end(run, segment, SegmentEndReason.RESPONSE_BOUNDARY)

    def _on_tool_call(self, run: _Run, event: ToolCallEvent) -> None:
        if event.session_id != run.session_id:
            return
        with run.lock:
            lifecycle: LifecycleEvent | None = None
            if run.live_locked() and not run.cancel_pending:
                lifecycle = self._event(
                    run,
                    LifecycleType.TOOL_CALL,
                    tool_call=LifecycleToolCall(
                        session_id=event.session_id,
                        tool_call_id=event.tool_call_id,
                        kind=sanitize_text(event.kind, 20),
                        title=sanitize_text(event.title, 80),
                        status=sanitize_text(event.status, 20),
                    ),
                )
            if run.done:
                return
            self.lanes.post(run.lane, self._call_tool_call, run, lifecycle, event)

    # -- hook callers (run on lanes; never raise) -------------------------------------

    def _hook_failed(self, hook: str, run: _Run, exc: BaseException, detail: str = "") -> None:
        logger.error(
            "[%s] %s threw%s for session %s run %s: %s",
            self.name,
            hook,
            detail,
            run.session_id,
            run.run_id,
            exc,
            exc_info=True,
        )

    def _call_lifecycle(self, run: _Run, event: LifecycleEvent) -> None:
        try:
            self.on_task_lifecycle(event)
        except Exception as exc:
            self._hook_failed("on_task_lifecycle", run, exc, f" for {event.type}")

    def _call_chunk(
        self, run: _Run, event: LifecycleEvent, chunk: str, segment: OutputSegmentContext | None
    ) -> None:
        try:
            self.on_task_lifecycle(event)
        except Exception as exc:
            self._hook_failed("on_task_lifecycle", run, exc, " for text_chunk")
        try:
            self.on_response_chunk(run.target.chat_id, chunk, run.session_id, segment)
        except Exception as exc:
            self._hook_failed("on_response_chunk", run, exc)

    def _call_segment_end(
        self, run: _Run, segment: OutputSegmentContext, reason: SegmentEndReason
    ) -> None:
        try:
            self.on_output_segment_end(run.target.chat_id, run.session_id, segment, reason)
        except Exception as exc:
            self._hook_failed("on_output_segment_end", run, exc, f" ({reason})")

    def _call_tool_call(
        self, run: _Run, lifecycle: LifecycleEvent | None, raw: ToolCallEvent
    ) -> None:
        if lifecycle is not None:
            self._call_lifecycle(run, lifecycle)
        try:
            self.on_tool_call(run.target.chat_id, raw)
        except Exception as exc:
            self._hook_failed("on_tool_call", run, exc)

    # =================================================================================
    # Cancellation
    # =================================================================================

    def _cancel_run_obj(self, run: _Run, reason: CancellationReason | str) -> bool:
        with run.lock:
            if run.cancelled:
                return True
            if run.past_cancel_point():
                return False
            if not run.prompting:
                # The prompt has not gone out yet: cancel locally, no RPC needed.
                run.cancelled = True
                run.held = []
                early = True
            else:
                early = False
        if early:
            self._finish_cancellation(run, reason)
            return True
        with run.lock:
            if run.is_cancelled():
                return True
            if run.past_cancel_point():
                return False
            attempt = run.cancel_attempt
            first = attempt is None
            if attempt is None:
                attempt = run.cancel_attempt = _CancelAttempt()
                run.cancel_pending = True
        if not first:
            attempt.decided.wait(self.config.cancel_timeout)
            return attempt.result
        try:
            try:
                ok = bool(self._bridge.cancel_session(run.session_id))
            except Exception as exc:
                logger.warning(
                    "[%s] cancel_session failed for session=%s: %s", self.name, run.session_id, exc
                )
                ok = False
            with run.lock:
                run.cancel_pending = False
                deferred = run.deferred
                run.deferred = []
                failed = not ok or run.past_cancel_point()
                if failed:
                    run.cancel_attempt = None
                    if not run.done:
                        self._release_held_locked(run)
                else:
                    run.cancelled = True
                    run.held = []
                    attempt.result = True
            if failed:
                # The cancel did not happen: apply resolutions that arrived meanwhile.
                for pending, pending_reason in deferred:
                    self._remove_pending(pending, pending_reason)
                return False
            self._finish_cancellation(run, reason)
            return True
        finally:
            attempt.decided.set()

    def _finish_cancellation(self, run: _Run, reason: CancellationReason | str) -> None:
        # Settlement first, so listeners see run_cancelled before any collapsed bridge
        # cancellation; then the run's single cancelled lifecycle event.
        self._remove_pending_for_session(run.session_id, SettlementReason.RUN_CANCELLED)
        with run.lock:
            if run.terminal:
                return
            run.terminal = True
            segment = self._close_segment_locked(run)
            if segment is not None:
                self._post_segment_end(run, segment, SegmentEndReason.CANCELLED)
            self.lanes.post(
                run.lane,
                self._call_lifecycle,
                run,
                self._event(run, LifecycleType.CANCELLED, reason=reason),
            )

    # =================================================================================
    # Permissions and user input
    # =================================================================================

    def _dispatch_permission_request(self, request: PermissionRequest) -> None:
        session_id = request.session_id
        evicted: list[_Pending] = []
        replaced: _Pending | None = None
        pending: _Pending | None = None
        with self._lock:
            run = self._active.get(session_id)
            target = run.target if run is not None else self.router.target_for(session_id)
            if not self._closed and target is not None and target.channel_name == self.name:
                pending = _Pending(self, request, target, run)
                replaced = self._pending.get(request.request_id)
                if replaced is not None:
                    self._unindex_locked(replaced)
                while len(self._pending) >= self.config.max_pending_permissions:
                    oldest = next(iter(self._pending.values()))
                    self._unindex_locked(oldest)
                    evicted.append(oldest)
                self._pending[request.request_id] = pending
                self._pending_by_chat.setdefault(pending.chat_key, []).append(request.request_id)
        if replaced is not None:
            replaced.settle(SettlementReason.CANCELLED)
        for old in evicted:
            old.settle(SettlementReason.CANCELLED)
            self._post_bridge_cancel(old.request_id)
        if pending is None:
            logger.info(
                "[%s] permission request %s for an unknown session; answering cancelled",
                self.name,
                request.request_id,
            )
            self._post_bridge_cancel(request.request_id)
            return
        lifetime = self.permission_lifetime()
        pending.expires_at = self.clock.now() + lifetime
        try:
            timer = self.scheduler.call_later(lifetime, self._expire_pending, pending)
        except Exception:
            timer = None
        if timer is not None:
            with pending.lock:
                if pending.settled_reason is None:
                    pending.timer = timer
                else:
                    timer.cancel()

        lane: tuple[str, str] = run.lane if run is not None else ("session", session_id)
        if run is not None and run.attended:
            normalized = normalize_user_questions(request.tool_call)
            submit = approval_option_id(request.options)
            if normalized.ok and submit is not None:
                assert run.owner is not None
                with run.lock:
                    if run.live_locked():
                        preceding = self._close_segment_locked(run)
                        context = UserInputRequestContext(
                            pending=pending,
                            channel_name=self.name,
                            request_id=request.request_id,
                            session_id=session_id,
                            run_id=run.run_id,
                            owner=run.owner,
                            target=run.target,
                            questions=normalized.questions,
                            submit_option_id=submit,
                            preceding_segment_id=preceding.segment_id if preceding else None,
                            message_id=run.message_id,
                            expires_at=pending.expires_at,
                        )
                        pending.context = context
                        pending.user_input_presented = True
                        self.lanes.post(lane, self._present, run, pending, context, preceding)
                        return
            elif normalized.kind == "malformed":
                logger.warning(
                    "[%s] malformed user question in request %s (%s): %s; using the text prompt",
                    self.name,
                    request.request_id,
                    normalized.source,
                    normalized.problem,
                )
        self.lanes.post(lane, self._send_permission_text, pending)

    def _present(
        self,
        run: _Run,
        pending: _Pending,
        context: UserInputRequestContext,
        preceding: OutputSegmentContext | None,
    ) -> None:
        if preceding is not None:
            self._call_segment_end(run, preceding, SegmentEndReason.INPUT_REQUESTED)
        if not self._is_current(pending):
            return
        try:
            raw_result: object = self.present_user_input_request(context)
            result = UserInputPresentationResult(raw_result)
        except Exception as exc:
            logger.error(
                "[%s] user input presentation failed for request %s (session %s run %s): %s",
                self.name,
                pending.request_id,
                run.session_id,
                run.run_id,
                exc,
                exc_info=True,
            )
            result = UserInputPresentationResult.UNSUPPORTED
        if not self._is_current(pending):
            return  # answered or settled meanwhile (e.g. /deny): nothing to fall back to
        if result is UserInputPresentationResult.PRESENTED:
            return
        if result is UserInputPresentationResult.HANDLED:
            if pending.respond_invoked:
                return
            logger.warning(
                "[%s] present_user_input_request returned handled without respond for "
                "request %s; sending the text prompt",
                self.name,
                pending.request_id,
            )
        pending.user_input_presented = False
        self._send_permission_text(pending)

    def _send_permission_text(self, pending: _Pending) -> None:
        if not self._is_current(pending):
            return
        target = pending.target
        try:
            text = self.format_permission_request(pending.request)
            self.send_message(target.chat_id, text, thread_id=target.thread_id)
        except Exception as exc:
            logger.error(
                "[%s] permission relay failed for request %s (session %s): %s",
                self.name,
                pending.request_id,
                pending.session_id,
                exc,
                exc_info=True,
            )
            if self._remove_pending(pending, SettlementReason.CANCELLED):
                self._respond_bridge_cancelled(pending.request_id)

    def _is_current(self, pending: _Pending) -> bool:
        with self._lock:
            return self._pending.get(pending.request_id) is pending

    def _respond(self, pending: _Pending, response: PermissionResponse) -> bool:
        """The one-shot responder: first call wins, everyone gets its result."""
        with pending.lock:
            pending.respond_invoked = True
            future = pending.response_future
            first = future is None
            if future is None:
                if pending.settled_reason is not None:
                    return False
                future = pending.response_future = Future()
        if not first:
            try:
                return future.result(timeout=self.config.respond_timeout)
            except concurrent.futures.TimeoutError:
                return False
        if not self._is_current(pending):
            future.set_result(False)
            return False
        try:
            ok = bool(self._bridge.respond_to_permission(pending.request_id, response))
        except Exception as exc:
            self._remove_pending(pending, SettlementReason.CANCELLED)
            future.set_exception(exc)
            raise
        outcome = response.get("outcome") if isinstance(response, Mapping) else None
        reason = self._classify(pending, outcome) if ok else SettlementReason.CANCELLED
        self._remove_pending(pending, reason)
        future.set_result(ok)
        return ok

    @staticmethod
    def _classify(pending: _Pending, outcome: object) -> SettlementReason:
        if isinstance(outcome, Mapping):
            kind = outcome.get("outcome")
            if kind == "cancelled":
                return SettlementReason.CANCELLED
            if kind == "selected":
                option_id = outcome.get("optionId")
                for option in pending.request.options:
                    if option.option_id == option_id:
                        if is_reject_option(option):
                            return SettlementReason.CANCELLED
                        break
                else:
                    if option_id == "cancel":
                        return SettlementReason.CANCELLED
        return SettlementReason.RESOLVED_OUTSIDE_PRESENTER

    def _unindex_locked(self, pending: _Pending) -> None:
        if self._pending.get(pending.request_id) is pending:
            del self._pending[pending.request_id]
        ids = self._pending_by_chat.get(pending.chat_key)
        if ids is not None:
            try:
                ids.remove(pending.request_id)
            except ValueError:
                pass
            if not ids:
                del self._pending_by_chat[pending.chat_key]

    def _remove_pending(self, pending: _Pending, reason: SettlementReason) -> bool:
        """Remove ``pending`` if still current and settle it; True if this call did."""
        with self._lock:
            if self._pending.get(pending.request_id) is not pending:
                return False
            self._unindex_locked(pending)
        pending.settle(reason)
        return True

    def _remove_pending_for_session(self, session_id: str, reason: SettlementReason) -> None:
        with self._lock:
            pendings = [p for p in self._pending.values() if p.session_id == session_id]
        for pending in pendings:
            self._remove_pending(pending, reason)

    def _expire_pending(self, pending: _Pending) -> None:
        if not self._is_current(pending):
            return
        logger.info("[%s] permission request %s expired", self.name, pending.request_id)
        try:
            self._respond(pending, CANCELLED_RESPONSE)
        except Exception as exc:
            logger.warning(
                "[%s] answering expired request %s failed: %s", self.name, pending.request_id, exc
            )

    def _respond_bridge_cancelled(self, request_id: str) -> None:
        try:
            self._bridge.respond_to_permission(request_id, CANCELLED_RESPONSE)
        except Exception as exc:
            logger.warning("[%s] cancelling request %s failed: %s", self.name, request_id, exc)

    def _post_bridge_cancel(self, request_id: str) -> None:
        try:
            self.pool.post(self._respond_bridge_cancelled, request_id)
        except Exception:
            self._respond_bridge_cancelled(request_id)

    def _dispatch_permission_resolved(self, event: PermissionResolved) -> None:
        with self._lock:
            pending = self._pending.get(event.request_id)
        if pending is None:
            return
        reason = self._classify(pending, event.outcome)
        run = pending.run  # captured at registration, never rediscovered
        if run is not None:
            with run.lock:
                if run.cancel_pending:
                    # A local run cancellation is in flight: the bridge's collapsed
                    # cancellation must not win over run_cancelled. Decide afterwards.
                    run.deferred.append((pending, reason))
                    return
                if run.cancelled and reason is SettlementReason.CANCELLED:
                    # The cancel already succeeded and its run_cancelled settlement is
                    # on its way (_finish_cancellation): the collapsed cancellation the
                    # bridge reports for it is that same cancellation.
                    reason = SettlementReason.RUN_CANCELLED
        self._remove_pending(pending, reason)

    def _dispatch_session_died(self, event: SessionDied) -> None:
        logger.info("[%s] session %s died: %s", self.name, event.session_id, event.reason)
        self._remove_pending_for_session(event.session_id, SettlementReason.CANCELLED)
        self.router.forget(event.session_id)

    # =================================================================================
    # Commands
    # =================================================================================

    def _handle_command(
        self,
        name: str,
        arg: str | None,
        msg: InboundMessage,
        target: SessionTarget,
        defer: list[Callable[[], None]] | None = None,
    ) -> CommandHandle:
        if name == "cancel":
            return self._cancel_command(msg, target, defer)
        if defer is not None:
            # answered after the ACK: settlement listeners queue card writes
            future = _later(
                defer,
                lambda: self.lanes.submit(
                    ("chat", target.chat_id, target.thread_id or ""),
                    self._answer_and_reply,
                    name,
                    arg,
                    msg,
                    target,
                ),
            )
            return CommandHandle(name, None, future)
        reply = self._permission_command(name, arg, msg)
        return CommandHandle(name, reply, self._send_reply(target, name, reply))

    def _answer_and_reply(
        self, name: str, arg: str | None, msg: InboundMessage, target: SessionTarget
    ) -> CommandResult:
        return self._deliver_reply(target, name, self._permission_command(name, arg, msg))

    def _send_reply(
        self,
        target: SessionTarget,
        command: str,
        reply: str,
        defer: list[Callable[[], None]] | None = None,
    ) -> Future[CommandResult]:
        def submit() -> Future[CommandResult]:
            return self.lanes.submit(
                ("chat", target.chat_id, target.thread_id or ""),
                self._deliver_reply,
                target,
                command,
                reply,
            )

        return submit() if defer is None else _later(defer, submit)

    def _deliver_reply(self, target: SessionTarget, command: str, reply: str) -> CommandResult:
        try:
            self.send_message(target.chat_id, reply, thread_id=target.thread_id)
        except Exception as exc:
            logger.error("[%s] sending the /%s reply failed: %s", self.name, command, exc)
            return CommandResult(command, reply, False)
        return CommandResult(command, reply, True)

    def _authorized(self, sender_id: str) -> bool:
        allowed = self.config.authorized_senders
        return not self.config.shared_sessions or allowed is None or sender_id in allowed

    def _can_answer(self, pending: _Pending, msg: InboundMessage) -> bool:
        if pending.target.chat_id != msg.chat_id:
            return False
        if (pending.target.thread_id or "") != (msg.thread_id or ""):
            return False
        if pending.user_input_presented and msg.sender_id != pending.target.sender_id:
            return False
        return self.config.shared_sessions or msg.sender_id == pending.target.sender_id

    def _permission_command(
        self, decision: str, request_id: str | None, msg: InboundMessage
    ) -> str:
        if not self._authorized(msg.sender_id):
            return MSG_UNAUTHORIZED
        with self._lock:
            if request_id:
                pending = self._pending.get(request_id)
                if pending is None or not self._can_answer(pending, msg):
                    return MSG_NOT_FOUND_ID
            else:
                ids = self._pending_by_chat.get((msg.chat_id, msg.thread_id or ""), [])
                candidates = [
                    self._pending[i]
                    for i in ids
                    if i in self._pending and self._can_answer(self._pending[i], msg)
                ]
                if not candidates:
                    return MSG_NONE
                if len(candidates) > 1:
                    return format_ambiguous(
                        decision, [(p.request_id, p.request.title) for p in candidates]
                    )
                pending = candidates[0]
        options = pending.request.options
        if decision == "approve":
            if pending.user_input_presented:
                return MSG_SUBMIT_VIA_CARD
            option_id = approval_option_id(options)
            if option_id is None:
                return MSG_NO_APPROVABLE
            response: Mapping[str, Any] = _selected(option_id)
            success = MSG_APPROVED
        elif decision == "approve-always":
            if pending.user_input_presented:
                return MSG_SUBMIT_VIA_CARD
            option_id = always_option_id(options)
            if option_id is None:
                return MSG_NO_ALWAYS
            response, success = _selected(option_id), MSG_APPROVED_ALWAYS
        else:
            option_id = reject_option_id(options)
            response = _selected(option_id) if option_id else CANCELLED_RESPONSE
            success = MSG_DENIED
        try:
            ok = self._respond(pending, response)
        except Exception as exc:
            logger.error(
                "[%s] answering permission request %s failed: %s",
                self.name,
                pending.request_id,
                exc,
            )
            return MSG_FAILED
        return success if ok else MSG_NOT_PENDING

    def _cancel_command(
        self,
        msg: InboundMessage,
        target: SessionTarget,
        defer: list[Callable[[], None]] | None = None,
    ) -> CommandHandle:
        if not self._authorized(msg.sender_id):
            reply = MSG_CANCEL_UNAUTHORIZED
            return CommandHandle("cancel", reply, self._send_reply(target, "cancel", reply, defer))
        session_id = self.router.session_for(target)
        with self._lock:
            run = self._active.get(session_id)
        if run is None:
            reply = MSG_NOTHING_RUNNING
            return CommandHandle("cancel", reply, self._send_reply(target, "cancel", reply, defer))

        def submit() -> Future[CommandResult]:
            return self.pool.submit(self._cancel_and_reply, run, target)

        future = submit() if defer is None else _later(defer, submit)
        return CommandHandle("cancel", None, future)

    def _cancel_and_reply(self, run: _Run, target: SessionTarget) -> CommandResult:
        try:
            ok = self._cancel_run_obj(run, CancellationReason.CANCEL_COMMAND)
        except Exception:
            logger.exception("[%s] /cancel failed for run %s", self.name, run.run_id)
            ok = False
        return self._deliver_reply(target, "cancel", MSG_CANCELLED if ok else MSG_CANCEL_FAILED)


def _resolve(future: Future[RunResult], result: RunResult) -> None:
    if not future.done():
        future.set_result(result)


_T = TypeVar("_T")


def _later(defer: list[Callable[[], None]], submit: Callable[[], Future[_T]]) -> Future[_T]:
    """A Future for work that ``submit()`` hands to the pool once ``defer`` runs."""
    proxy: Future[_T] = Future()

    def copy(inner: Future[_T]) -> None:
        if proxy.done():
            return
        error = inner.exception()
        if error is not None:
            proxy.set_exception(error)
        else:
            proxy.set_result(inner.result())

    def start() -> None:
        try:
            inner = submit()
        except BaseException as exc:
            if not proxy.done():
                proxy.set_exception(exc)
            raise
        inner.add_done_callback(copy)

    defer.append(start)
    return proxy

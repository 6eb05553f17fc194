"""Runs: one channel-owned prompt execution, its cancel attempt, and the run table.

A `Run` is created for every accepted prompt and lives until its result is
resolved. Its fields are guarded by ``run.lock``; the channel's state machine
(`channelkit.core.channel`) and the helpers it hands the run to are the only
writers.

`RunTable` owns the channel's runs: those admitted and not started yet, and the
live run of each session, with the one lock that guards them (and the pending-request
indexes of `PendingRequests`, which must
change atomically with them). The channel creates it and hands it explicitly to every
helper that looks a run up.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future
from typing import Literal

from channelkit.attachments.model import Attachment
from channelkit.core.admission import Ticket
from channelkit.core.handles import RunResult
from channelkit.core.types import ChannelPromptOwner, OutputSegmentContext, SessionTarget
from channelkit.errors import ChannelClosed
from channelkit.observability import hub, tracing

__all__ = ["CancelAttempt", "Run", "RunKind", "RunTable", "new_id"]

RunKind = Literal["inbound", "loop", "webhook"]


def new_id() -> str:
    """A fresh opaque id (run ids, segment ids)."""
    return uuid.uuid4().hex


class CancelAttempt:
    """The one bridge cancel in flight for a run; concurrent cancellers wait on it."""

    __slots__ = ("decided", "result")

    def __init__(self) -> None:
        self.decided = threading.Event()
        self.result = False


class Run:
    """One Channel-owned prompt execution (internal)."""

    __slots__ = (
        "attachments",
        "break_pending",
        "cancel_attempt",
        "cancel_pending",
        "cancelled",
        "closed_parts",
        "deferred",
        "delivery_started",
        "done",
        "ended_observed",
        "flush_texts",
        "flushed_chars",
        "future",
        "held",
        "kind",
        "lane",
        "lock",
        "message_id",
        "move_posted",
        "owner",
        "prompting",
        "queued_ahead",
        "raw_parts",
        "reacted_at",
        "received_at",
        "run_id",
        "segment",
        "session_id",
        "shown_parts",
        "started_at",
        "target",
        "terminal",
        "text",
        "ticket",
        "trace",
        "waiting",
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
        attachments: tuple[Attachment, ...] = (),
    ) -> None:
        self.kind = kind
        #: the person's attachments (announced; downloaded when the run starts)
        self.attachments = attachments
        self.run_id = new_id()
        self.session_id = session_id
        self.target = target
        self.owner = owner
        self.message_id = message_id
        self.text = text
        self.lane = ("run", self.run_id)
        self.lock = threading.Lock()
        self.segment: OutputSegmentContext | None = None
        self.held: list[str] = []
        self.cancel_attempt: CancelAttempt | None = None
        self.cancel_pending = False
        # settlements that arrived while a cancel was pending: applied if it fails
        self.deferred: list[Callable[[], object]] = []
        self.cancelled = False
        self.delivery_started = False
        self.prompting = False
        self.terminal = False
        self.done = False
        self.future: Future[RunResult] = Future()
        # the trace context it was created in (the inbound message's span), or None
        self.trace: object = tracing.current()
        self.ticket: Ticket | None = None  # its place in the channel's RunAdmission
        self.waiting = 0
        # its newest place in the queue, and whether a post carrying it is on its lane
        # (the moves of one run coalesce into that post; both under ``lock``)
        self.queued_ahead = 0
        self.move_posted = False
        self.break_pending = False  # a non-text event came after the last text
        self.raw_parts: list[str] = []  # text as the agent streamed it
        self.shown_parts: list[str] = []  # text as shown (paragraph breaks added)
        # text-only output (ChannelBase.text_only_output): the shown parts up to the last
        # closed segment, the characters of them already sent, and each closed segment's
        # text until its end hook ran (it is sent there)
        self.closed_parts = 0
        self.flushed_chars = 0
        self.flush_texts: dict[str, str] = {}
        # for metrics and logs (time.monotonic() readings, touched on the run's lane):
        # when the run was created (its message arrived), started, first showed
        # something; whether its end was reported
        self.received_at = time.monotonic()
        self.started_at: float | None = None
        self.reacted_at: float | None = None
        self.ended_observed = False

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


class RunTable:
    """The channel's queued and active runs and the lock that guards them.

    ``lock`` is reentrant; hold it for a check-then-act over the table (and the pending
    request indexes that share it). Queued runs are bounded by the channel's admission,
    active runs by one per session and the run pool.
    """

    def __init__(self, channel_name: str) -> None:
        self.channel_name = channel_name
        self.lock = threading.RLock()
        self._active: dict[str, Run] = {}  # session id -> live run
        self._queued: dict[str, Run] = {}  # run id -> admitted, not started
        self._closed = False

    @property
    def closed(self) -> bool:
        """True once `close()` ran: no run is queued any more."""
        with self.lock:
            return self._closed

    def check_open(self) -> None:
        """Raise `ChannelClosed` once the channel closed."""
        if self.closed:
            raise ChannelClosed(f"channel {self.channel_name!r} is closed")

    def queue(self, run: Run) -> None:
        """Record an admitted run; ChannelClosed once closed."""
        with self.lock:
            self.check_open()
            added = run.run_id not in self._queued
            self._queued[run.run_id] = run
        if added:
            hub.runs_queued(self.channel_name, 1)

    def unqueue(self, run: Run) -> None:
        """Forget a queued run (started, refused or dropped)."""
        with self.lock:
            removed = self._queued.pop(run.run_id, None) is not None
        if removed:
            hub.runs_queued(self.channel_name, -1)

    @property
    def queued_count(self) -> int:
        """Runs admitted and not started yet."""
        with self.lock:
            return len(self._queued)

    def activate(self, run: Run) -> None:
        """``run`` is its session's live run now."""
        with self.lock:
            self._active[run.session_id] = run

    def deactivate(self, run: Run) -> None:
        """``run`` ended: its session has no live run (unless another replaced it)."""
        with self.lock:
            if self._active.get(run.session_id) is run:
                del self._active[run.session_id]

    def active_run(self, session_id: str) -> Run | None:
        """The live run of ``session_id``, if any."""
        with self.lock:
            return self._active.get(session_id)

    def active_runs(self) -> list[Run]:
        """A snapshot of every session's live run."""
        with self.lock:
            return list(self._active.values())

    def queued_runs(self) -> list[Run]:
        """A snapshot of the runs admitted and not started yet, oldest first."""
        with self.lock:
            return list(self._queued.values())

    def close(self) -> list[Run] | None:
        """Mark the table closed and forget the queued runs; the live runs (to cancel),
        or None when it was closed already."""
        with self.lock:
            if self._closed:
                return None
            self._closed = True
            dropped = len(self._queued)
            self._queued.clear()
            active = list(self._active.values())
        hub.runs_queued(self.channel_name, -dropped)
        return active

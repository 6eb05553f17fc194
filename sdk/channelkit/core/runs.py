"""Runs: one channel-owned prompt execution, its cancel attempt, and the event sinks.

A :class:`Run` is created for every accepted prompt and lives until its result is
resolved. Its fields are guarded by ``run.lock``; the channel's state machine
(:mod:`channelkit.core.channel`) is the only writer. The sinks turn the agent bridge's
events into calls on the channel.
"""

from __future__ import annotations

import threading
import uuid
from concurrent.futures import Future
from typing import TYPE_CHECKING, Literal

from channelkit.agents.base import (
    PermissionRequest,
    PermissionResolved,
    PresentationEvent,
    SessionDied,
    ToolCallEvent,
)
from channelkit.core.admission import Ticket
from channelkit.core.handles import RunResult
from channelkit.core.types import (
    ChannelPromptOwner,
    OutputSegmentContext,
    SessionTarget,
    SettlementReason,
)

if TYPE_CHECKING:
    from channelkit.core.channel import ChannelBase
    from channelkit.core.pending import Pending

__all__ = ["CancelAttempt", "ChannelSink", "Run", "RunKind", "RunSink", "new_id"]

RunKind = Literal["inbound", "loop", "webhook"]


def new_id() -> str:
    return uuid.uuid4().hex


class CancelAttempt:
    __slots__ = ("decided", "result")

    def __init__(self) -> None:
        self.decided = threading.Event()
        self.result = False


class Run:
    """One Channel-owned prompt execution (internal)."""

    __slots__ = (
        "break_pending",
        "cancel_attempt",
        "cancel_pending",
        "cancelled",
        "deferred",
        "delivery_started",
        "done",
        "future",
        "held",
        "kind",
        "lane",
        "lock",
        "message_id",
        "owner",
        "prompting",
        "raw_parts",
        "run_id",
        "segment",
        "session_id",
        "shown_parts",
        "target",
        "terminal",
        "text",
        "ticket",
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
    ) -> None:
        self.kind = kind
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
        self.deferred: list[tuple[Pending, SettlementReason]] = []
        self.cancelled = False
        self.delivery_started = False
        self.prompting = False
        self.terminal = False
        self.done = False
        self.future: Future[RunResult] = Future()
        self.ticket: Ticket | None = None  # its place in the channel's RunAdmission
        self.waiting = 0
        self.break_pending = False  # a non-text event came after the last text
        self.raw_parts: list[str] = []  # text as the agent streamed it
        self.shown_parts: list[str] = []  # text as shown (paragraph breaks added)

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


class RunSink:
    """The AgentEventSink handed to ``bridge.prompt`` for one run."""

    __slots__ = ("_channel", "_run")

    def __init__(self, channel: ChannelBase, run: Run) -> None:
        self._channel = channel
        self._run = run

    def text_chunk(self, session_id: str, chunk: str) -> None:
        self._channel._events.on_chunk(self._run, session_id, chunk)

    def response_boundary(self, session_id: str) -> None:
        self._channel._events.on_boundary(self._run, session_id)

    def tool_call(self, event: ToolCallEvent) -> None:
        self._channel._events.on_tool_call(self._run, event)

    def permission_request(self, request: PermissionRequest) -> None:
        self._channel._requests.dispatch_request(request)

    def permission_resolved(self, event: PermissionResolved) -> None:
        self._channel._requests.dispatch_resolved(event)

    def session_died(self, event: SessionDied) -> None:
        self._channel._requests.dispatch_session_died(event)

    def presentation(self, event: PresentationEvent) -> None:
        self._channel._on_run_presentation(self._run, event)


class ChannelSink:
    """Session-routed sink for bridges that report events outside ``prompt``."""

    __slots__ = ("_channel",)

    def __init__(self, channel: ChannelBase) -> None:
        self._channel = channel

    def _run(self, session_id: str) -> Run | None:
        with self._channel._lock:
            return self._channel._active.get(session_id)

    def text_chunk(self, session_id: str, chunk: str) -> None:
        run = self._run(session_id)
        if run is not None:
            self._channel._events.on_chunk(run, session_id, chunk)

    def response_boundary(self, session_id: str) -> None:
        run = self._run(session_id)
        if run is not None:
            self._channel._events.on_boundary(run, session_id)

    def tool_call(self, event: ToolCallEvent) -> None:
        run = self._run(event.session_id)
        if run is not None:
            self._channel._events.on_tool_call(run, event)

    def permission_request(self, request: PermissionRequest) -> None:
        self._channel._requests.dispatch_request(request)

    def permission_resolved(self, event: PermissionResolved) -> None:
        self._channel._requests.dispatch_resolved(event)

    def session_died(self, event: SessionDied) -> None:
        self._channel._requests.dispatch_session_died(event)

    def presentation(self, event: PresentationEvent) -> None:
        run = self._run(event.session_id)
        if run is not None:
            self._channel._on_run_presentation(run, event)

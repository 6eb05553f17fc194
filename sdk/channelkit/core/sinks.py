"""The agent event sinks: where a bridge's events enter the channel.

`RunSink` is handed to ``bridge.prompt`` for one run; `ChannelSink` (the
channel's ``event_sink``) routes events a bridge reports outside ``prompt`` to the
session's live run through the `RunTable`. Both pass text,
boundaries, tool calls, presentations and files to `RunEvents`
and permission events to `PendingRequests`.
"""

from __future__ import annotations

from channelkit.agents.base import (
    FileEvent,
    PermissionRequest,
    PermissionResolved,
    PresentationEvent,
    SessionDied,
    ToolCallEvent,
)
from channelkit.core.permission_requests import PendingRequests
from channelkit.core.run_events import RunEvents
from channelkit.core.runs import Run, RunTable

__all__ = ["ChannelSink", "RunSink"]


class RunSink:
    """The AgentEventSink handed to ``bridge.prompt`` for one run."""

    __slots__ = ("_events", "_requests", "_run")

    def __init__(self, events: RunEvents, requests: PendingRequests, run: Run) -> None:
        self._events = events
        self._requests = requests
        self._run = run

    def text_chunk(self, session_id: str, chunk: str) -> None:
        self._events.on_chunk(self._run, session_id, chunk)

    def response_boundary(self, session_id: str) -> None:
        self._events.on_boundary(self._run, session_id)

    def tool_call(self, event: ToolCallEvent) -> None:
        self._events.on_tool_call(self._run, event)

    def permission_request(self, request: PermissionRequest) -> None:
        self._requests.dispatch_request(request)

    def permission_resolved(self, event: PermissionResolved) -> None:
        self._requests.dispatch_resolved(event)

    def session_died(self, event: SessionDied) -> None:
        self._requests.dispatch_session_died(event)

    def presentation(self, event: PresentationEvent) -> None:
        self._events.on_presentation(self._run, event)

    def file(self, event: FileEvent) -> None:
        """A file or image of the turn (``Turn.send_file``), ordered like a presentation."""
        self._events.on_file(self._run, event)


class ChannelSink:
    """Session-routed sink for bridges that report events outside ``prompt``."""

    __slots__ = ("_events", "_requests", "_table")

    def __init__(self, events: RunEvents, requests: PendingRequests, table: RunTable) -> None:
        self._events = events
        self._requests = requests
        self._table = table

    def text_chunk(self, session_id: str, chunk: str) -> None:
        run = self._table.active_run(session_id)
        if run is not None:
            self._events.on_chunk(run, session_id, chunk)

    def response_boundary(self, session_id: str) -> None:
        run = self._table.active_run(session_id)
        if run is not None:
            self._events.on_boundary(run, session_id)

    def tool_call(self, event: ToolCallEvent) -> None:
        run = self._table.active_run(event.session_id)
        if run is not None:
            self._events.on_tool_call(run, event)

    def permission_request(self, request: PermissionRequest) -> None:
        self._requests.dispatch_request(request)

    def permission_resolved(self, event: PermissionResolved) -> None:
        self._requests.dispatch_resolved(event)

    def session_died(self, event: SessionDied) -> None:
        self._requests.dispatch_session_died(event)

    def presentation(self, event: PresentationEvent) -> None:
        run = self._table.active_run(event.session_id)
        if run is not None:
            self._events.on_presentation(run, event)

    def file(self, event: FileEvent) -> None:
        """A file of the session's live run; refused when there is none."""
        run = self._table.active_run(event.session_id)
        if run is not None:
            self._events.on_file(run, event)
        elif not event.reply.done():
            from channelkit.errors import FileNotDelivered

            event.reply.set_exception(
                FileNotDelivered(name=event.file.name, reason="the session has no live run")
            )

"""The channel methods the core's helpers call: the adapter hooks and a few queries.

`ChannelHooks` is a structural protocol that `ChannelBase`
satisfies. The helpers a channel is built from (run events, pending requests, commands)
receive the channel as this protocol, so they call only its public methods (the hooks an
adapter overrides) and never depend on the channel's class or its private state.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from channelkit.agents.base import PermissionRequest, ToolCallEvent
from channelkit.core.types import (
    LifecycleEvent,
    OutputSegmentContext,
    RunQueuedEvent,
    SegmentEndReason,
    SessionTarget,
    UserInputPresentationResult,
)

if TYPE_CHECKING:
    from channelkit.core.approvals import PermissionRequestContext
    from channelkit.core.catalog import Messages
    from channelkit.core.context import UserInputRequestContext
    from channelkit.presentation.model import MessagePresentation, ReplyPayload

__all__ = ["ChannelHooks"]


class ChannelHooks(Protocol):
    """What the core's helpers call on the channel (see ``ChannelBase`` for each)."""

    @property
    def name(self) -> str:
        """The channel's name."""
        ...

    @property
    def text_only_output(self) -> bool:
        """True when the platform shows nothing while a segment runs (see ChannelBase)."""
        ...

    def send_message(self, chat_id: str, text: str, *, thread_id: str | None = None) -> None:
        """Send plain text to a chat (thread)."""
        ...

    def messages_for(self, person: str | None = None) -> Messages:
        """The catalog texts ``person`` reads (their language, else the channel's)."""
        ...

    def on_task_lifecycle(self, event: LifecycleEvent) -> None:
        """A lifecycle event of a run."""
        ...

    def on_response_chunk(
        self,
        chat_id: str,
        chunk: str,
        session_id: str,
        segment: OutputSegmentContext | None = None,
    ) -> None:
        """A visible text chunk."""
        ...

    def on_output_segment_end(
        self,
        chat_id: str,
        session_id: str,
        segment: OutputSegmentContext,
        reason: SegmentEndReason,
    ) -> None:
        """An output segment closed."""
        ...

    def on_tool_call(self, chat_id: str, event: ToolCallEvent) -> None:
        """A raw tool call event."""
        ...

    def on_run_queued(self, event: RunQueuedEvent) -> None:
        """A run waits for a slot (or its place moved)."""
        ...

    def on_run_rejected(self, target: SessionTarget, reason: str) -> None:
        """A person's message could not be queued."""
        ...

    def format_permission_request(self, request: PermissionRequest) -> str:
        """The text permission prompt."""
        ...

    def present_user_input_request(
        self, context: UserInputRequestContext
    ) -> UserInputPresentationResult:
        """Offer a structured question natively."""
        ...

    def present_permission_request(
        self, context: PermissionRequestContext
    ) -> UserInputPresentationResult:
        """Offer a tool permission's options as native buttons."""
        ...

    def permission_lifetime(self) -> float:
        """Seconds a new pending request stays answerable."""
        ...

    def await_run_output(self, run_id: str, timeout: float) -> None:
        """Wait (bounded) until the run's output so far is on the platform."""
        ...

    def send_presentation(
        self,
        target: SessionTarget | str,
        payload: ReplyPayload | MessagePresentation | Mapping[str, Any],
        *,
        thread_id: str | None = None,
        origin: SessionTarget | None = None,
        silent: bool = False,
    ) -> str | None:
        """Send a presentation to a conversation."""
        ...

"""The agent side of channelkit: the `AgentBridge` protocol and its event sink.

A bridge runs an agent turn synchronously on a pool worker (``prompt`` blocks until the
turn ends) and reports what happens during the turn to an `AgentEventSink`. Sink
methods may be called from any thread (the worker running ``prompt`` or a bridge's own
reader thread) and must return quickly; ``ChannelBase`` provides the sink.

Ordering contract shared by every bridge: ``response_boundary`` is emitted immediately
before every ``permission_request`` of a turn. A ``presentation`` event ends the current
output segment itself (the channel closes it, then delivers the presentation in order
with the turn's text); text after it opens a new segment.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from concurrent.futures import Future

    from channelkit.attachments.outbound import OutboundSource
    from channelkit.presentation.model import ReplyPayload

__all__ = [
    "AgentBridge",
    "AgentEventSink",
    "FileEvent",
    "PermissionOption",
    "PermissionRequest",
    "PermissionResolved",
    "PermissionResponse",
    "PresentationEvent",
    "SessionDied",
    "SteerableBridge",
    "ToolCallEvent",
]

#: A permission answer in the Agent Client Protocol shape, optionally with question
#: answers: ``{"outcome": {"outcome": "selected", "optionId": "proceed_once"},
#: "answers": {"0": "Blue"}}`` or ``{"outcome": {"outcome": "cancelled"}}``.
PermissionResponse = Mapping[str, Any]


@dataclass(frozen=True)
class ToolCallEvent:
    """A tool call the agent started or updated."""

    session_id: str
    tool_call_id: str
    kind: str = ""
    title: str = ""
    status: str = ""
    raw_input: Any = None


@dataclass(frozen=True)
class PermissionOption:
    """One answer the agent offers for a permission request (ACP ``PermissionOption``)."""

    option_id: str
    name: str
    kind: str | None = None  # allow_once | allow_always | reject_once | reject_always


@dataclass(frozen=True)
class PermissionRequest:
    """The agent asks before running a tool (or asks the user a structured question).

    ``tool_call`` is the ACP ``toolCall`` object as received (camelCase keys, including
    ``_meta`` with ``qwenInteractionKind`` / ``qwenQuestions`` / ``toolName`` and
    ``rawInput``); it is kept verbatim so semantic metadata is never lost.
    """

    request_id: str
    session_id: str
    tool_call: Mapping[str, Any]
    options: tuple[PermissionOption, ...] = field(default_factory=tuple)

    @property
    def title(self) -> str:
        title = self.tool_call.get("title")
        return title if isinstance(title, str) else ""


@dataclass(frozen=True)
class PermissionResolved:
    """A pending permission was answered by someone other than this channel."""

    request_id: str
    outcome: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class SessionDied:
    """The agent session (or its process) is gone; pending requests cannot be answered."""

    session_id: str
    reason: str = ""


@dataclass(frozen=True)
class PresentationEvent:
    """The agent presents a rich message (``Turn.present``) during a turn.

    ``payload`` is a validated `ReplyPayload`. ``chat_id``
    (and ``thread_id``) name another conversation of the same channel to send it to;
    None sends it to the turn's own conversation. A presentation sent elsewhere carries
    a context block naming the conversation it came from.
    """

    session_id: str
    payload: ReplyPayload
    chat_id: str | None = None
    thread_id: str | None = None


@dataclass(frozen=True)
class FileEvent:
    """The agent sends a file or an image (``Turn.send_file`` / ``Turn.send_image``).

    ``file`` was checked already (confined to the allowed root, or bytes); ``image``
    asks for an image message; ``caption`` is shown with it. The channel orders it
    after the turn's earlier output (like a presentation: the segment ends first) and
    completes ``reply`` with the platform's message id, or with a
    `FileNotDelivered` error. A sink without a ``file`` method cannot send files.
    """

    session_id: str
    file: OutboundSource
    reply: Future[str]
    image: bool = False
    caption: str | None = None


@runtime_checkable
class AgentEventSink(Protocol):
    """Receives a turn's events. Implementations are thread-safe and never block."""

    def text_chunk(self, session_id: str, chunk: str) -> None: ...

    def response_boundary(self, session_id: str) -> None: ...

    def tool_call(self, event: ToolCallEvent) -> None: ...

    def permission_request(self, request: PermissionRequest) -> None: ...

    def permission_resolved(self, event: PermissionResolved) -> None: ...

    def session_died(self, event: SessionDied) -> None: ...

    def presentation(self, event: PresentationEvent) -> None:
        """Deliver a presentation in order with the turn's text (ends the segment)."""
        ...


@runtime_checkable
class AgentBridge(Protocol):
    """What ``ChannelBase`` needs from an agent."""

    def prompt(self, session_id: str, text: str, sink: AgentEventSink) -> str:
        """Run one turn; block until it ends and return the turn's final response text.

        When the agent streamed, the return value is the concatenation of every chunk
        streamed during the turn (it may be ``""``). Raises on failure.
        """
        ...

    def cancel_session(self, session_id: str) -> bool:
        """Ask the agent to stop the session's current turn; True if the request went out."""
        ...

    def respond_to_permission(self, request_id: str, response: PermissionResponse) -> bool:
        """Answer a pending permission request; False when it is no longer pending."""
        ...

    def close(self) -> None:
        """Release processes and threads; pending requests end as cancelled."""
        ...


@runtime_checkable
class SteerableBridge(Protocol):
    """An optional bridge capability: hand a person's new text to the running turn.

    ``ChannelBase`` uses it in busy mode ``steer`` (``ChannelConfig.busy``): while a
    session's run is prompting, a new message of that session goes to
    ``steer(session_id, text)`` instead of waiting for the next turn. Return True only
    when the running turn took the text (it will read it); False (no running turn, the
    agent does not read steering, its inbox is full) makes the channel queue the message
    as a turn of its own, so nothing is lost. Called on a pool thread after the platform
    ACK; it must not block for long. ``FunctionAgent`` implements it (with
    ``steerable=True``); ``AcpBridge`` does not (ACP has no way to add to a running
    turn), so on ACP agents ``steer`` behaves as ``queue``.
    """

    def steer(self, session_id: str, text: str) -> bool:
        """Give ``text`` to the session's running turn; True when it was taken."""
        ...

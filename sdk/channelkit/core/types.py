"""Public value types of the channel interaction contract (docs/core.md).

Everything here is immutable and platform-neutral: no cards, no template ids, no
platform handles. The correlation chain is
``SessionTarget(chat_id/thread_id) -> session_id -> run_id -> segment_id/request_id``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any, NamedTuple

from channelkit.attachments.model import Attachment

__all__ = [
    "CancellationReason",
    "ChannelPromptOwner",
    "ChannelUserQuestion",
    "InboundMessage",
    "LifecycleEvent",
    "LifecycleToolCall",
    "LifecycleType",
    "OutputSegmentContext",
    "QuestionOption",
    "RunQueuedEvent",
    "SegmentEndReason",
    "SessionScope",
    "SessionTarget",
    "SettlementListener",
    "SettlementReason",
    "UserInputPresentationResult",
]


class _StrEnum(str, Enum):
    """A str-valued enum that formats as its value on every Python version."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, format_spec: str) -> str:
        return format(str(self.value), format_spec)


class SessionScope(_StrEnum):
    """How inbound messages map to agent sessions."""

    USER = "user"  #: one session per sender per chat
    CHAT = "chat"  #: one shared session per chat
    THREAD = "thread"  #: one shared session per chat thread (chat when no thread)


class LifecycleType(_StrEnum):
    STARTED = "started"
    TEXT_CHUNK = "text_chunk"
    TOOL_CALL = "tool_call"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def terminal(self) -> bool:
        return self in (LifecycleType.COMPLETED, LifecycleType.FAILED, LifecycleType.CANCELLED)


class SegmentEndReason(_StrEnum):
    """Why an output segment closed (``on_output_segment_end``)."""

    RESPONSE_BOUNDARY = "response_boundary"
    INPUT_REQUESTED = "input_requested"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


class SettlementReason(_StrEnum):
    """Why a pending user-input request settled (``on_settled`` listeners)."""

    #: answered through the context's ``respond`` (submit) or by another surface
    RESOLVED_OUTSIDE_PRESENTER = "resolved_outside_presenter"
    #: cancelled or rejected: user cancel, /deny, timeout, session death, bridge swap
    CANCELLED = "cancelled"
    #: the run that asked was cancelled locally (/cancel, Stop, close)
    RUN_CANCELLED = "run_cancelled"


#: A one-shot listener of a pending request's settlement (``on_settled``).
SettlementListener = Callable[[SettlementReason], None]


class CancellationReason(_StrEnum):
    """``reason`` of a ``cancelled`` lifecycle event."""

    CANCEL_COMMAND = "cancel_command"  #: /cancel or a Stop button (exact run)
    CLEAR = "clear"
    STEER = "steer"
    INTERRUPT = "interrupt"  #: a newer message in the same conversation (busy mode interrupt)
    TIMEOUT = "timeout"
    DROPPED = "dropped"
    SHUTDOWN = "shutdown"  #: ChannelBase.close()


class UserInputPresentationResult(_StrEnum):
    """What ``present_user_input_request`` did with the request."""

    #: a native input is live; the adapter will answer through ``context.respond``
    PRESENTED = "presented"
    #: the adapter already called ``context.respond`` before returning
    HANDLED = "handled"
    #: no native input; ChannelBase sends the text permission prompt
    UNSUPPORTED = "unsupported"


@dataclass(frozen=True)
class SessionTarget:
    """Where a session's messages go: the chat (and thread) plus the sender."""

    channel_name: str
    sender_id: str
    chat_id: str
    thread_id: str | None = None
    is_group: bool = False


@dataclass(frozen=True)
class ChannelPromptOwner:
    """The human channel user who started a run (``id`` is the sender id)."""

    id: str
    kind: str = "channel_user"


@dataclass(frozen=True)
class InboundMessage:
    """A real human message handed to `ChannelBase.handle_inbound()`.

    ``mentions_bot`` (group messages): True when the message addresses the bot (a
    structured mention of the bot, a reply to one of its messages, a command addressed
    to it), False when it does not (``@all`` / ``@everyone`` / ``@here`` never count),
    None when the ingress cannot tell (then the message counts as addressed).

    ``language`` (optional): the sender's language as their platform tells it (a tag
    such as ``"de"`` or ``"zh-hans"``, e.g. Telegram's ``language_code``); the texts
    the SDK shows this person are then in that language when the catalog has it
    (`ChannelBase.messages_for()`).

    ``attachments``: the files, images, voice and video the message carried, as the
    platform announced them (`Attachment`, in the order sent; empty by default). A
    message with attachments and no text still starts a run; the core downloads them
    on the run's worker (`ChannelBase.attachment_source()`), see docs/attachments.md.
    """

    channel_name: str
    chat_id: str
    sender_id: str
    text: str
    message_id: str | None = None
    thread_id: str | None = None
    is_group: bool = False
    sender_name: str | None = None
    mentions_bot: bool | None = None
    language: str | None = None
    attachments: tuple[Attachment, ...] = ()


@dataclass(frozen=True)
class LifecycleToolCall:
    """A sanitized tool call for lifecycle events: no raw input, bounded labels."""

    session_id: str
    tool_call_id: str
    kind: str
    title: str
    status: str


@dataclass(frozen=True)
class LifecycleEvent:
    """One task lifecycle event; every event of a run carries the run's ``run_id``.

    ``owner`` is set for attended (inbound) runs and None for loop/webhook runs.
    ``chunk`` is set for text_chunk (raw model text), ``tool_call`` for tool_call,
    ``reason`` for cancelled, ``error``/``phase`` ("agent" | "delivery") for failed.
    ``segment_failed`` (failed only): True when an output segment of the run was open
    and ended ``failed`` just before (its text shows the failure); False when no segment
    shows it (none was opened, or the last one ended at a response boundary, e.g. before
    a question the agent died waiting on): the adapter then tells the failure in the
    chat itself, once.
    """

    type: LifecycleType
    channel_name: str
    chat_id: str
    session_id: str
    run_id: str
    owner: ChannelPromptOwner | None = None
    message_id: str | None = None
    chunk: str | None = None
    tool_call: LifecycleToolCall | None = None
    reason: CancellationReason | str | None = None
    error: str | None = None
    phase: str | None = None
    thread_id: str | None = None
    segment_failed: bool = False


@dataclass(frozen=True)
class RunQueuedEvent:
    """A person's run waits for a free run slot: ``ahead`` queued runs are before it.

    ``first`` is True for the notice sent when the run was queued, False for the
    updates as it moves up."""

    channel_name: str
    chat_id: str
    session_id: str
    run_id: str
    owner: ChannelPromptOwner | None
    message_id: str | None
    ahead: int
    first: bool
    thread_id: str | None = None


@dataclass(frozen=True)
class OutputSegmentContext:
    """One contiguous run of visible assistant text inside a run."""

    channel_name: str
    session_id: str
    run_id: str
    segment_id: str
    owner: ChannelPromptOwner
    target: SessionTarget
    message_id: str | None = None


class QuestionOption(NamedTuple):
    """An option of a `ChannelUserQuestion` (a ``(label, description)`` pair)."""

    label: str
    description: str


@dataclass(frozen=True)
class ChannelUserQuestion:
    """A normalized structured question; answers are keyed by ``answer_key``."""

    answer_key: str
    header: str
    question: str
    options: tuple[QuestionOption, ...]
    multi_select: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "answerKey": self.answer_key,
            "header": self.header,
            "question": self.question,
            "options": [{"label": o.label, "description": o.description} for o in self.options],
            "multiSelect": self.multi_select,
        }

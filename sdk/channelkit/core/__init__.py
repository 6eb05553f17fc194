"""channelkit.core: the platform-neutral channel interaction contract.

``ChannelBase`` owns runs, owners, lifecycle events, lazy output segments, pending
permissions and their settlement, the semantic question normalizer and the permission
commands. It never mentions cards: adapters subclass it and override the hooks. See
``docs/core.md``.
"""

from channelkit.core.approvals import PermissionOutcome, PermissionRequestContext
from channelkit.core.channel import (
    COMMANDS,
    ChannelBase,
    ChannelBusy,
    ChannelClosed,
    parse_command,
)
from channelkit.core.config import ChannelConfig
from channelkit.core.context import UserInputRequestContext
from channelkit.core.handles import CommandHandle, CommandResult, RunHandle, RunResult
from channelkit.core.questions import (
    QuestionNormalization,
    always_option_id,
    approval_option_id,
    normalize_user_questions,
    reject_option_id,
)
from channelkit.core.sessions import SessionRouter
from channelkit.core.text import format_permission_request, sanitize_text
from channelkit.core.types import (
    CancellationReason,
    ChannelPromptOwner,
    ChannelUserQuestion,
    InboundMessage,
    LifecycleEvent,
    LifecycleToolCall,
    LifecycleType,
    OutputSegmentContext,
    QuestionOption,
    SegmentEndReason,
    SessionScope,
    SessionTarget,
    SettlementListener,
    SettlementReason,
    UserInputPresentationResult,
)

#: The settlement reasons as plain strings.
RESOLVED_OUTSIDE_PRESENTER = SettlementReason.RESOLVED_OUTSIDE_PRESENTER
CANCELLED = SettlementReason.CANCELLED
RUN_CANCELLED = SettlementReason.RUN_CANCELLED

__all__ = [
    "CANCELLED",
    "COMMANDS",
    "RESOLVED_OUTSIDE_PRESENTER",
    "RUN_CANCELLED",
    "CancellationReason",
    "ChannelBase",
    "ChannelBusy",
    "ChannelClosed",
    "ChannelConfig",
    "ChannelPromptOwner",
    "ChannelUserQuestion",
    "CommandHandle",
    "CommandResult",
    "InboundMessage",
    "LifecycleEvent",
    "LifecycleToolCall",
    "LifecycleType",
    "OutputSegmentContext",
    "PermissionOutcome",
    "PermissionRequestContext",
    "QuestionNormalization",
    "QuestionOption",
    "RunHandle",
    "RunResult",
    "SegmentEndReason",
    "SessionRouter",
    "SessionScope",
    "SessionTarget",
    "SettlementListener",
    "SettlementReason",
    "UserInputPresentationResult",
    "UserInputRequestContext",
    "always_option_id",
    "approval_option_id",
    "format_permission_request",
    "normalize_user_questions",
    "parse_command",
    "reject_option_id",
    "sanitize_text",
]

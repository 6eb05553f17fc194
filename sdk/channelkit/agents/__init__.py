"""Agents: the AgentBridge protocol, in-process function agents and the ACP bridge."""

from channelkit.agents.base import (
    AgentBridge,
    AgentEventSink,
    FileEvent,
    PermissionOption,
    PermissionRequest,
    PermissionResolved,
    PermissionResponse,
    PresentationEvent,
    SessionDied,
    ToolCallEvent,
)
from channelkit.agents.function import (
    FunctionAgent,
    PermissionDecision,
    Question,
    QuestionCancelled,
    QuestionError,
    QuestionExpired,
    Turn,
)

__all__ = [
    "AgentBridge",
    "AgentEventSink",
    "FileEvent",
    "FunctionAgent",
    "PermissionDecision",
    "PermissionOption",
    "PermissionRequest",
    "PermissionResolved",
    "PermissionResponse",
    "PresentationEvent",
    "Question",
    "QuestionCancelled",
    "QuestionError",
    "QuestionExpired",
    "SessionDied",
    "ToolCallEvent",
    "Turn",
]

"""Agents: the AgentBridge protocol, in-process function agents and the ACP bridge."""

from channelkit.agents.base import (
    AgentBridge,
    AgentEventSink,
    PermissionOption,
    PermissionRequest,
    PermissionResolved,
    PermissionResponse,
    SessionDied,
    ToolCallEvent,
)

__all__ = [
    "AgentBridge",
    "AgentEventSink",
    "PermissionOption",
    "PermissionRequest",
    "PermissionResolved",
    "PermissionResponse",
    "SessionDied",
    "ToolCallEvent",
]

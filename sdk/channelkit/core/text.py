"""Exact user-facing strings and the text permission prompt.

These are the plain-text behaviours every adapter inherits: the permission prompt for
requests not presented natively and the replies of the permission commands.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from channelkit.agents.base import PermissionRequest
from channelkit.core.questions import always_option_id, approval_option_id, is_reject_option

__all__ = [
    "MSG_ACCESS_DM_CLOSED",
    "MSG_ACCESS_NOT_ALLOWED",
    "MSG_ACCESS_PAIRING",
    "MSG_ADMIN_ONLY",
    "MSG_AMBIGUOUS",
    "MSG_APPROVED",
    "MSG_APPROVED_ALWAYS",
    "MSG_BUSY",
    "MSG_CANCELLED",
    "MSG_CANCEL_FAILED",
    "MSG_CANCEL_UNAUTHORIZED",
    "MSG_DENIED",
    "MSG_FAILED",
    "MSG_NONE",
    "MSG_NOTHING_RUNNING",
    "MSG_NOT_FOUND_ID",
    "MSG_NOT_PENDING",
    "MSG_NO_ALWAYS",
    "MSG_NO_APPROVABLE",
    "MSG_STORE_UNAVAILABLE",
    "MSG_SUBMIT_VIA_CARD",
    "MSG_UNAUTHORIZED",
    "format_ambiguous",
    "format_permission_request",
    "format_queued",
    "label_or",
    "parameter_summary",
    "sanitize_text",
]

MSG_UNAUTHORIZED = "Only authorized members can answer permission requests in this shared session."
MSG_NOT_FOUND_ID = "No pending permission request with that id for this chat."
MSG_NONE = "No pending permission request for this chat."
MSG_SUBMIT_VIA_CARD = (
    "Submit this question through its interactive card, or use /deny [request-id] to cancel it."
)
MSG_NO_APPROVABLE = "This permission request has no approvable option."
MSG_NO_ALWAYS = "This permission request has no always-allow option."
MSG_FAILED = "Failed to answer the permission request."
MSG_APPROVED = "Permission approved."
MSG_APPROVED_ALWAYS = "Permission approved always."
MSG_DENIED = "Permission denied."
MSG_NOT_PENDING = "Permission request is no longer pending."
MSG_CANCEL_UNAUTHORIZED = "Only authorized members can cancel requests in this shared session."
MSG_NOTHING_RUNNING = "No request is currently running."
MSG_CANCELLED = "Cancelled current request."
MSG_CANCEL_FAILED = "Failed to cancel current request."
MSG_LAST_UNCERTAIN = "Your previous answer may not have arrived: send /last to see it again."
MSG_NO_LAST_ANSWER = "There is no recent answer to send again."
#: Opens the commands block that ends a text permission prompt.
REPLY_WITH = "Reply with:"
MSG_ACCESS_NOT_ALLOWED = (
    "Sorry, you are not on this bot's list of people it answers. Ask its operator to add you."
)
MSG_ACCESS_DM_CLOSED = "This bot does not answer direct messages."
MSG_ACCESS_PAIRING = (
    "You are not paired with this bot yet. Your pairing code is {code}: ask the bot's "
    "operator to approve it (it expires in an hour)."
)
MSG_ADMIN_ONLY = "Only the bot's admins may use /{command}."
MSG_BUSY = "Busy right now: too many requests are waiting. Please try again in a minute."
MSG_QUEUED_NEXT = "Queued: your request starts as soon as a slot is free."
MSG_QUEUED_AHEAD = "Queued, {ahead} ahead: your request starts automatically."
MSG_AMBIGUOUS = (
    "Multiple permission requests are pending for this chat. Reply with /{decision} <request-id>."
)

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def sanitize_text(value: object, limit: int) -> str:
    """One-line, bounded text for logs and lifecycle labels.

    Newlines become a literal ``\\n``, other control characters are dropped, and text
    longer than ``limit`` characters is cut with a trailing ``…``.
    """
    text = "" if value is None else str(value)
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\n", "\\n")
    text = _CONTROL.sub("", text).strip()
    if len(text) > limit:
        text = text[:limit] + "…"
    return text


def label_or(value: object, fallback: str, limit: int = 80) -> str:
    """``value`` sanitized to at most ``limit`` characters, or ``fallback`` when it is
    not a string or nothing is left of it."""
    text = sanitize_text(value, limit) if isinstance(value, str) else ""
    return text or fallback


def parameter_summary(raw_input: object) -> str | None:
    """The names (never the values) of a tool call's first parameters with their shape,
    e.g. ``"command, paths (2 items)"``; None when ``raw_input`` is no mapping or empty."""
    if not isinstance(raw_input, Mapping) or not raw_input:
        return None
    parts: list[str] = []
    keys = list(raw_input.keys())
    for key in keys[:4]:
        name = sanitize_text(key, 40)
        if not name:
            continue
        value = raw_input[key]
        if isinstance(value, list | tuple):
            n = len(value)
            parts.append(f"{name} ({n} item{'' if n == 1 else 's'})")
        elif isinstance(value, Mapping):
            parts.append(f"{name} (object)")
        else:
            parts.append(name)
    if len(keys) > 4:
        parts.append(f"+{len(keys) - 4} more")
    return ", ".join(parts) if parts else "unknown"


def format_permission_request(request: PermissionRequest) -> str:
    """The text permission prompt (never includes raw parameter values)."""
    tool_call: Mapping[str, Any] = request.tool_call
    meta = tool_call.get("_meta")
    meta = meta if isinstance(meta, Mapping) else {}
    tool = label_or(meta.get("toolName"), "") or label_or(tool_call.get("kind"), "unknown", 40)
    lines = [
        "Permission required to run a tool",
        "",
        f"Tool: {tool}",
        f"Action: {label_or(tool_call.get('title'), 'Tool use')}",
    ]
    params = parameter_summary(tool_call.get("rawInput"))
    if params:
        lines.append(f"Parameters: {params}")
    options = list(request.options)
    approve_id = approval_option_id(options)
    approve = next((o for o in options if o.option_id == approve_id), None)
    always_id = always_option_id(options)
    always = next((o for o in options if o.option_id == always_id), None)
    reject = next((o for o in options if is_reject_option(o)), None)
    lines += ["", REPLY_WITH]
    lines.append(f"/approve        {label_or(approve.name if approve else None, 'allow once')}")
    if always is not None:
        lines.append(f"/approve-always {label_or(always.name, 'always allow')}")
    lines.append(f"/deny           {label_or(reject.name if reject else None, 'deny')}")
    return "\n".join(lines)


def without_reply_commands(prompt: str) -> str:
    """``prompt`` (a `format_permission_request()` text) without its closing
    "Reply with:" block of commands: what a settled prompt keeps of the request."""
    cut = prompt.rfind("\n\n" + REPLY_WITH)
    return prompt[:cut] if cut >= 0 else prompt


def format_ambiguous(decision: str, entries: list[tuple[str, str]]) -> str:
    """The reply listing request ids when a command matches several pending requests."""
    lines = [MSG_AMBIGUOUS.format(decision=decision)]
    for request_id, title in entries[:6]:
        lines.append(f"- {request_id}: {label_or(title, 'Tool use')}")
    return "\n".join(lines)


def format_queued(ahead: int) -> str:
    """The queue notice for a run with ``ahead`` queued runs before it."""
    return MSG_QUEUED_AHEAD.format(ahead=ahead) if ahead > 0 else MSG_QUEUED_NEXT


#: Told once per person per outage when the shared state store (Redis) cannot be reached
#: and their message, Stop or form submit could not be handled.
MSG_STORE_UNAVAILABLE = (
    "The bot is temporarily unavailable and could not handle that. Please try again in a "
    "few minutes."
)

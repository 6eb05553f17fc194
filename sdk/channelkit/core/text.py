"""Exact user-facing strings and the text permission prompt.

These are the plain-text behaviours every adapter inherits: the permission prompt for
requests not presented natively and the replies of the permission commands.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from channelkit.agents.base import PermissionRequest
from channelkit.core.catalog import LOCALES, Messages, en, messages
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

MSG_UNAUTHORIZED = en("command.unauthorized")
MSG_NOT_FOUND_ID = en("command.not_found_id")
MSG_NONE = en("command.none")
MSG_SUBMIT_VIA_CARD = en("command.submit_via_card")
MSG_NO_APPROVABLE = en("command.no_approvable")
MSG_NO_ALWAYS = en("command.no_always")
MSG_FAILED = en("command.failed")
MSG_APPROVED = en("command.approved")
MSG_APPROVED_ALWAYS = en("command.approved_always")
MSG_DENIED = en("command.denied")
MSG_NOT_PENDING = en("command.not_pending")
MSG_CANCEL_UNAUTHORIZED = en("command.cancel_unauthorized")
MSG_NOTHING_RUNNING = en("command.nothing_running")
MSG_CANCELLED = en("command.cancelled")
MSG_CANCEL_FAILED = en("command.cancel_failed")
MSG_LAST_UNCERTAIN = en("notice.last_uncertain")
MSG_NO_LAST_ANSWER = en("command.no_last_answer")
#: Opens the commands block that ends a text permission prompt.
REPLY_WITH = en("prompt.reply_with")
MSG_ACCESS_NOT_ALLOWED = en("access.not_allowed")
MSG_ACCESS_DM_CLOSED = en("access.dm_closed")
MSG_ACCESS_PAIRING = en("access.pairing")
MSG_ADMIN_ONLY = en("access.admin_only")
#: An attachment over the size cap ({name}, {limit}), and one refused or failed ({name}).
MSG_ATTACHMENT_TOO_LARGE = en("attachment.too_large")
MSG_ATTACHMENT_NOT_RECEIVED = en("attachment.not_received")
#: An agent's file the platform did not take ({name}, {reason}): the text fallback.
MSG_ATTACHMENT_NOT_SENT = en("attachment.not_sent")
MSG_BUSY = en("notice.busy")
MSG_QUEUED_NEXT = en("queue.next")
MSG_QUEUED_AHEAD = en("queue.ahead")
MSG_AMBIGUOUS = en("command.ambiguous")

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


def format_permission_request(request: PermissionRequest, texts: Messages | None = None) -> str:
    """The text permission prompt (never includes raw parameter values), in the locale
    of ``texts`` (default English)."""
    m = texts or messages()
    tool_call: Mapping[str, Any] = request.tool_call
    meta = tool_call.get("_meta")
    meta = meta if isinstance(meta, Mapping) else {}
    tool = label_or(meta.get("toolName"), "") or label_or(
        tool_call.get("kind"), m.get("prompt.unknown_tool"), 40
    )
    lines = [
        m.get("prompt.title"),
        "",
        m.get("prompt.tool", tool=tool),
        m.get("prompt.action", action=label_or(tool_call.get("title"), m.get("prompt.tool_use"))),
    ]
    params = parameter_summary(tool_call.get("rawInput"))
    if params:
        lines.append(m.get("prompt.parameters", params=params))
    options = list(request.options)
    approve_id = approval_option_id(options)
    approve = next((o for o in options if o.option_id == approve_id), None)
    always_id = always_option_id(options)
    always = next((o for o in options if o.option_id == always_id), None)
    reject = next((o for o in options if is_reject_option(o)), None)
    lines += ["", m.text(REPLY_WITH)]
    approve_label = label_or(approve.name if approve else None, m.get("prompt.allow_once"))
    lines.append(f"/approve        {approve_label}")
    if always is not None:
        lines.append(f"/approve-always {label_or(always.name, m.get('prompt.always_allow'))}")
    lines.append(
        f"/deny           {label_or(reject.name if reject else None, m.get('prompt.deny'))}"
    )
    return "\n".join(lines)


def without_reply_commands(prompt: str) -> str:
    """``prompt`` (a `format_permission_request()` text, in any catalog locale) without
    its closing "Reply with:" block of commands: what a settled prompt keeps of the
    request."""
    cut = max(prompt.rfind("\n\n" + messages(locale).text(REPLY_WITH)) for locale in LOCALES)
    return prompt[:cut] if cut >= 0 else prompt


def format_ambiguous(
    decision: str, entries: list[tuple[str, str]], texts: Messages | None = None
) -> str:
    """The reply listing request ids when a command matches several pending requests
    (in the locale of ``texts``, default English)."""
    m = texts or messages()
    lines = [m.text(MSG_AMBIGUOUS, decision=decision)]
    for request_id, title in entries[:6]:
        lines.append(f"- {request_id}: {label_or(title, m.get('prompt.tool_use'))}")
    return "\n".join(lines)


def format_queued(ahead: int, texts: Messages | None = None) -> str:
    """The queue notice for a run with ``ahead`` queued runs before it (in the locale
    of ``texts``, default English)."""
    m = texts or messages()
    return m.text(MSG_QUEUED_AHEAD, ahead=ahead) if ahead > 0 else m.text(MSG_QUEUED_NEXT)


#: Told once per person per outage when the shared state store (Redis) cannot be reached
#: and their message, Stop or form submit could not be handled.
MSG_STORE_UNAVAILABLE = en("notice.store_unavailable")

# -- /new, /status and /stop all (channelkit.core.operator_commands) ---------------------
MSG_NEW_SESSION = en("operator.new_session")
MSG_NEW_BUSY = en("operator.new_busy")
MSG_NEW_UNAUTHORIZED = en("operator.new_unauthorized")
#: ``/status`` for the caller's own conversation and, for an admin, the whole chat.
MSG_STATUS_OWN = en("operator.status_own")
MSG_STATUS_CHAT = en("operator.status_chat")
MSG_STATUS = en("operator.status")
MSG_STATUS_IDLE = en("operator.status_idle")
MSG_STATUS_RUN = en("operator.status_run")
MSG_STATUS_YOU = en("operator.status_you")
MSG_STATUS_TASK = en("operator.status_task")
MSG_STATUS_MORE = en("operator.status_more")
MSG_STOP_ALL = en("operator.stop_all")
MSG_STOP_ALL_NOT_STOPPED = en("operator.stop_all_not_stopped")
MSG_STOP_ALL_NOTHING = en("operator.stop_all_nothing")
MSG_STOP_USAGE = en("operator.stop_usage")
#: A queue notice whose request was dropped before it started (``/stop all``).
MSG_QUEUE_DROPPED = en("queue.dropped")

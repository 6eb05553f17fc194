"""Native approval buttons for ordinary tool permission requests.

An ordinary permission request (run a shell command, write a file: a
`PermissionRequest` whose tool call is *not* a structured
user question) of an attended run is offered to the adapter hook
`PermissionHooks.present_permission_request()` with a
`PermissionRequestContext`. The hook returns a
`UserInputPresentationResult`:

* ``PRESENTED`` - the adapter shows the agent's own options as buttons;
* ``HANDLED`` - the adapter already answered through ``context.respond`` (without an
  answer the text prompt is sent after all);
* ``UNSUPPORTED`` (the default) - today's text prompt (``/approve``,
  ``/approve-always``, ``/deny``).

``/approve``, ``/approve-always`` and ``/deny`` keep working while buttons are shown:
buttons and commands answer through the same one-shot responder, so exactly one of them
wins and `PermissionRequestContext.outcome()` tells every surface what won.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from channelkit.agents.base import PermissionOption, PermissionResponse
from channelkit.core.catalog import Messages, messages
from channelkit.core.text import label_or, parameter_summary
from channelkit.core.types import (
    ChannelPromptOwner,
    SessionTarget,
    SettlementListener,
    SettlementReason,
    UserInputPresentationResult,
)

if TYPE_CHECKING:
    from channelkit.core.pending import Pending

__all__ = [
    "PermissionHooks",
    "PermissionOutcome",
    "PermissionRequestContext",
    "describe_outcome",
    "describe_tool_call",
    "overrides_permission_hook",
]

#: The visible end state of a permission request.
OutcomeKind = Literal["selected", "cancelled", "expired", "run_cancelled"]


@dataclass(frozen=True)
class PermissionOutcome:
    """How a permission request ended, whichever surface won.

    ``kind`` is ``selected`` (``option`` is the agent's option that was chosen, by a
    button, a command or another client; ``option`` is None when the agent was answered
    elsewhere with an id it did not offer), ``cancelled`` (answered cancelled: a
    ``/deny`` without a reject option, a failed answer, the session died),
    ``expired`` (the permission lifetime ran out) or ``run_cancelled`` (the run was
    cancelled while it waited).
    """

    kind: OutcomeKind
    option: PermissionOption | None = None

    @property
    def allowed(self) -> bool:
        """True when the chosen option is an allow option."""
        kind = self.option.kind if self.option is not None else None
        return self.kind == "selected" and bool(kind) and str(kind).startswith("allow")


def describe_outcome(outcome: PermissionOutcome | None, texts: Messages | None = None) -> str:
    """A short visible end state for a card or keyboard: ``"✅ Allow"``, ``"❌ Reject"``,
    ``"✖️ Cancelled"``, ``"⌛ Expired"`` (``"Answered"`` while unknown); the SDK's own
    words in the locale of ``texts`` (default English), an option's name as the agent
    gave it."""
    m = texts or messages()
    if outcome is None:
        return m.get("approval.answered")
    if outcome.kind == "expired":
        return m.get("label.expired")
    if outcome.kind != "selected":
        return m.get("label.cancelled")
    if outcome.option is None:
        return m.get("approval.answered_elsewhere")
    kind = str(outcome.option.kind or "")
    mark = "❌" if kind.startswith("reject") or outcome.option.option_id == "cancel" else "✅"
    return f"{mark} {label_or(outcome.option.name, outcome.option.option_id)}"


def describe_tool_call(tool_call: Mapping[str, Any]) -> tuple[str, str]:
    """``(title, explanation)`` of a tool call, for a card; never raw parameter values.

    The explanation is the tool call's own text content when the agent sent one, else the
    tool name and the names of its parameters.
    """
    title = label_or(tool_call.get("title"), "Tool use", 200)
    texts: list[str] = []
    content = tool_call.get("content")
    if isinstance(content, list):
        for item in content:
            inner = item.get("content") if isinstance(item, Mapping) else None
            if isinstance(inner, Mapping) and inner.get("type") == "text":
                text = inner.get("text")
                if isinstance(text, str) and text.strip():
                    texts.append(text.strip())
    if texts:
        explanation = "\n".join(texts)
        return title, explanation if len(explanation) <= 1000 else explanation[:999] + "…"
    meta = tool_call.get("_meta")
    meta = meta if isinstance(meta, Mapping) else {}
    tool = label_or(meta.get("toolName"), "") or label_or(tool_call.get("kind"), "unknown", 40)
    lines = [f"Tool: {tool}"]
    params = parameter_summary(tool_call.get("rawInput"))
    if params:
        lines.append(f"Parameters: {params}")
    return title, "\n".join(lines)


class PermissionRequestContext:
    """An ordinary tool permission request the adapter may present as buttons.

    Captured once: ``request_id``, ``session_id``, ``run_id``, ``owner`` and ``target``
    say exactly who is asked and where (only ``owner`` may press the buttons).
    ``options`` are the agent's own options, in its order (``option_id``, ``name``,
    ``kind``: ``allow_once``, ``allow_always``, ``reject_once``, ``reject_always`` or
    anything else the agent offers, such as a mode switch). ``title`` and
    ``explanation`` describe the tool call (`describe_tool_call()`); ``tool_call`` is
    the raw ACP tool call and ``request`` the whole request (for
    `ChannelBase.format_permission_request()`). ``preceding_segment_id`` is the
    output segment closed (reason input_requested) to make room for the buttons, if any.
    ``expires_at`` is the request's deadline on the channel clock: ChannelBase answers it
    cancelled then, and `outcome()` says ``expired``.

    ``respond(response)`` / ``select(option_id)`` answer the request: one-shot (True for
    exactly one caller across buttons and ``/approve`` / ``/deny``; every other caller
    gets False at once). They block for the bridge call: call them on a pool thread.
    ``on_settled(listener)`` subscribes a one-shot settlement listener (immediately if
    already settled); in it, `outcome()` tells what won.
    """

    __slots__ = (
        "_pending",
        "channel_name",
        "expires_at",
        "explanation",
        "message_id",
        "options",
        "owner",
        "preceding_segment_id",
        "request",
        "request_id",
        "run_id",
        "session_id",
        "target",
        "title",
        "tool_call",
    )

    def __init__(
        self,
        *,
        pending: Pending,
        channel_name: str,
        run_id: str,
        owner: ChannelPromptOwner,
        target: SessionTarget,
        preceding_segment_id: str | None,
        message_id: str | None,
        expires_at: float = float("inf"),
    ) -> None:
        request = pending.request
        self._pending = pending
        self.request = request
        self.channel_name = channel_name
        self.request_id = request.request_id
        self.session_id = request.session_id
        self.run_id = run_id
        self.owner = owner
        self.target = target
        self.options: tuple[PermissionOption, ...] = tuple(request.options)
        self.tool_call: Mapping[str, Any] = request.tool_call
        self.title, self.explanation = describe_tool_call(request.tool_call)
        self.preceding_segment_id = preceding_segment_id
        self.message_id = message_id
        self.expires_at = expires_at

    def respond(self, response: PermissionResponse) -> bool:
        """Answer the original request (one-shot); True when the agent accepted it."""
        return self._pending.respond(response)

    def select(self, option_id: str) -> bool:
        """Answer with one of the agent's options (one-shot); see `respond()`."""
        return self.respond({"outcome": {"outcome": "selected", "optionId": option_id}})

    def on_settled(self, listener: SettlementListener) -> Callable[[], None]:
        """Subscribe to settlement; returns an unsubscribe function."""
        return self._pending.subscribe(listener)

    def outcome(self) -> PermissionOutcome | None:
        """How the request ended (None while it is live); see `PermissionOutcome`."""
        pending = self._pending
        with pending.lock:
            reason = pending.settled_reason
            answer = pending.answer
            expired = pending.expired
        if reason is None:
            return None
        if reason is SettlementReason.RUN_CANCELLED:
            return PermissionOutcome("run_cancelled")
        outcome = answer.get("outcome") if isinstance(answer, Mapping) else None
        if isinstance(outcome, Mapping) and outcome.get("outcome") == "selected":
            option_id = outcome.get("optionId")
            chosen = next((o for o in self.options if o.option_id == option_id), None)
            return PermissionOutcome("selected", chosen)
        return PermissionOutcome("expired" if expired else "cancelled")


class PermissionHooks:
    """The adapter hook for ordinary permission requests (mixed into ChannelBase)."""

    def present_permission_request(
        self, context: PermissionRequestContext
    ) -> UserInputPresentationResult:
        """Offer the agent's options as native buttons. Default: UNSUPPORTED (text prompt).

        Called on the run's lane, never on a web thread. Only the run owner may answer;
        keep the buttons one-shot and end them in `PermissionRequestContext.outcome()`
        from an ``on_settled`` listener (that covers buttons, commands and expiry alike).
        """
        return UserInputPresentationResult.UNSUPPORTED


def overrides_permission_hook(channel: object) -> bool:
    """True when ``channel``'s class overrides `present_permission_request()`."""
    hook = getattr(type(channel), "present_permission_request", None)
    return hook is not None and hook is not PermissionHooks.present_permission_request

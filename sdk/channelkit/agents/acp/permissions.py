"""ACP permission requests as channelkit `PermissionRequest`.

``session/request_permission`` carries the agent's ``toolCall`` (kept verbatim, ``_meta``
included: that is where an ``ask_user_question`` tool puts its questions) and its
``options``. The answer goes back as the JSON-RPC result: ``outcome`` plus, for
questions, ``answers`` keyed by question index. This module parses the request, checks
the answer, and keeps the table of requests waiting for one, with their expiry.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from channelkit.agents.base import (
    AgentEventSink,
    PermissionOption,
    PermissionRequest,
    PermissionResponse,
)
from channelkit.errors import ConfigurationError

#: The outcome of a permission answered without a choice (timeout, cancel, death).
CANCELLED: Mapping[str, Any] = {"outcome": "cancelled"}
MAX_PENDING_PERMISSIONS = 1000


class TimerHandle(Protocol):
    """What a scheduler's ``call_later`` returns."""

    def cancel(self) -> Any: ...


class Scheduler(Protocol):
    """Anything with ``call_later(delay, fn) -> handle`` (e.g. ``channelkit.runtime.Scheduler``)."""

    def call_later(self, delay: float, fn: Callable[[], None], /) -> TimerHandle: ...


@dataclass
class Permission:
    """A permission request the agent is waiting on."""

    request_id: str
    rpc_id: Any
    session_id: str
    acp_session_id: str
    sink: AgentEventSink
    deadline: float
    timer: TimerHandle | None = None
    scheduled: bool = False  # a scheduler owns the expiry timer

    def cancel_timer(self) -> None:
        """Cancel the expiry timer, if a scheduler holds one (at most once)."""
        timer, self.timer = self.timer, None
        if timer is not None:
            with contextlib.suppress(Exception):
                timer.cancel()

    def to_request(
        self, tool_call: Mapping[str, Any], options: tuple[PermissionOption, ...]
    ) -> PermissionRequest:
        """The channelkit event announcing this request."""
        return PermissionRequest(
            request_id=self.request_id,
            session_id=self.session_id,
            tool_call=tool_call,
            options=options,
        )


def parse_params(
    params: Any,
) -> tuple[str, Mapping[str, Any], tuple[PermissionOption, ...]] | str:
    """``(acp_session_id, tool_call, options)`` of a ``session/request_permission``, or
    the reason the params are invalid."""
    if not isinstance(params, Mapping):
        return "params must be an object"
    acp_session_id = params.get("sessionId")
    tool_call = params.get("toolCall")
    if not isinstance(acp_session_id, str) or not isinstance(tool_call, Mapping):
        return "sessionId and toolCall required"
    return acp_session_id, tool_call, parse_options(params.get("options"))


def parse_options(raw: Any) -> tuple[PermissionOption, ...]:
    """The well-formed ``options`` of a request (``optionId`` required; name defaults to it)."""
    options: list[PermissionOption] = []
    if isinstance(raw, list):
        for item in raw:
            if not isinstance(item, Mapping):
                continue
            option_id = item.get("optionId")
            if not isinstance(option_id, str):
                continue
            name = item.get("name")
            kind = item.get("kind")
            options.append(
                PermissionOption(
                    option_id=option_id,
                    name=name if isinstance(name, str) else option_id,
                    kind=kind if isinstance(kind, str) else None,
                )
            )
    return tuple(options)


def validate_response(response: PermissionResponse) -> dict[str, Any]:
    """The JSON-RPC result for ``response``; raises `ConfigurationError` naming
    the offending field."""
    if not isinstance(response, Mapping):
        raise ConfigurationError("must be a mapping", "response")
    outcome = response.get("outcome")
    if not isinstance(outcome, Mapping):
        raise ConfigurationError("must be a mapping", "response.outcome")
    kind = outcome.get("outcome")
    if kind == "selected":
        if not isinstance(outcome.get("optionId"), str) or not outcome.get("optionId"):
            raise ConfigurationError("must be a non-empty string", "response.outcome.optionId")
    elif kind != "cancelled":
        raise ConfigurationError(
            f"must be 'selected' or 'cancelled' (got {kind!r})", "response.outcome.outcome"
        )
    answers = response.get("answers")
    if answers is not None and not isinstance(answers, Mapping):
        raise ConfigurationError("must be a mapping of question key to answer", "response.answers")
    result = dict(response)
    result["outcome"] = dict(outcome)
    if answers is not None:
        result["answers"] = dict(answers)
    return result


class PermissionTable:
    """Pending permissions by request id, guarded by the bridge's condition ``cond``.

    Every removal wakes the condition's waiters. Methods documented "caller holds the
    condition" must be called inside ``with cond``.
    """

    def __init__(self, cond: threading.Condition) -> None:
        self._cond = cond
        self._items: dict[str, Permission] = {}

    def __len__(self) -> int:
        with self._cond:
            return len(self._items)

    def add(self, permission: Permission) -> None:
        """Register ``permission`` and wake waiters (they may now have a deadline to keep)."""
        with self._cond:
            self._items[permission.request_id] = permission
            self._cond.notify_all()

    def pop(self, request_id: str) -> Permission | None:
        """Remove and return the request, or None if it is no longer pending."""
        with self._cond:
            permission = self._items.pop(request_id, None)
            if permission is not None:
                self._cond.notify_all()
            return permission

    def pending(self, session_id: str | None = None) -> list[Permission]:
        """The pending requests (of one session, when given)."""
        with self._cond:
            return [p for p in self._items.values() if session_id in (None, p.session_id)]

    def take_all(self) -> list[Permission]:
        """Remove and return every pending request (caller holds the condition)."""
        permissions = list(self._items.values())
        self._items.clear()
        return permissions

    def take_overdue(self, now: float) -> tuple[list[Permission], float | None]:
        """Remove the overdue requests no scheduler times out; else the next such deadline.

        Caller holds the condition (see `RpcPeer.wait()`).
        """
        swept = [p for p in self._items.values() if not p.scheduled]
        if not swept:
            return [], None
        expired = [p for p in swept if p.deadline <= now]
        if expired:
            for permission in expired:
                del self._items[permission.request_id]
            return expired, None
        return [], min(p.deadline for p in swept)

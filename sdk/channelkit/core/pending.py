"""One pending request: a permission request or a question waiting on a person.

`Pending` is the record the channel keeps for each live request: what was asked,
where (its `SessionTarget`), for which run (captured at
registration, never rediscovered), its deadline, and its settlement, exactly once: the
first reason wins and every settlement listener is called once with it.

Answering goes through the ``responder`` that the registry
(`PendingRequests`) hands the record, so the
contexts given to adapters answer through the same one-shot path as the chat commands,
and the record itself knows nothing of the channel.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from channelkit.agents.base import PermissionRequest, PermissionResponse
from channelkit.core.types import SessionTarget, SettlementListener, SettlementReason
from channelkit.runtime.scheduler import TimerHandle

if TYPE_CHECKING:
    from channelkit.core.runs import Run

__all__ = ["CANCELLED_RESPONSE", "Pending", "Responder"]

logger = logging.getLogger(__name__)

#: The answer that tells the agent a request was cancelled.
CANCELLED_RESPONSE: Mapping[str, Any] = {"outcome": {"outcome": "cancelled"}}

#: Answers a pending request once: True for the one caller whose answer the agent accepted.
Responder = Callable[["Pending", PermissionResponse], bool]


class Pending:
    """A pending permission request; settled exactly once (internal to core).

    Its mutable fields are guarded by ``lock``; ``run`` is None for a request of a
    session without a live run.
    """

    __slots__ = (
        "answer",
        "channel_name",
        "chat_key",
        "expired",
        "expires_at",
        "listeners",
        "lock",
        "parked",
        "request",
        "request_id",
        "respond_invoked",
        "responder",
        "response_future",
        "run",
        "session_id",
        "settled_reason",
        "target",
        "timer",
        "user_input_presented",
    )

    def __init__(
        self,
        request: PermissionRequest,
        target: SessionTarget,
        run: Run | None,
        *,
        channel_name: str,
        responder: Responder,
    ) -> None:
        self.channel_name = channel_name
        self.responder = responder
        self.request = request
        self.request_id = request.request_id
        self.session_id = request.session_id
        self.target = target
        self.run = run
        self.chat_key = (target.chat_id, target.thread_id or "")
        self.lock = threading.Lock()
        self.listeners: list[SettlementListener] = []
        self.settled_reason: SettlementReason | None = None
        self.response_future: Future[bool] | None = None
        self.respond_invoked = False
        self.user_input_presented = False
        self.timer: TimerHandle | None = None
        self.expires_at = 0.0
        self.parked = False  # counted in run.waiting
        self.answer: Mapping[str, Any] | None = None  # the winning answer, once settled
        self.expired = False  # answered cancelled because its lifetime ran out

    def respond(self, response: PermissionResponse) -> bool:
        """Answer the request through the registry's one-shot responder."""
        return self.responder(self, response)

    def subscribe(self, listener: SettlementListener) -> Callable[[], None]:
        """Call ``listener`` once on settlement (at once if settled); returns an
        unsubscribe function that removes only that listener."""
        with self.lock:
            reason = self.settled_reason
            if reason is None:
                self.listeners.append(listener)
        if reason is not None:
            self._call(listener, reason)
            return lambda: None

        def unsubscribe() -> None:
            with self.lock:
                if listener in self.listeners:
                    self.listeners.remove(listener)

        return unsubscribe

    def settle(self, reason: SettlementReason) -> bool:
        """Record ``reason`` and call the listeners; False when already settled."""
        with self.lock:
            if self.settled_reason is not None:
                return False
            self.settled_reason = reason
            listeners = self.listeners
            self.listeners = []
            timer = self.timer
            self.timer = None
        if timer is not None:
            timer.cancel()
        for listener in listeners:
            self._call(listener, reason)
        return True

    def _call(self, listener: SettlementListener, reason: SettlementReason) -> None:
        try:
            listener(reason)
        except Exception as exc:
            logger.error(
                "[%s] user input settlement listener failed for request %s "
                "(session %s run %s): %s",
                self.channel_name,
                self.request_id,
                self.session_id,
                self.run.run_id if self.run is not None else None,
                exc,
                exc_info=True,
            )

"""Weixin typing indicator: iLink ``getconfig`` ticket + ``sendtyping`` on / off.

Lifecycle mapping: ``started`` -> typing on (status 1), ``completed`` /
``cancelled`` / ``failed`` -> typing off (status 2); ``text_chunk`` and ``tool_call`` are
ignored by the adapter.

Rules implemented here:

* one indicator per user: a second ``started`` while typing is on sends nothing;
* the typing ticket is fetched once per user with ``getconfig`` and cached in a bounded
  TTL map (1,000 users); a failed ``sendtyping`` drops the cached ticket;
* a failed start (ticket or ``sendtyping`` error) clears the user's state, so a later
  ``started`` retries;
* a start that completes after the terminal event is followed by typing off;
* terminal events are idempotent: only the first one after a start sends typing off;
* every call runs on the user's serial queue of the pool (ordered, never on the
  caller's thread); failures are logged and never fail the task.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from channelkit.platforms.weixin.api import TYPING_CANCEL, TYPING_ON
from channelkit.runtime import BoundedMap

__all__ = ["WeixinTyping"]

logger = logging.getLogger(__name__)


@dataclass(eq=False)
class _Typing:
    generation: int
    in_flight: bool = True
    stopped: bool = False


class WeixinTyping:
    """Per-user typing state.

    ``api`` provides ``get_typing_ticket(user_id, context_token)`` and
    ``send_typing(user_id, ticket, status)``. ``submit(key, fn)`` runs ``fn`` on a
    per-key serial queue of the pool. ``context_token(user_id)`` returns the latest
    inbound ``context_token`` of that user (``getconfig`` needs it).
    """

    MAX_USERS = 1000

    def __init__(
        self,
        api: Any,
        *,
        submit: Callable[[str, Callable[[], Any]], Any],
        clock: Any,
        ticket_ttl_s: float = 3600.0,
        context_token: Callable[[str], str | None] = lambda _user: None,
    ) -> None:
        self._api = api
        self._submit = submit
        self._context_token = context_token
        self._lock = threading.Lock()
        self._generation = 0
        self._active: dict[str, _Typing] = {}
        self._tickets: BoundedMap[str, str] = BoundedMap(
            self.MAX_USERS, ttl=ticket_ttl_s, clock=clock
        )

    def is_active(self, user_id: str) -> bool:
        """True while typing is on (or being switched on) for ``user_id``."""
        with self._lock:
            return user_id in self._active

    def cached_tickets(self) -> int:
        """Number of cached typing tickets."""
        return len(self._tickets)

    def start(self, user_id: str) -> None:
        """Typing on for ``user_id`` unless it is already on."""
        with self._lock:
            if user_id in self._active:
                return
            if len(self._active) >= self.MAX_USERS:
                logger.warning("weixin typing: too many active users; indicator skipped")
                return
            self._generation += 1
            state = _Typing(generation=self._generation)
            self._active[user_id] = state
        self._submit(user_id, lambda: self._run_start(user_id, state))

    def stop(self, user_id: str) -> None:
        """Typing off for ``user_id`` (idempotent: only the first stop after a start)."""
        with self._lock:
            state = self._active.pop(user_id, None)
            if state is None or state.stopped:
                return
            state.stopped = True
            in_flight = state.in_flight
        if not in_flight:
            self._submit(user_id, lambda: self._set(user_id, TYPING_CANCEL))
        # else: the start job sees ``stopped`` when it finishes and sends typing off.

    def close(self) -> None:
        """Forget every indicator (no calls are made)."""
        with self._lock:
            self._active.clear()

    def _run_start(self, user_id: str, state: _Typing) -> None:
        ok = self._set(user_id, TYPING_ON)
        with self._lock:
            state.in_flight = False
            if not ok:
                if self._active.get(user_id) is state:
                    del self._active[user_id]  # a later ``started`` retries
                return
            late = state.stopped
        if late:
            # The terminal event arrived while the start was in flight.
            self._set(user_id, TYPING_CANCEL)

    def _ticket(self, user_id: str) -> str:
        ticket = self._tickets.get(user_id)
        if ticket is not None:
            return ticket
        ticket = str(self._api.get_typing_ticket(user_id, self._context_token(user_id)))
        self._tickets[user_id] = ticket
        return ticket

    def _set(self, user_id: str, status: int) -> bool:
        try:
            ticket = self._ticket(user_id)
            self._api.send_typing(user_id, ticket, status)
            return True
        except Exception as exc:
            self._tickets.pop(user_id, None)
            logger.warning("weixin sendtyping (status %s) failed: %s", status, type(exc).__name__)
            return False

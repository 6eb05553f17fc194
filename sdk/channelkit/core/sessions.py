"""Session routing: SessionTarget -> session id, by the configured scope."""

from __future__ import annotations

import threading
import uuid

from channelkit.core.types import SessionScope, SessionTarget
from channelkit.runtime.clock import Clock
from channelkit.runtime.maps import BoundedMap

__all__ = ["SessionRouter"]


class SessionRouter:
    """Maps targets to opaque session ids and remembers each session's last target.

    Scopes: ``user`` -> one session per (chat, sender); ``chat`` -> per chat; ``thread``
    -> per (chat, thread). Both maps are bounded (LRU, ``maxsize`` entries); a forgotten
    route simply starts a new session next time.
    """

    def __init__(
        self,
        channel_name: str,
        scope: SessionScope,
        *,
        clock: Clock | None = None,
        maxsize: int = 1000,
    ) -> None:
        self.channel_name = channel_name
        self.scope = scope
        self._lock = threading.Lock()
        self._by_key: BoundedMap[tuple[str, ...], str] = BoundedMap(
            maxsize, clock=clock, policy="lru"
        )
        self._targets: BoundedMap[str, SessionTarget] = BoundedMap(
            maxsize, clock=clock, policy="lru"
        )

    def key_for(self, target: SessionTarget) -> tuple[str, ...]:
        if self.scope is SessionScope.USER:
            return ("user", target.chat_id, target.sender_id)
        if self.scope is SessionScope.THREAD:
            return ("thread", target.chat_id, target.thread_id or "")
        return ("chat", target.chat_id)

    def session_for(self, target: SessionTarget) -> str:
        """The session id for ``target`` (created on first use)."""
        key = self.key_for(target)
        with self._lock:
            session_id = self._by_key.get(key)
            if session_id is None:
                session_id = f"{self.channel_name}-{uuid.uuid4().hex}"
                self._by_key[key] = session_id
            self._targets[session_id] = target
            return session_id

    def target_for(self, session_id: str) -> SessionTarget | None:
        """The last target routed to ``session_id`` (None if unknown)."""
        return self._targets.get(session_id)

    def forget(self, session_id: str) -> None:
        """Drop a dead session: the next message on its route gets a new session."""
        with self._lock:
            for key, sid in self._by_key.items():
                if sid == session_id:
                    self._by_key.pop(key)
            self._targets.pop(session_id)

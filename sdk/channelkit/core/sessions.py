"""Session routing: SessionTarget -> session id, by the session scope."""

from __future__ import annotations

import threading
import uuid

from channelkit.core.types import SessionScope, SessionTarget
from channelkit.errors import ConfigurationError
from channelkit.runtime.clock import Clock
from channelkit.runtime.maps import BoundedMap

__all__ = ["SessionRouter"]


class SessionRouter:
    """Maps targets to opaque session ids and remembers each session's last target.

    Scopes: ``user`` -> one session per (chat, sender); ``chat`` -> per chat; ``thread``
    -> per (chat, thread), a message outside any thread being the chat's own
    conversation. ``scope`` is the channel's configured scope; None (not configured)
    picks it per message (`scope_for`): a direct message is ``user``; a group message is
    ``thread`` when the platform has threads (``threads``, from its registry entry's
    ``"threads"`` capability), else ``user``. Both maps are bounded (LRU, ``maxsize``
    entries); a forgotten route simply starts a new session next time.
    """

    def __init__(
        self,
        channel_name: str,
        scope: SessionScope | str | None,
        *,
        threads: bool = False,
        clock: Clock | None = None,
        maxsize: int = 1000,
    ) -> None:
        if not isinstance(threads, bool):
            raise ConfigurationError(f"must be a bool, got {threads!r}", path="threads")
        try:
            configured = SessionScope(scope) if scope is not None else None
        except ValueError:
            raise ConfigurationError(
                f"must be one of {[s.value for s in SessionScope]} or None, got {scope!r}",
                path="scope",
            ) from None
        self.channel_name = channel_name
        #: the configured scope (None: `scope_for` picks it per message)
        self.scope = configured
        #: the platform has threads: with no scope configured, groups share per thread
        self.threads = threads
        self._lock = threading.Lock()
        self._by_key: BoundedMap[tuple[str, ...], str] = BoundedMap(
            maxsize, clock=clock, policy="lru"
        )
        self._targets: BoundedMap[str, SessionTarget] = BoundedMap(
            maxsize, clock=clock, policy="lru"
        )

    def scope_for(self, target: SessionTarget) -> SessionScope:
        """The scope ``target``'s message is routed by: the configured one, else
        ``user`` in a direct chat, and in a group ``thread`` where the platform has
        threads, else ``user``."""
        if self.scope is not None:
            return self.scope
        if target.is_group and self.threads:
            return SessionScope.THREAD
        return SessionScope.USER

    def shared(self, target: SessionTarget) -> bool:
        """True when several people share ``target``'s session (a ``chat`` or
        ``thread`` scope): anybody in it may then answer its requests, and
        ``authorized_senders`` applies."""
        return self.scope_for(target) is not SessionScope.USER

    def key_for(self, target: SessionTarget) -> tuple[str, ...]:
        """The route of ``target``: targets with equal keys share one session."""
        scope = self.scope_for(target)
        if scope is SessionScope.USER:
            return ("user", target.chat_id, target.sender_id)
        if scope is SessionScope.THREAD:
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

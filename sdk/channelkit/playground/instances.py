"""``channelkit playground --instances N [--state redis://...]``: several SDK instances
of one DingTalk bot sharing a state store, behind the emulator's round robin.

Instance 0 is the playground's own channel (served on the playground's port); each
other instance is a `DingtalkChannel` with its own
pools, served by its own HTTP server on 127.0.0.1. With ``state`` (a ``redis://`` URL)
each instance opens its own `RedisStore` in a fresh namespace,
as separate processes would; without it they share one
`MemoryStore`. The emulator delivers its HTTP callbacks to the
instances in turn and records which one received each (``GET /_emulator/callbacks``).
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from channelkit.errors import ConfigurationError, StateStoreUnavailable
from channelkit.playground.server import LocalServer
from channelkit.state import MemoryStore, StateStore, open_store
from channelkit.web.wsgi import create_wsgi_app

__all__ = ["MAX_INSTANCES", "Instances"]

logger = logging.getLogger(__name__)

MAX_INSTANCES = 8

#: short leases, so a stopped instance's cards are finalized quickly in a demo
_LEASES = {"leaseRenewS": 2.0, "leaseExpiryS": 10.0}


class Instances:
    """The stores, extra channels and servers of a multi-instance playground."""

    def __init__(self, count: int, state: str | None, host: str) -> None:
        if not 2 <= count <= MAX_INSTANCES:
            raise ConfigurationError(f"must be 2-{MAX_INSTANCES} (got {count})", "instances")
        self.count = count
        self.host = host
        self.namespace = f"playground-{uuid.uuid4().hex[:8]}"
        self._state = state
        self._memory = None if state else MemoryStore(namespace=self.namespace)
        self.stores: list[StateStore] = []
        self.channels: list[Any] = []  # instances 1..N-1 (instance 0 is the playground's)
        self.servers: list[LocalServer] = []

    def store(self) -> StateStore:
        """The store of the next instance (a RedisStore each, or the shared memory)."""
        if self._memory is not None:
            return self._memory
        store = open_store({"redis": {"url": self._state}}, namespace=self.namespace)
        self.stores.append(store)
        try:
            store.ping()
        except StateStoreUnavailable as exc:
            self.close()
            raise ConfigurationError(str(exc), "state") from None
        return store

    @property
    def options(self) -> dict[str, float]:
        return dict(_LEASES)

    def serve(self, make_channel: Any) -> list[str]:
        """Build and serve instances 1..N-1 with ``make_channel(store)``; their URLs."""
        urls: list[str] = []
        try:
            for _ in range(1, self.count):
                channel = make_channel(self.store())
                self.channels.append(channel)
                server = LocalServer(self.host, 0)
                self.servers.append(server)
                server.start(create_wsgi_app([channel]))
                urls.append(server.url)
        except BaseException:
            self.close()
            raise
        return urls

    def close(self) -> None:
        for channel in self.channels:
            try:
                channel.close()
            except Exception:
                logger.exception("closing a playground instance failed")
        for server in self.servers:
            server.stop()
        for store in self.stores:
            store.close()
        if self._memory is not None:
            self._memory.close()
        self.channels, self.servers, self.stores = [], [], []

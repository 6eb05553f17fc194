"""A `StateRegistry` that reports what happens to its card records.

Several processes serving one bot share the ownership and correlation of live cards
through a state store. The presenters keep using their in-process registries (the local
claims, timers and responders stay where the run is); `ObservedStateRegistry`
wraps one and calls an observer when a card record is added, removed or buried, so the
adapter can mirror exactly those facts into the store without touching the presenters.

Observer calls happen under the card registry's lock: they must only queue work
(never do I/O themselves).
"""

from __future__ import annotations

from collections.abc import Hashable
from contextlib import AbstractContextManager
from typing import Any, Literal, Protocol

from channelkit.platforms.common.claims import OneShotClaim, StateCell
from channelkit.platforms.common.registry import (
    MAX_LIVE_RECORDS,
    CardRegistry,
    Deliveries,
    StateRegistry,
)
from channelkit.runtime.maps import DEFAULT_MAXSIZE, BoundedMap

__all__ = ["ObservedCardRegistry", "ObservedStateRegistry", "RegistryObserver"]


class RegistryObserver(Protocol):
    """Told about the card records of every card kind (``kind`` is the registry name)."""

    def added(self, kind: str, key: Hashable, record: Any, index: dict[str, Hashable]) -> None:
        """``record`` was registered under ``key``."""

    def removed(self, kind: str, key: Hashable, record: Any) -> None:
        """The live ``record`` of ``key`` was dropped."""

    def buried(self, kind: str, key: Hashable, tombstone: Any) -> None:
        """``key`` ended with ``tombstone``."""


class ObservedCardRegistry:
    """A `CardRegistry` delegating to ``inner`` and reporting changes."""

    def __init__(self, kind: str, inner: CardRegistry[Any, Any], observer: RegistryObserver):
        self.kind = kind
        self._inner = inner
        self._observer = observer

    @property
    def lock(self) -> AbstractContextManager[Any]:
        return self._inner.lock

    @property
    def maxsize(self) -> int:
        return self._inner.maxsize

    def add(self, key: Hashable, record: Any, **index: Hashable) -> bool:
        with self._inner.lock:
            added = self._inner.add(key, record, **index)
            if added:
                self._observer.added(self.kind, key, record, dict(index))
            return added

    def get(self, key: Hashable) -> Any:
        return self._inner.get(key)

    def find(self, index: str, value: Hashable) -> Any:
        return self._inner.find(index, value)

    def index(self, index: str, value: Hashable, key: Hashable) -> None:
        self._inner.index(index, value, key)

    def records(self) -> list[Any]:
        return self._inner.records()

    def remove(self, key: Hashable, record: Any = None) -> Any:
        with self._inner.lock:
            removed = self._inner.remove(key, record)
            if removed is not None:
                self._observer.removed(self.kind, key, removed)
            return removed

    def bury(self, key: Hashable, tombstone: Any) -> None:
        with self._inner.lock:
            self._inner.bury(key, tombstone)
            self._observer.buried(self.kind, key, tombstone)

    def tombstone(self, key: Hashable) -> Any:
        return self._inner.tombstone(key)

    def tombstones(self) -> list[Any]:
        return self._inner.tombstones()

    def tombstone_count(self) -> int:
        return self._inner.tombstone_count()

    def index_size(self, index: str) -> int:
        return self._inner.index_size(index)

    def state(self, initial: Any) -> StateCell[Any]:
        return self._inner.state(initial)

    def claim(self) -> OneShotClaim:
        return self._inner.claim()

    def __len__(self) -> int:
        return len(self._inner)


class ObservedStateRegistry:
    """A `StateRegistry` whose card registries report to ``observer``; maps and
    delivery logs are the inner registry's own."""

    def __init__(self, inner: StateRegistry, observer: RegistryObserver) -> None:
        self._inner = inner
        self._observer = observer
        self._cards: dict[str, ObservedCardRegistry] = {}

    def cards(self, name: str, *, maxsize: int = MAX_LIVE_RECORDS) -> CardRegistry[Any, Any]:
        observed = self._cards.get(name)
        if observed is None:
            inner = self._inner.cards(name, maxsize=maxsize)
            observed = self._cards.setdefault(
                name, ObservedCardRegistry(name, inner, self._observer)
            )
        return observed

    def map(
        self,
        name: str,
        *,
        maxsize: int = DEFAULT_MAXSIZE,
        ttl: float | None = None,
        policy: Literal["fifo", "lru"] = "fifo",
    ) -> BoundedMap[Any, Any]:
        return self._inner.map(name, maxsize=maxsize, ttl=ttl, policy=policy)

    def deliveries(self, name: str, *, ttl: float) -> Deliveries:
        return self._inner.deliveries(name, ttl=ttl)

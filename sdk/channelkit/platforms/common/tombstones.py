"""Terminal tombstones: what is left of a finished card so late callbacks stay harmless.

A tombstone holds only correlation and terminal state (the caller chooses a small frozen
value, for example ``(request_id, run_id, "submitted")``) - never responders, answers,
questions, timers or content. Entries expire ``ttl`` seconds (10 minutes) after they were
written, measured on the injected clock, and at most ``maxsize`` (1,000) entries are kept;
the oldest entry is evicted first. Every access happens under one lock.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Generic, TypeVar

from channelkit.runtime.clock import Clock
from channelkit.runtime.maps import BoundedMap

__all__ = ["TOMBSTONE_MAXSIZE", "TOMBSTONE_TTL", "TombstoneStore"]

#: Seconds a tombstone is kept.
TOMBSTONE_TTL = 600.0
#: Tombstones kept per store (one store per card type).
TOMBSTONE_MAXSIZE = 1_000

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class TombstoneStore(Generic[K, V]):
    """A bounded, TTL-limited map of terminal records; see the module docstring."""

    def __init__(
        self, clock: Clock, *, ttl: float = TOMBSTONE_TTL, maxsize: int = TOMBSTONE_MAXSIZE
    ) -> None:
        self._map: BoundedMap[K, V] = BoundedMap(maxsize, ttl=ttl, clock=clock)
        self.maxsize = maxsize
        self.ttl = ttl

    def add(self, key: K, value: V) -> None:
        """Record (or overwrite) the tombstone for ``key``."""
        self._map.pop(key)
        self._map.set(key, value)

    def get(self, key: K) -> V | None:
        """The live tombstone for ``key`` or None (expired entries are gone)."""
        return self._map.get(key)

    def values(self) -> list[V]:
        """Every live tombstone, oldest first."""
        return self._map.values()

    def __contains__(self, key: object) -> bool:
        return key in self._map

    def __len__(self) -> int:
        return len(self._map)

    def clear(self) -> None:
        """Drop every tombstone."""
        self._map.clear()

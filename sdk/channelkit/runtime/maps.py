"""Bounded, lock-guarded maps on cachetools.

`BoundedMap` wraps ``cachetools.TTLCache`` (with ``ttl``) or
``cachetools.FIFOCache`` / ``cachetools.LRUCache`` (without) behind an ``RLock``;
every access, reads included, holds the lock. By default it is insertion-ordered:
reads never reorder entries, iteration is oldest first and, when full, the oldest
inserted entry is evicted (``policy="lru"`` makes reads refresh an entry instead).
Time-to-live is measured on the injected clock, so tests expire entries with
``FakeClock.advance`` instead of sleeping.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterator
from typing import Generic, Literal, TypeVar, overload

import cachetools

from channelkit.runtime.clock import Clock, SystemClock

__all__ = ["DEFAULT_MAXSIZE", "BoundedMap"]

DEFAULT_MAXSIZE = 1000

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
D = TypeVar("D")

_MISSING = object()


class BoundedMap(Generic[K, V]):
    """A thread-safe map with at most ``maxsize`` entries and an optional TTL (seconds)."""

    def __init__(
        self,
        maxsize: int = DEFAULT_MAXSIZE,
        *,
        ttl: float | None = None,
        clock: Clock | None = None,
        policy: Literal["fifo", "lru"] = "fifo",
    ) -> None:
        if maxsize < 1:
            raise ValueError("maxsize: must be >= 1")
        if ttl is not None and ttl <= 0:
            raise ValueError("ttl: must be > 0")
        if policy not in ("fifo", "lru"):
            raise ValueError("policy: must be 'fifo' or 'lru'")
        self.maxsize = maxsize
        self.ttl = ttl
        self._policy = policy
        self._lock = threading.RLock()
        clk = clock if clock is not None else SystemClock()
        self._cache: cachetools.Cache[K, V]
        if ttl is not None:
            self._cache = cachetools.TTLCache(maxsize=maxsize, ttl=ttl, timer=clk.now)
        elif policy == "lru":
            self._cache = cachetools.LRUCache(maxsize=maxsize)
        else:
            self._cache = cachetools.FIFOCache(maxsize=maxsize)

    # -- reads ------------------------------------------------------------------------

    def _get_locked(self, key: K) -> object:
        cache = self._cache
        if key not in cache:  # TTLCache.__contains__ checks expiry without reordering
            return _MISSING
        if self._policy == "lru":
            return cache[key]
        # Read the stored value without touching TTLCache's LRU order.
        return cachetools.Cache.__getitem__(cache, key)

    @overload
    def get(self, key: K) -> V | None: ...

    @overload
    def get(self, key: K, default: D) -> V | D: ...

    def get(self, key: K, default: object = None) -> object:
        """The live value for ``key`` or ``default``."""
        with self._lock:
            value = self._get_locked(key)
        return default if value is _MISSING else value

    def __getitem__(self, key: K) -> V:
        with self._lock:
            value = self._get_locked(key)
        if value is _MISSING:
            raise KeyError(key)
        return value  # type: ignore[return-value]

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._cache

    def __len__(self) -> int:
        with self._lock:
            self._expire_locked()
            return len(self._cache)

    def keys(self) -> list[K]:
        """Snapshot of live keys, oldest first."""
        with self._lock:
            self._expire_locked()
            return list(self._cache.keys())

    def values(self) -> list[V]:
        """Snapshot of live values, oldest first."""
        with self._lock:
            return [v for _k, v in self._items_locked()]

    def items(self) -> list[tuple[K, V]]:
        """Snapshot of live ``(key, value)`` pairs, oldest first."""
        with self._lock:
            return self._items_locked()

    def __iter__(self) -> Iterator[K]:
        return iter(self.keys())

    def _items_locked(self) -> list[tuple[K, V]]:
        self._expire_locked()
        getter = cachetools.Cache.__getitem__
        return [(k, getter(self._cache, k)) for k in list(self._cache.keys())]

    def _expire_locked(self) -> None:
        if isinstance(self._cache, cachetools.TTLCache):
            self._cache.expire()

    # -- writes -----------------------------------------------------------------------

    def __setitem__(self, key: K, value: V) -> None:
        with self._lock:
            self._cache[key] = value

    def set(self, key: K, value: V) -> None:
        """Insert or replace ``key`` (evicting the oldest entry when full)."""
        self[key] = value

    def setdefault(self, key: K, factory: Callable[[], V]) -> V:
        """Return the live value for ``key``, inserting ``factory()`` first if absent."""
        with self._lock:
            value = self._get_locked(key)
            if value is _MISSING:
                created = factory()
                self._cache[key] = created
                return created
            return value  # type: ignore[return-value]

    def pop(self, key: K, default: V | None = None) -> V | None:
        """Remove ``key`` and return its live value (``default`` when absent/expired)."""
        with self._lock:
            value = self._get_locked(key)
            if key in self._cache or value is not _MISSING:
                try:
                    del self._cache[key]
                except KeyError:
                    pass
            return default if value is _MISSING else value  # type: ignore[return-value]

    def remove_if(self, key: K, expected: V) -> bool:
        """Remove ``key`` only while it still maps to exactly ``expected`` (identity)."""
        with self._lock:
            value = self._get_locked(key)
            if value is _MISSING or value is not expected:
                return False
            del self._cache[key]
            return True

    def __delitem__(self, key: K) -> None:
        with self._lock:
            if self._get_locked(key) is _MISSING:
                raise KeyError(key)
            del self._cache[key]

    def clear(self) -> None:
        with self._lock:
            self._cache.clear()

    def __repr__(self) -> str:
        return f"<BoundedMap {len(self)}/{self.maxsize} ttl={self.ttl}>"

"""The card registry: the one home of an adapter's cross-callback state.

A callback (a Stop click, a form submit, a button tap) arrives on a web thread and must
find the live record a run created on a pool thread, claim it exactly once, and, after
the card ended, find its tombstone so a late click stays harmless. Adapters keep all of
that state, and their owner maps and redelivery checks, behind two small interfaces:

* `CardRegistry` - the live records of one card kind, keyed by id, with named
  secondary indexes (``out_track_id``, ``(session, owner)`` scope, message id), a cap
  (1,000 records), the records' claims (`CardRegistry.state()`,
  `CardRegistry.claim()`: lock-protected compare-and-set) and the kind's terminal
  tombstones (correlation + terminal state only, 10 minutes, 1,000 entries).
* `StateRegistry` - one per adapter: hands out the card registries, the bounded
  maps (owner maps, chat routes; `BoundedMap` on the
  injected clock) and the first-delivery logs (`Deliveries`) that drop
  redelivered or replayed updates.

`MemoryStateRegistry` / `MemoryCardRegistry` keep everything in this
process. They are the seam a shared state store plugs into: an implementation of the two
protocols backed by, for example, Redis makes claims atomic across processes and
tombstones keys with a TTL, without touching the adapters.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable
from contextlib import AbstractContextManager
from typing import Any, Generic, Literal, Protocol, TypeVar

from channelkit.platforms.common.claims import OneShotClaim, StateCell
from channelkit.platforms.common.tombstones import (
    TOMBSTONE_MAXSIZE,
    TOMBSTONE_TTL,
    TombstoneStore,
)
from channelkit.runtime.clock import Clock
from channelkit.runtime.maps import DEFAULT_MAXSIZE, BoundedMap

__all__ = [
    "MAX_LIVE_RECORDS",
    "CardRegistry",
    "Deliveries",
    "MemoryCardRegistry",
    "MemoryStateRegistry",
    "StateRegistry",
]

#: Live records kept per card kind.
MAX_LIVE_RECORDS = 1_000

R = TypeVar("R")
T = TypeVar("T")
S = TypeVar("S")


class CardRegistry(Protocol[R, T]):
    """The live records of one card kind and their tombstones (see the module docstring).

    Every method is thread-safe; `lock` (re-entrant) groups several calls into
    one check-then-act step.
    """

    @property
    def lock(self) -> AbstractContextManager[Any]:
        """The registry's re-entrant lock."""
        ...

    @property
    def maxsize(self) -> int:
        """Live records kept at most."""
        ...

    def add(self, key: Hashable, record: R, **index: Hashable) -> bool:
        """Register ``record`` under ``key`` (and each ``index=value``); False when full
        or ``key`` is taken (nothing changes then)."""
        ...

    def get(self, key: Hashable) -> R | None:
        """The live record of ``key``."""
        ...

    def find(self, index: str, value: Hashable) -> R | None:
        """The live record that ``index`` maps ``value`` to."""
        ...

    def index(self, index: str, value: Hashable, key: Hashable) -> None:
        """Point ``index``'s ``value`` at the record of ``key`` (replacing an older one)."""
        ...

    def records(self) -> list[R]:
        """Every live record, oldest first."""
        ...

    def remove(self, key: Hashable, record: R | None = None) -> R | None:
        """Drop the record of ``key`` (only if it is ``record``, when given) with its
        index entries; returns the dropped record."""
        ...

    def bury(self, key: Hashable, tombstone: T) -> None:
        """Record the terminal tombstone of ``key`` (10 minutes, 1,000 kept)."""
        ...

    def tombstone(self, key: Hashable) -> T | None:
        """The live tombstone of ``key``."""
        ...

    def tombstones(self) -> list[T]:
        """Every live tombstone, oldest first."""
        ...

    def tombstone_count(self) -> int:
        """Live tombstones."""
        ...

    def index_size(self, index: str) -> int:
        """Entries of secondary index ``index`` (diagnostics)."""
        ...

    def state(self, initial: S) -> StateCell[S]:
        """A new compare-and-set state for a record (its claim state machine)."""
        ...

    def claim(self) -> OneShotClaim:
        """A new releasable one-shot claim for a record (a Stop button)."""
        ...

    def __len__(self) -> int: ...


class MemoryCardRegistry(Generic[R, T]):
    """The in-process `CardRegistry`."""

    def __init__(
        self,
        clock: Clock,
        *,
        maxsize: int = MAX_LIVE_RECORDS,
        tombstone_ttl: float = TOMBSTONE_TTL,
        tombstone_maxsize: int = TOMBSTONE_MAXSIZE,
    ) -> None:
        self._lock = threading.RLock()
        self._maxsize = maxsize
        self._records: dict[Hashable, R] = {}
        self._indexes: dict[str, dict[Hashable, Hashable]] = {}
        self._keys: dict[Hashable, list[tuple[str, Hashable]]] = {}
        self._tombstones: TombstoneStore[Hashable, T] = TombstoneStore(
            clock, ttl=tombstone_ttl, maxsize=tombstone_maxsize
        )

    @property
    def lock(self) -> threading.RLock:
        """The registry's re-entrant lock."""
        return self._lock

    @property
    def maxsize(self) -> int:
        """Live records kept at most."""
        return self._maxsize

    def add(self, key: Hashable, record: R, **index: Hashable) -> bool:
        """See `CardRegistry.add()`."""
        with self._lock:
            if key in self._records or len(self._records) >= self._maxsize:
                return False
            self._records[key] = record
            self._keys[key] = []
            for name, value in index.items():
                self.index(name, value, key)
            return True

    def get(self, key: Hashable) -> R | None:
        """See `CardRegistry.get()`."""
        with self._lock:
            return self._records.get(key)

    def find(self, index: str, value: Hashable) -> R | None:
        """See `CardRegistry.find()`."""
        with self._lock:
            key = self._indexes.get(index, {}).get(value)
            return None if key is None else self._records.get(key)

    def index(self, index: str, value: Hashable, key: Hashable) -> None:
        """See `CardRegistry.index()`."""
        with self._lock:
            if key not in self._records:
                return
            self._indexes.setdefault(index, {})[value] = key
            self._keys[key].append((index, value))

    def records(self) -> list[R]:
        """See `CardRegistry.records()`."""
        with self._lock:
            return list(self._records.values())

    def remove(self, key: Hashable, record: R | None = None) -> R | None:
        """See `CardRegistry.remove()`."""
        with self._lock:
            current = self._records.get(key)
            if current is None or (record is not None and current is not record):
                return None
            del self._records[key]
            for name, value in self._keys.pop(key, ()):
                entries = self._indexes.get(name)
                if entries is not None and entries.get(value) == key:
                    del entries[value]
            return current

    def bury(self, key: Hashable, tombstone: T) -> None:
        """See `CardRegistry.bury()`."""
        with self._lock:
            self._tombstones.add(key, tombstone)

    def tombstone(self, key: Hashable) -> T | None:
        """See `CardRegistry.tombstone()`."""
        with self._lock:
            return self._tombstones.get(key)

    def tombstones(self) -> list[T]:
        """See `CardRegistry.tombstones()`."""
        with self._lock:
            return self._tombstones.values()

    def tombstone_count(self) -> int:
        """See `CardRegistry.tombstone_count()`."""
        with self._lock:
            return len(self._tombstones)

    def index_size(self, index: str) -> int:
        """See `CardRegistry.index_size()`."""
        with self._lock:
            return len(self._indexes.get(index, ()))

    def state(self, initial: S) -> StateCell[S]:
        """See `CardRegistry.state()`."""
        return StateCell(initial)

    def claim(self) -> OneShotClaim:
        """See `CardRegistry.claim()`."""
        return OneShotClaim()

    def __len__(self) -> int:
        with self._lock:
            return len(self._records)


class Deliveries:
    """Which update ids were already dispatched (bounded, with a TTL on the clock).

    ``first(key)`` is a check-and-set in one step: of two racing copies of an update
    exactly one sees True. ``forget(key)`` lets a refused update be delivered again.
    """

    def __init__(self, clock: Clock, *, ttl: float, maxsize: int = DEFAULT_MAXSIZE) -> None:
        self._seen: BoundedMap[Hashable, object] = BoundedMap(maxsize, ttl=ttl, clock=clock)
        self.ttl = ttl

    def first(self, key: Hashable) -> bool:
        """True for the first delivery of ``key`` within the TTL."""
        marker = object()
        return self._seen.setdefault(key, lambda: marker) is marker

    def forget(self, key: Hashable) -> None:
        """Forget ``key`` (its delivery was refused and may be retried)."""
        self._seen.pop(key)

    def __contains__(self, key: object) -> bool:
        return key in self._seen

    def __len__(self) -> int:
        return len(self._seen)


class StateRegistry(Protocol):
    """An adapter's cross-callback state (see the module docstring)."""

    def cards(self, name: str, *, maxsize: int = MAX_LIVE_RECORDS) -> CardRegistry[Any, Any]:
        """The registry of card kind ``name`` (created on first use)."""
        ...

    def map(
        self,
        name: str,
        *,
        maxsize: int = DEFAULT_MAXSIZE,
        ttl: float | None = None,
        policy: Literal["fifo", "lru"] = "fifo",
    ) -> BoundedMap[Any, Any]:
        """The bounded map ``name`` (created on first use, on the registry's clock)."""
        ...

    def deliveries(self, name: str, *, ttl: float) -> Deliveries:
        """The first-delivery log ``name`` (created on first use)."""
        ...


class MemoryStateRegistry:
    """The in-process `StateRegistry` (one per adapter, on its clock)."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self._cards: dict[str, MemoryCardRegistry[Any, Any]] = {}
        self._maps: dict[str, BoundedMap[Any, Any]] = {}
        self._deliveries: dict[str, Deliveries] = {}

    def cards(self, name: str, *, maxsize: int = MAX_LIVE_RECORDS) -> MemoryCardRegistry[Any, Any]:
        """See `StateRegistry.cards()`."""
        with self._lock:
            registry = self._cards.get(name)
            if registry is None:
                registry = self._cards[name] = MemoryCardRegistry(self.clock, maxsize=maxsize)
            return registry

    def map(
        self,
        name: str,
        *,
        maxsize: int = DEFAULT_MAXSIZE,
        ttl: float | None = None,
        policy: Literal["fifo", "lru"] = "fifo",
    ) -> BoundedMap[Any, Any]:
        """See `StateRegistry.map()`."""
        with self._lock:
            bounded = self._maps.get(name)
            if bounded is None:
                bounded = self._maps[name] = BoundedMap(
                    maxsize, ttl=ttl, clock=self.clock, policy=policy
                )
            return bounded

    def deliveries(self, name: str, *, ttl: float) -> Deliveries:
        """See `StateRegistry.deliveries()`."""
        with self._lock:
            log = self._deliveries.get(name)
            if log is None:
                log = self._deliveries[name] = Deliveries(self.clock, ttl=ttl)
            return log

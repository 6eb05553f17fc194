"""One-use signatures and ids: a bounded memory that never forgets what is still fresh.

Every ingress that accepts a signed (or otherwise authenticated) request must refuse a
second use of it. :class:`ReplayGuard` remembers each accepted key (a signature, a
message id, an update id) until the moment no request carrying it could be accepted any
more (``expires_at``: the signed timestamp plus the freshness window, or "now plus the
dedup TTL"). Its memory is bounded (``maxsize`` entries, 1,000 to 10,000). When it is
full and no entry has expired yet, the entry that expires first is dropped and its
expiry becomes the *floor*: from then on a key whose ``expires_at`` is at or below the
floor is refused, because the guard can no longer tell whether it saw it. So the
accepted window shrinks to what the memory still covers, and a replay is never accepted
while its signature is still fresh.

Thread-safe; time comes from the injected clock (``time`` returns wall-clock seconds,
the scale signed timestamps use).
"""

from __future__ import annotations

import heapq
import threading
from collections.abc import Callable, Hashable

__all__ = ["DEFAULT_REPLAY_ENTRIES", "MAX_REPLAY_ENTRIES", "MIN_REPLAY_ENTRIES", "ReplayGuard"]

MIN_REPLAY_ENTRIES = 1_000
MAX_REPLAY_ENTRIES = 10_000
#: Entries a guard keeps by default.
DEFAULT_REPLAY_ENTRIES = 10_000


class ReplayGuard:
    """Check-and-remember for one-use keys, bounded, on the injected clock.

    ``admit(key, expires_at)`` is True exactly once per key while the key is
    remembered; it is False for a key already admitted and not yet expired, for a key
    that already expired (``expires_at <= now``) and for any key the memory can no longer
    vouch for (``expires_at <= floor``). ``first(key)`` is the same with
    ``expires_at = now + ttl`` (drop-in for a dedup log). ``forget(key)`` undoes an
    admission whose request was refused for another reason and may be retried.
    """

    def __init__(
        self,
        time: Callable[[], float],
        *,
        ttl: float = 3600.0,
        maxsize: int = DEFAULT_REPLAY_ENTRIES,
    ) -> None:
        if not MIN_REPLAY_ENTRIES <= maxsize <= MAX_REPLAY_ENTRIES:
            raise ValueError(
                f"maxsize: must be between {MIN_REPLAY_ENTRIES} and {MAX_REPLAY_ENTRIES}"
            )
        if ttl <= 0:
            raise ValueError("ttl: must be > 0")
        self._time = time
        self.ttl = ttl
        self.maxsize = maxsize
        self._lock = threading.Lock()
        self._entries: dict[Hashable, tuple[float, int]] = {}
        self._heap: list[tuple[float, int, Hashable]] = []
        self._seq = 0
        self._floor = float("-inf")

    @property
    def floor(self) -> float:
        """Keys expiring at or before this instant are refused (``-inf`` until full)."""
        with self._lock:
            return self._floor

    def admit(self, key: Hashable, expires_at: float) -> bool:
        """True (and remember ``key`` until ``expires_at``) if ``key`` is unused and fresh."""
        with self._lock:
            now = self._time()
            self._purge(now)
            if expires_at <= now or expires_at <= self._floor:
                return False
            if key in self._entries:
                return False
            self._seq += 1
            self._entries[key] = (expires_at, self._seq)
            heapq.heappush(self._heap, (expires_at, self._seq, key))
            while len(self._entries) > self.maxsize:
                self._evict_first()
            if len(self._heap) > 2 * self.maxsize + 16:
                self._compact()
            return True

    def first(self, key: Hashable) -> bool:
        """``admit(key, now + ttl)``: True for the first delivery of ``key``."""
        return self.admit(key, self._time() + self.ttl)

    def forget(self, key: Hashable) -> None:
        """Forget ``key`` (its request was refused and may be delivered again)."""
        with self._lock:
            self._entries.pop(key, None)

    def __contains__(self, key: object) -> bool:
        with self._lock:
            entry = self._entries.get(key)
            return entry is not None and entry[0] > self._time()

    def __len__(self) -> int:
        with self._lock:
            self._purge(self._time())
            return len(self._entries)

    # -- internals (lock held) --------------------------------------------------------
    def _live(self, item: tuple[float, int, Hashable]) -> bool:
        entry = self._entries.get(item[2])
        return entry is not None and entry[1] == item[1]

    def _purge(self, now: float) -> None:
        heap = self._heap
        while heap and heap[0][0] <= now:
            item = heapq.heappop(heap)
            if self._live(item):
                del self._entries[item[2]]

    def _evict_first(self) -> None:
        while self._heap:
            item = heapq.heappop(self._heap)
            if self._live(item):
                del self._entries[item[2]]
                self._floor = max(self._floor, item[0])
                return

    def _compact(self) -> None:
        self._heap = [(exp, seq, key) for key, (exp, seq) in self._entries.items()]
        heapq.heapify(self._heap)

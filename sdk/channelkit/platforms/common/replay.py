"""One-use signatures and ids: a bounded memory that never forgets what is still fresh.

Every ingress that accepts a signed (or otherwise authenticated) request must refuse a
second use of it. `ReplayGuard` remembers each accepted key (a signature, a
message id, an update id) until the moment no request carrying it could be accepted any
more (``expires_at``: the signed timestamp plus the freshness window, or "now plus the
dedup TTL"). Its memory is bounded (``maxsize`` entries, 1,000 to 10,000). When it is
full and no entry has expired yet, the entry that expires first is dropped and its
expiry becomes the *floor*: from then on a key whose ``expires_at`` is at or below the
floor is refused, because the guard can no longer tell whether it saw it. So the
accepted window shrinks to what the memory still covers, and a replay is never accepted
while its signature is still fresh.

Message ids (dedup of a platform's redeliveries) follow the same rule, written here once
for every platform:

* **ordered ids** (Telegram ``update_id``; ``ordered=True``): besides the ids it
  remembers, the guard keeps a *high-water mark*, the highest id it ever forgot (its
  memory bound or its TTL dropped it). An id at or below the mark is refused: the
  platform delivers ids in increasing order, so such an id is a replay (or so late that
  it must be treated as one);
* **unordered ids with the platform's send time** (DingTalk ``msgId`` with ``createAt``,
  Feishu ``event_id`` with ``create_time``, Slack ``event_id`` with ``event_time``,
  Weixin ``message_id`` with ``create_time_ms``): ``first(key, at=sent_at)`` remembers the
  id until ``sent_at + ttl``, where ``ttl`` covers the platform's redelivery window. A
  redelivery carries the original send time, so once the id is forgotten (the window
  passed, or the memory bound dropped it and raised the floor over its expiry) the
  redelivery is refused as stale, never accepted twice.

``first(key)`` without a send time remembers the id from its arrival; it is for ids whose
copies arrive close together (a long connection's frame ids, backed by the message-level
dedup above).

Thread-safe; time comes from the injected clock (``time`` returns wall-clock seconds,
the scale signed timestamps use).
"""

from __future__ import annotations

import heapq
import re
import threading
from collections.abc import Callable, Hashable
from typing import Any

from channelkit.observability import hub

__all__ = [
    "DEFAULT_REPLAY_ENTRIES",
    "MAX_REPLAY_ENTRIES",
    "MIN_REPLAY_ENTRIES",
    "ReplayGuard",
    "sent_at_seconds",
]

MIN_REPLAY_ENTRIES = 1_000
MAX_REPLAY_ENTRIES = 10_000
#: Entries a guard keeps by default.
DEFAULT_REPLAY_ENTRIES = 10_000


def sent_at_seconds(value: Any) -> float | None:
    """A platform's send time as epoch seconds, or None when absent or malformed.

    Takes an int or a string of ASCII digits in seconds, milliseconds or microseconds
    (platforms use all three); anything else (floats, signs, "nan", booleans) is None.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        number = value
    elif isinstance(value, str):
        text = value.strip()
        if not text or len(text) > 19 or not (text.isascii() and text.isdigit()):
            return None
        number = int(text)
    else:
        return None
    if number <= 0:
        return None
    if number > 10**14:  # microseconds
        return number / 1_000_000.0
    if number > 10**11:  # milliseconds
        return number / 1000.0
    return float(number)


#: The longest timestamp header a signed request may carry (seconds since the epoch).
MAX_TIMESTAMP_DIGITS = 15


def signed_headers_problem(
    timestamp: str, signature: str, *, pattern: re.Pattern[str], now: float, window: float
) -> str | None:
    """Why a timestamped signature's headers are refused before the signature itself is
    checked, or None when they may be checked: both present, the timestamp ASCII digits
    (a non-ASCII or oversized value is a refusal, never an exception later), the
    signature of the platform's shape (``pattern``) and the timestamp within ``window``
    seconds of ``now``."""
    if not timestamp or not signature:
        return "missing signature"
    if len(timestamp) > MAX_TIMESTAMP_DIGITS or not (timestamp.isascii() and timestamp.isdigit()):
        return "malformed timestamp"
    if not pattern.fullmatch(signature):
        return "malformed signature"
    if abs(now - int(timestamp)) > window:
        return "stale timestamp"
    return None


class ReplayGuard:
    """Check-and-remember for one-use keys, bounded, on the injected clock.

    ``admit(key, expires_at)`` is True exactly once per key while the key is
    remembered; it is False for a key already admitted and not yet expired, for a key
    that already expired (``expires_at <= now``) and for any key the memory can no longer
    vouch for (``expires_at <= floor``; for an ``ordered`` guard ``key <= high_water``
    instead). ``first(key)`` is the same with ``expires_at = (at or now) + ttl`` (drop-in
    for a dedup log; pass the platform's send time as ``at``). ``forget(key)`` undoes an
    admission whose request was refused for another reason and may be retried.
    ``ordered=True`` (integer keys that the platform issues in increasing order) refuses
    every key at or below the highest key the guard forgot (`high_water`).

    ``scope`` (e.g. ``"slack-event"``, its first word the platform) makes every refused
    key count as a ``replay`` in ``channelkit_ingress_total`` (set it on the guard that
    claims a platform's deliveries, not on signature guards: a refused signature is
    counted as ``bad_signature`` by the web layer).
    """

    def __init__(
        self,
        time: Callable[[], float],
        *,
        ttl: float = 3600.0,
        maxsize: int = DEFAULT_REPLAY_ENTRIES,
        ordered: bool = False,
        scope: str = "",
    ) -> None:
        if not MIN_REPLAY_ENTRIES <= maxsize <= MAX_REPLAY_ENTRIES:
            raise ValueError(
                f"maxsize: must be between {MIN_REPLAY_ENTRIES} and {MAX_REPLAY_ENTRIES}"
            )
        if ttl <= 0:
            raise ValueError("ttl: must be > 0")
        self._time = time
        self.ttl = ttl
        self.scope = scope
        self.maxsize = maxsize
        self._lock = threading.Lock()
        self._entries: dict[Hashable, tuple[float, int]] = {}
        self._heap: list[tuple[float, int, Hashable]] = []
        self._seq = 0
        self._floor = float("-inf")
        self.ordered = ordered
        self._high_water: int | None = None
        #: deliveries refused because the guard could no longer vouch for them
        self.refused_stale = 0

    @property
    def floor(self) -> float:
        """Keys expiring at or before this instant are refused (``-inf`` until full)."""
        with self._lock:
            return self._floor

    @property
    def high_water(self) -> int | None:
        """``ordered`` guards: the highest key forgotten so far (None: none yet)."""
        with self._lock:
            return self._high_water

    def admit(self, key: Hashable, expires_at: float) -> bool:
        """True (and remember ``key`` until ``expires_at``) if ``key`` is unused and fresh."""
        admitted = self._admit(key, expires_at)
        if not admitted and self.scope:
            hub.ingress(self.scope.split("-", 1)[0], "replay")
        return admitted

    def _admit(self, key: Hashable, expires_at: float) -> bool:
        if self.ordered and (not isinstance(key, int) or isinstance(key, bool)):
            raise TypeError(f"key: an ordered guard takes integer ids, got {key!r}")
        with self._lock:
            now = self._time()
            self._purge(now)
            if key in self._entries:
                return False
            if (
                expires_at <= now
                # ordered ids: the high-water mark, not the expiry, says what is stale
                or (expires_at <= self._floor and not self.ordered)
                or (
                    self._high_water is not None
                    and isinstance(key, int)
                    and key <= self._high_water
                )
            ):
                self.refused_stale += 1
                return False
            self._seq += 1
            self._entries[key] = (expires_at, self._seq)
            heapq.heappush(self._heap, (expires_at, self._seq, key))
            while len(self._entries) > self.maxsize:
                self._evict_first()
            if len(self._heap) > 2 * self.maxsize + 16:
                self._compact()
            return True

    def first(self, key: Hashable, at: float | None = None) -> bool:
        """``admit(key, (at or now) + ttl)``: True for the first delivery of ``key``.

        ``at`` is when the platform sent it (its own timestamp, epoch seconds): a
        redelivery carries the same ``at``, so it is refused once the guard forgot the
        key, however many other keys came in between.
        """
        return self.admit(key, (self._time() if at is None else at) + self.ttl)

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
                self._raise_high_water(item[2])

    def _evict_first(self) -> None:
        while self._heap:
            item = heapq.heappop(self._heap)
            if self._live(item):
                del self._entries[item[2]]
                self._floor = max(self._floor, item[0])
                self._raise_high_water(item[2])
                return

    def _raise_high_water(self, key: Hashable) -> None:
        if (
            self.ordered
            and isinstance(key, int)
            and (self._high_water is None or key > self._high_water)
        ):
            self._high_water = key

    def _compact(self) -> None:
        self._heap = [(exp, seq, key) for key, (exp, seq) in self._entries.items()]
        heapq.heapify(self._heap)

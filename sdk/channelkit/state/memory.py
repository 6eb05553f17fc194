"""The in-process state store: one process, today's single-process behaviour.

Thread-safe (one lock), TTLs on the injected clock, bounded: past ``maxsize`` keys the
oldest written key goes (and a queue past ``maxsize`` messages drops its oldest). Values
are kept as canonical JSON, so a caller never shares a mutable dict with the store and
the semantics (what compares equal in `MemoryStore.replace()`, what is JSON-able)
are the same as `RedisStore`'s.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque
from collections.abc import Mapping
from typing import Any

from channelkit.errors import ConfigurationError
from channelkit.runtime.clock import Clock, SystemClock
from channelkit.state.base import (
    CLAIM_MISMATCH,
    DEFAULT_NAMESPACE,
    GUARD_ABSENT,
    GUARD_EXISTS,
    GUARD_STALE,
    GUARD_WRITTEN,
    check_bucket,
    check_key,
    check_namespace,
    check_token,
    check_ttl,
    decode,
    encode,
    guard_text,
    new_instance_id,
    timed_store,
)

__all__ = ["MemoryStore"]


@timed_store("memory")  # channelkit_store_operation_seconds
class MemoryStore:
    """A `StateStore` held in this process's memory."""

    def __init__(
        self,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        clock: Clock | None = None,
        maxsize: int = 100_000,
    ) -> None:
        if isinstance(maxsize, bool) or not isinstance(maxsize, int) or maxsize < 1:
            raise ConfigurationError("must be an integer >= 1", "maxsize")
        self.namespace = check_namespace(namespace)
        self.instance_id = new_instance_id()
        self.maxsize = maxsize
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._lock = threading.Lock()
        self._ready = threading.Condition(self._lock)
        # key -> (canonical JSON, expiry on the clock or None); insertion = write order
        self._data: OrderedDict[str, tuple[str, float | None]] = OrderedDict()
        self._queues: dict[str, deque[str]] = {}
        # lease token counters (`hold_lease`), apart from the keys: never evicted by them
        self._counters: dict[str, int] = {}
        # token buckets (`take_token`): key -> (tokens, clock time of that count)
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()
        self._closed = False

    # -- keys -------------------------------------------------------------------------

    def _live(self, key: str, now: float) -> str | None:
        """The stored text under ``key`` if it has not expired (caller holds the lock)."""
        entry = self._data.get(key)
        if entry is None:
            return None
        text, expires = entry
        if expires is not None and now >= expires:
            del self._data[key]
            return None
        return text

    def _store(self, key: str, text: str, ttl_s: float | None, now: float) -> None:
        self._data[key] = (text, None if ttl_s is None else now + ttl_s)
        self._data.move_to_end(key)
        while len(self._data) > self.maxsize:
            self._data.popitem(last=False)

    def put(self, key: str, value: Mapping[str, Any], *, ttl_s: float | None = None) -> None:
        check_key(key)
        ttl = check_ttl(ttl_s)
        text = encode(value)
        with self._lock:
            self._store(key, text, ttl, self._clock.now())

    def get(self, key: str) -> dict[str, Any] | None:
        check_key(key)
        with self._lock:
            text = self._live(key, self._clock.now())
        return None if text is None else decode(text)

    def delete(self, key: str) -> bool:
        check_key(key)
        with self._lock:
            present = self._live(key, self._clock.now()) is not None
            if present:
                del self._data[key]
            return present

    def add(self, key: str, value: Mapping[str, Any], *, ttl_s: float | None = None) -> bool:
        check_key(key)
        ttl = check_ttl(ttl_s)
        text = encode(value)
        with self._lock:
            now = self._clock.now()
            if self._live(key, now) is not None:
                return False
            self._store(key, text, ttl, now)
            return True

    def replace(
        self,
        key: str,
        expected: Mapping[str, Any],
        value: Mapping[str, Any] | None,
        *,
        ttl_s: float | None = None,
    ) -> bool:
        check_key(key)
        ttl = check_ttl(ttl_s)
        want = encode(expected, "expected")
        text = None if value is None else encode(value)
        with self._lock:
            now = self._clock.now()
            if self._live(key, now) != want:
                return False
            if text is None:
                del self._data[key]
            else:
                self._store(key, text, ttl, now)
            return True

    def hold_lease(
        self, key: str, value: Mapping[str, Any], *, token: int, ttl_s: float, counter: str
    ) -> int:
        check_key(key)
        check_key(counter, "counter")
        token = check_token(token)
        ttl = check_ttl(ttl_s)
        if ttl is None:
            raise ConfigurationError("must be a number of seconds", "ttl_s")
        fields = dict(value)
        with self._lock:
            now = self._clock.now()
            current = self._live(key, now)
            if current is not None:
                held = guard_text(decode(current).get("token"))
                if token <= 0 or held != str(token):
                    return 0  # another holder's token, or a survivor's fence mark
                self._store(key, encode({**fields, "token": token}), ttl, now)
                return token
            taken = max(self._counters.get(counter, 0) + 1, token + 1)
            self._counters[counter] = taken
            while len(self._counters) > self.maxsize:
                del self._counters[next(iter(self._counters))]
            self._store(key, encode({**fields, "token": taken}), ttl, now)
            return taken

    def write_if(
        self,
        guard: str,
        field: str,
        expected: str | int,
        key: str,
        value: Mapping[str, Any] | None,
        *,
        ttl_s: float | None = None,
        only_if_absent: bool = False,
    ) -> str:
        check_key(guard, "guard")
        check_key(key)
        want = guard_text(expected)
        if want is None:
            raise ConfigurationError("must be a string or an integer", "expected")
        ttl = check_ttl(ttl_s)
        text = None if value is None else encode(value)
        with self._lock:
            return self._write_if(guard, field, want, key, text, ttl, only_if_absent)

    def _write_if(
        self,
        guard: str,
        field: str,
        want: str,
        key: str,
        text: str | None,
        ttl: float | None,
        only_if_absent: bool,
    ) -> str:
        """`write_if()` with the lock held and its arguments checked."""
        now = self._clock.now()
        held = self._live(guard, now)
        if held is None:
            return GUARD_ABSENT
        if guard_text(decode(held).get(field)) != want:
            return GUARD_STALE
        present = self._live(key, now) is not None
        if only_if_absent and present:
            return GUARD_EXISTS
        if text is not None:
            self._store(key, text, ttl, now)
        elif present:
            del self._data[key]
        return GUARD_WRITTEN

    def claim_matching(
        self,
        record: str,
        match: Mapping[str, str],
        claim: str,
        value: Mapping[str, Any],
        *,
        guard: str,
        field: str,
        expected: str | int,
        ttl_s: float | None = None,
    ) -> tuple[dict[str, Any] | None, str]:
        check_key(record, "record")
        check_key(guard, "guard")
        check_key(claim, "claim")
        match_text = {str(k): str(v) for k, v in match.items()}
        want = guard_text(expected)
        if want is None:
            raise ConfigurationError("must be a string or an integer", "expected")
        ttl = check_ttl(ttl_s)
        text = encode(value)
        with self._lock:
            raw = self._live(record, self._clock.now())
            found = None if raw is None else decode(raw)
            if found is None or any(guard_text(found.get(k)) != v for k, v in match_text.items()):
                return found, CLAIM_MISMATCH
            return found, self._write_if(guard, field, want, claim, text, ttl, True)

    def scan(self, prefix: str, limit: int = 1000) -> list[str]:
        if not isinstance(prefix, str):
            raise ConfigurationError("must be a string", "prefix")
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ConfigurationError("must be an integer >= 1", "limit")
        with self._lock:
            keys = list(self._data)  # a C-speed copy: the filtering runs outside the lock
        candidates = [k for k in keys if k.startswith(prefix)]
        with self._lock:
            now = self._clock.now()
            found = [k for k in candidates if self._live(k, now) is not None]
        found.sort()
        return found[:limit]

    # -- queues -------------------------------------------------------------------------

    def push(self, queue: str, message: Mapping[str, Any]) -> None:
        check_key(queue, "queue")
        text = encode(message, "message")
        with self._ready:
            items = self._queues.setdefault(queue, deque())
            items.append(text)
            while len(items) > self.maxsize:
                items.popleft()
            self._ready.notify_all()

    def pop(self, queue: str, timeout_s: float) -> dict[str, Any] | None:
        """Wait (real time, at most ``timeout_s``) for the oldest message of ``queue``."""
        check_key(queue, "queue")
        deadline = time.monotonic() + max(0.0, float(timeout_s))
        with self._ready:
            while True:
                items = self._queues.get(queue)
                if items:
                    text = items.popleft()
                    if not items:
                        del self._queues[queue]
                    return decode(text)
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._closed:
                    return None
                self._ready.wait(remaining)

    # -- token buckets --------------------------------------------------------------------

    def take_token(
        self, key: str, *, rate: float, burst: float, keep: float = 0.0, force: bool = False
    ) -> float:
        key = check_key(key)
        rate, burst, keep = check_bucket(rate, burst, keep)
        with self._lock:
            now = self._clock.now()
            tokens, then = self._buckets.pop(key, (burst, now))
            tokens = min(burst, tokens + max(0.0, now - then) * rate)
            wait = 0.0
            if tokens >= 1.0 + keep:
                tokens -= 1.0
            else:
                wait = (1.0 + keep - tokens) / rate
                if force:
                    tokens = max(-burst, tokens - 1.0)
            self._buckets[key] = (tokens, now)  # most recent last
            while len(self._buckets) > self.maxsize:
                self._buckets.popitem(last=False)
            return wait

    # -- lifecycle ------------------------------------------------------------------------

    def ping(self) -> None:
        return None

    def close(self) -> None:
        """Wake every waiting `pop()` (they return None); the data stays readable."""
        with self._ready:
            self._closed = True
            self._ready.notify_all()

    def __repr__(self) -> str:
        return f"MemoryStore(namespace={self.namespace!r}, instance_id={self.instance_id!r})"

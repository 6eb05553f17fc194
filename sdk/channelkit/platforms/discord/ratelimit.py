"""Discord REST rate limits: requests wait their turn on the scheduler, none is dropped.

Discord limits a bot per route and globally, and says so in every answer's headers:

* ``X-RateLimit-Bucket``: an opaque id of the limit a route belongs to (several routes
  may share one). The limit counts separately per *top-level resource*: the channel,
  guild or webhook id in the path (`route_key()` keeps those ids and replaces every
  other id, so ``PATCH /channels/1/messages/7`` and ``.../messages/8`` share a key);
* ``X-RateLimit-Limit`` / ``X-RateLimit-Remaining``: requests per window, and left in it;
* ``X-RateLimit-Reset-After``: seconds (with decimals) until the window resets;
* on HTTP 429, a JSON body ``{"message", "retry_after", "global"}`` (``retry_after`` in
  seconds), ``X-RateLimit-Global: true`` / ``X-RateLimit-Scope: global`` when the global
  limit was hit, and ``Retry-After`` (used only when the body has no ``retry_after``).

`DiscordRateLimiter` queues each request (``submit(method, path, send)`` returns a
``Future``) per route key and sends it on the executor when its bucket, the global
window (`GLOBAL_PER_SECOND` requests a second by default) and any global 429 pause
allow. A request whose turn has not come waits on a scheduler timer (one per waiting
route), never in a sleeping thread. Until a route's bucket is known (its first answer
carried the headers), one request of it is in flight at a time. A 429 puts the request
back at the head of its queue and sends it again after ``retry_after`` (at most
`MAX_429_RETRIES` times; then its future fails with `RateLimited`); nothing is ever
dropped silently: a full queue (`MAX_QUEUED` requests) refuses a new one at once with
`RateLimited`, and `DiscordRateLimiter.close()` fails whatever still waits.

The maps (route -> bucket id, bucket states) are bounded (`MAX_ROUTES` each) and every
access holds one lock; time is the injected scheduler's clock, so tests move a
`FakeClock` instead of sleeping.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Any, Protocol

from channelkit.errors import ChannelKitError, ConfigurationError, RateLimited
from channelkit.runtime.maps import BoundedMap
from channelkit.runtime.pool import Executor
from channelkit.runtime.scheduler import Scheduler, TimerHandle

__all__ = [
    "ASSIST_INTERVAL",
    "GLOBAL_PER_SECOND",
    "MAX_429_RETRIES",
    "MAX_QUEUED",
    "MAX_ROUTES",
    "DiscordRateLimiter",
    "RestAnswer",
    "route_key",
]

logger = logging.getLogger(__name__)

#: Requests a second a bot may send in all (Discord's global limit).
GLOBAL_PER_SECOND = 50
#: A request answered 429 this many times in a row fails with `RateLimited`.
MAX_429_RETRIES = 5
#: Requests waiting in all routes at most; one more is refused with `RateLimited`.
MAX_QUEUED = 10_000
#: Routes (and bucket states) remembered at most.
MAX_ROUTES = 1_000
#: Real seconds between two looks of a blocked `DiscordRateLimiter.call()` at its route.
ASSIST_INTERVAL = 0.25

_CLOSED = "the Discord rate limiter is closed"
_MAJOR = re.compile(r"^/(channels|guilds|webhooks)/(\d+)(?:/([^/]+))?")
_ID = re.compile(r"/\d{5,}")


def route_key(method: str, path: str) -> str:
    """The rate-limit key of a request: the method, and the path with every id but the
    top-level resource's replaced by ``{id}``.

    ``route_key("PATCH", "/channels/12345/messages/67890")`` is
    ``"PATCH /channels/12345/messages/{id}"``; a webhook keeps its token too (its limit
    counts per webhook id and token). Query strings are ignored.
    """
    if not method or not isinstance(method, str):
        raise ConfigurationError("an HTTP method is required", "method")
    if not isinstance(path, str) or not path.startswith("/"):
        raise ConfigurationError("must be a path starting with '/'", "path")
    path = path.split("?", 1)[0]
    major = _MAJOR.match(path)
    if major is None:
        return f"{method.upper()} {_ID.sub('/{id}', path)}"
    head_len = len(f"/{major.group(1)}/{major.group(2)}")
    if major.group(1) == "webhooks" and major.group(3) is not None:
        head_len += len(major.group(3)) + 1
    head, rest = path[:head_len], path[head_len:]
    return f"{method.upper()} {head}{_ID.sub('/{id}', rest)}"


def _major_of(key: str) -> str:
    """The top-level resource part of a route key (``channels/123``), or ``""``."""
    path = key.split(" ", 1)[1]
    major = _MAJOR.match(path)
    return f"{major.group(1)}/{major.group(2)}" if major else ""


class RestAnswer(Protocol):
    """What a send function returns: a ``requests.Response`` fits."""

    @property
    def status_code(self) -> int:
        """The HTTP status."""

    @property
    def headers(self) -> Mapping[str, str]:
        """The answer's headers (looked up case-insensitively)."""

    @property
    def content(self) -> bytes:
        """The raw body."""


@dataclass
class _Bucket:
    remaining: int | None = None
    limit: int | None = None
    reset_at: float = 0.0
    window: float = 1.0  # the longest reset-after seen: a window's length, roughly


@dataclass
class _Pending:
    send: Callable[[], RestAnswer]
    future: Future[RestAnswer] = field(default_factory=Future)
    throttled: int = 0  # 429 answers so far
    started: bool = False  # the future was marked running (first send)


def _header(headers: Mapping[str, str], name: str) -> str | None:
    value = headers.get(name)
    if value is not None:
        return str(value)
    lowered = name.lower()
    for key, found in headers.items():
        if key.lower() == lowered:
            return str(found)
    return None


def _number(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if value >= 0 and value == value and value != float("inf") else None


class DiscordRateLimiter:
    """Queues Discord REST requests per route and sends each when the limits allow; see
    the module docstring.

    ``scheduler`` holds the waits (its clock is the limiter's clock); ``executor`` runs
    the sends (a pool that never waits on a run). ``global_per_second`` is the global
    window's size.
    """

    def __init__(
        self,
        scheduler: Scheduler,
        executor: Executor,
        *,
        global_per_second: int = GLOBAL_PER_SECOND,
        max_queued: int = MAX_QUEUED,
        max_routes: int = MAX_ROUTES,
    ) -> None:
        if global_per_second < 1:
            raise ConfigurationError("must be at least 1", "global_per_second")
        if max_queued < 1:
            raise ConfigurationError("must be at least 1", "max_queued")
        self._scheduler = scheduler
        self._clock = scheduler.clock
        self._executor = executor
        self._max_queued = max_queued
        self._lock = threading.Lock()
        # route key -> bucket id; "bucket id:major" (or the route key) -> state
        self._bucket_ids: BoundedMap[str, str] = BoundedMap(max_routes, policy="lru")
        self._buckets: BoundedMap[str, _Bucket] = BoundedMap(max_routes, policy="lru")
        # only routes with waiting or in-flight requests (bounded by max_queued)
        self._queues: dict[str, deque[_Pending]] = {}
        self._in_flight: dict[str, int] = {}
        self._timers: dict[str, TimerHandle] = {}
        self._queued = 0
        self._sent: deque[float] = deque(maxlen=global_per_second)
        self._global_until = 0.0
        self._closed = False
        #: answers by outcome (``sent``, ``throttled``, ``global_throttled``, ``failed``)
        self.counts: dict[str, int] = {}

    # -- public ---------------------------------------------------------------------------
    def submit(self, method: str, path: str, send: Callable[[], RestAnswer]) -> Future[RestAnswer]:
        """Queue ``send`` (one HTTP request to ``method path``); the future holds its
        answer (a 429 is sent again, see the module docstring) or the error it raised.
        Cancelling the future before its turn withdraws the request (it uses no slot).
        Raises `RateLimited` at once when `MAX_QUEUED` requests are waiting."""
        key = route_key(method, path)
        pending = _Pending(send)
        with self._lock:
            if self._closed:
                raise ChannelKitError(_CLOSED)
            if self._queued >= self._max_queued:
                raise RateLimited(
                    f"{self._queued} Discord requests are already waiting", status=429
                )
            self._queued += 1
            self._queues.setdefault(key, deque()).append(pending)
        self._pump(key)
        return pending.future

    def call(
        self, method: str, path: str, send: Callable[[], RestAnswer], *, timeout: float
    ) -> RestAnswer:
        """`submit()` and wait at most ``timeout`` seconds for the answer (raises
        ``TimeoutError`` after; the request stays queued and is still sent). Never call it
        on the executor the limiter sends on.

        While it waits, the caller looks at its route every `ASSIST_INTERVAL` seconds and
        starts whatever the limits allow by then: a request whose turn came never waits
        for the scheduler's timer callback, which needs a worker of the scheduler's pool
        (the pool the caller may be blocking a worker of)."""
        future = self.submit(method, path, send)
        key = route_key(method, path)
        deadline = time.monotonic() + max(0.0, timeout)
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no answer from Discord within {timeout:g} s ({key})")
            try:
                return future.result(timeout=min(remaining, ASSIST_INTERVAL))
            except FutureTimeout:
                self._pump(key)

    def close(self) -> int:
        """Stop: every request still waiting fails with `ChannelKitError` (none is left
        pending silently), later `submit()` calls raise it; requests in flight finish.
        Returns how many waiting requests were failed."""
        with self._lock:
            self._closed = True
            waiting = [p for queue in self._queues.values() for p in queue]
            for queue in self._queues.values():
                queue.clear()
            self._queued -= len(waiting)
            timers = list(self._timers.values())
            self._timers.clear()
        for timer in timers:
            timer.cancel()
        for pending in waiting:
            if pending.future.set_running_or_notify_cancel():
                pending.future.set_exception(ChannelKitError(_CLOSED))
        return len(waiting)

    def waiting(self) -> int:
        """Requests queued and not yet answered (in flight included)."""
        with self._lock:
            return self._queued

    def bucket_of(self, method: str, path: str) -> tuple[str | None, int | None, float]:
        """``(bucket id, remaining, seconds until reset)`` as last learned for a route."""
        key = route_key(method, path)
        with self._lock:
            state = self._buckets.get(self._state_key_locked(key))
            bucket_id = self._bucket_ids.get(key)
            if state is None:
                return bucket_id, None, 0.0
            return bucket_id, state.remaining, max(0.0, state.reset_at - self._clock.now())

    # -- the queue ------------------------------------------------------------------------
    def _state_key_locked(self, key: str) -> str:
        bucket_id = self._bucket_ids.get(key)
        return f"{bucket_id}:{_major_of(key)}" if bucket_id is not None else key

    def _delay_locked(self, key: str, now: float) -> float | None:
        """Seconds before the head of ``key`` may go; None: wait for an answer in flight."""
        delay = max(0.0, self._global_until - now)
        if len(self._sent) == self._sent.maxlen:
            delay = max(delay, self._sent[0] + 1.0 - now)
        state = self._buckets.get(self._state_key_locked(key))
        if state is not None and state.remaining is not None and state.remaining <= 0:
            if now < state.reset_at:
                delay = max(delay, state.reset_at - now)
            else:  # a new window: its end is guessed until an answer tells it
                state.remaining = state.limit
                state.reset_at = now + state.window
        if delay > 0:
            return delay
        if (state is None or state.remaining is None) and self._in_flight.get(key, 0) > 0:
            return None  # learn the bucket from the answer in flight first
        return 0.0

    def _pump(self, key: str) -> None:
        """Start every request of ``key`` the limits allow now; time a wait for the rest."""
        starting: list[_Pending] = []
        with self._lock:
            queue = self._queues.get(key)
            now = self._clock.now()
            while queue:
                if queue[0].future.cancelled():  # the caller gave it up: no slot spent
                    queue.popleft()
                    self._queued -= 1
                    continue
                delay = self._delay_locked(key, now)
                if delay is None:
                    break
                if delay > 0:
                    timer = self._timers.get(key)
                    if timer is None or timer.fired or timer.cancelled:
                        self._timers[key] = self._scheduler.call_later(delay, self._pump, key)
                    break
                pending = queue.popleft()
                state = self._buckets.get(self._state_key_locked(key))
                if state is not None and state.remaining is not None:
                    state.remaining -= 1
                self._in_flight[key] = self._in_flight.get(key, 0) + 1
                self._sent.append(now)
                starting.append(pending)
            self._forget_idle_locked(key)
        for pending in starting:
            self._executor.post(self._send, key, pending)

    def _forget_idle_locked(self, key: str) -> None:
        if not self._queues.get(key) and not self._in_flight.get(key):
            self._queues.pop(key, None)
            self._in_flight.pop(key, None)
            timer = self._timers.pop(key, None)
            if timer is not None:
                timer.cancel()

    def _send(self, key: str, pending: _Pending) -> None:
        if not pending.started:
            pending.started = True
            if not pending.future.set_running_or_notify_cancel():
                self._finish(key, pending)  # the caller cancelled it while it waited
                return
        try:
            answer = pending.send()
        except BaseException as exc:
            self._finish(key, pending, error=exc)
            return
        retry_after = self._observe(key, answer)
        if retry_after is None:
            self._finish(key, pending, answer=answer)
            return
        pending.throttled += 1
        if pending.throttled > MAX_429_RETRIES:
            error = RateLimited(
                f"Discord answered 429 {pending.throttled} times in a row",
                status=429,
                retry_after=retry_after,
            )
            self._finish(key, pending, error=error)
            return
        with self._lock:  # back to the head of its queue, sent again after the pause
            closed = self._closed
            if not closed:
                self._in_flight[key] = max(0, self._in_flight.get(key, 0) - 1)
                self._queues.setdefault(key, deque()).appendleft(pending)
        if closed:
            self._finish(key, pending, error=ChannelKitError(_CLOSED))
            return
        self._pump(key)

    def _finish(
        self,
        key: str,
        pending: _Pending,
        *,
        answer: RestAnswer | None = None,
        error: BaseException | None = None,
    ) -> None:
        with self._lock:
            self._queued -= 1
            self._in_flight[key] = max(0, self._in_flight.get(key, 0) - 1)
            if answer is not None or error is not None:
                self._count_locked("failed" if error is not None else "sent")
        if pending.future.cancelled():
            pass
        elif error is not None:
            pending.future.set_exception(error)
        elif answer is not None:
            pending.future.set_result(answer)
        self._pump(key)

    # -- the headers ----------------------------------------------------------------------
    def _observe(self, key: str, answer: RestAnswer) -> float | None:
        """Learn the limits from ``answer``; the seconds to pause when it is a 429."""
        headers = answer.headers
        now = self._clock.now()
        bucket_id = _header(headers, "X-RateLimit-Bucket")
        remaining = _number(_header(headers, "X-RateLimit-Remaining"))
        limit = _number(_header(headers, "X-RateLimit-Limit"))
        reset_after = _number(_header(headers, "X-RateLimit-Reset-After"))
        throttled = answer.status_code == 429
        retry_after: float | None = None
        is_global = False
        if throttled:
            body = _json_object(answer.content)
            retry_after = _number(str(body.get("retry_after"))) if "retry_after" in body else None
            if retry_after is None:
                retry_after = _number(_header(headers, "Retry-After"))
            if retry_after is None:
                retry_after = reset_after if reset_after is not None else 1.0
            is_global = (
                body.get("global") is True
                or (_header(headers, "X-RateLimit-Global") or "").lower() == "true"
                or (_header(headers, "X-RateLimit-Scope") or "").lower() == "global"
            )
        with self._lock:
            if bucket_id:
                self._bucket_ids[key] = bucket_id
            state_key = self._state_key_locked(key)
            state = self._buckets.get(state_key)
            if is_global:
                self._global_until = max(self._global_until, now + (retry_after or 0.0))
                self._count_locked("global_throttled")
                logger.warning("Discord global rate limit: pausing %.2f s", retry_after)
                return retry_after
            if state is None and (bucket_id or remaining is not None or throttled):
                state = _Bucket()
                self._buckets[state_key] = state
            if state is not None:
                if limit is not None:
                    state.limit = int(limit)
                if remaining is not None and reset_after is not None:
                    reset_at = now + reset_after
                    state.window = max(state.window, reset_after)
                    # the other requests of this route in flight were sent after this
                    # one was counted: they use up what the answer says is left
                    others = max(0, self._in_flight.get(key, 0) - 1)
                    left = max(0, int(remaining) - others)
                    if state.remaining is None or reset_at > state.reset_at + 0.5:
                        state.remaining = left  # a new window
                    else:
                        state.remaining = min(state.remaining, left)
                    state.reset_at = reset_at
                if throttled:
                    state.remaining = 0
                    state.reset_at = max(state.reset_at, now + (retry_after or 0.0))
            if throttled:
                self._count_locked("throttled")
                logger.info("Discord rate limit on %s: waiting %.2f s", key, retry_after)
        return retry_after

    def _count_locked(self, outcome: str) -> None:
        self.counts[outcome] = self.counts.get(outcome, 0) + 1


def _json_object(content: bytes) -> dict[str, Any]:
    try:
        value = json.loads(content or b"{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}

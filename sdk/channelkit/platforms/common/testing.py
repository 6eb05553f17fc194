"""Deterministic stand-ins for the runtime, for adapter unit tests and benchmarks.

* :class:`ManualClock` - ``now()`` moves only when the test calls :meth:`ManualClock.advance`
  (or a :class:`ManualScheduler` advances it).
* :class:`ManualScheduler` - ``call_later`` timers fire inline, in due order, while the
  test advances fake time with :meth:`ManualScheduler.advance`.
* :class:`InlineSerial` - a per-key serial executor that runs jobs at once on the
  calling thread, queueing re-entrant submissions of the same key behind the running job.

These are not thread pools: use ``channelkit.runtime`` when real concurrency matters.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections import deque
from collections.abc import Callable, Hashable
from concurrent.futures import Future
from typing import Any

__all__ = ["InlineSerial", "ManualClock", "ManualScheduler", "ManualTimer"]


class ManualClock:
    """A fake monotonic clock in seconds."""

    def __init__(self, start: float = 1_000.0, wall_start: float = 1_700_000_000.0) -> None:
        self._lock = threading.Lock()
        self._now = float(start)
        self._wall_offset = float(wall_start) - float(start)

    def now(self) -> float:
        with self._lock:
            return self._now

    def time(self) -> float:
        """Wall-clock seconds since the epoch, moving with :meth:`now`."""
        with self._lock:
            return self._now + self._wall_offset

    def set(self, value: float) -> None:
        with self._lock:
            self._now = float(value)

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += float(seconds)


class ManualTimer:
    """A timer handle of :class:`ManualScheduler`."""

    def __init__(self, when: float, fn: Callable[[], Any]) -> None:
        self.when = when
        self.fn = fn
        self.cancelled = False

    def cancel(self) -> bool:
        was = not self.cancelled
        self.cancelled = True
        return was


class ManualScheduler:
    """Timers that fire only when the test advances time."""

    def __init__(self, clock: ManualClock | None = None) -> None:
        self.clock = clock or ManualClock()
        self._lock = threading.RLock()
        self._heap: list[tuple[float, int, ManualTimer]] = []
        self._seq = itertools.count()

    def call_later(self, delay_seconds: float, fn: Callable[[], Any]) -> ManualTimer:
        timer = ManualTimer(self.clock.now() + max(0.0, float(delay_seconds)), fn)
        with self._lock:
            heapq.heappush(self._heap, (timer.when, next(self._seq), timer))
        return timer

    @property
    def pending(self) -> int:
        """Timers not yet fired nor cancelled."""
        with self._lock:
            return sum(1 for _, _, t in self._heap if not t.cancelled)

    def run_due(self) -> int:
        """Fire every timer due at the current time; returns how many fired."""
        fired = 0
        while True:
            with self._lock:
                if not self._heap or self._heap[0][0] > self.clock.now():
                    return fired
                _, _, timer = heapq.heappop(self._heap)
            if timer.cancelled:
                continue
            timer.cancelled = True
            timer.fn()
            fired += 1

    def advance(self, seconds: float) -> int:
        """Move time forward, firing due timers at their due times; returns fired count."""
        target = self.clock.now() + float(seconds)
        fired = 0
        while True:
            with self._lock:
                live = [entry for entry in self._heap if not entry[2].cancelled]
                next_when = min((entry[0] for entry in live), default=None)
            if next_when is None or next_when > target:
                break
            if next_when > self.clock.now():
                self.clock.set(next_when)
            fired += self.run_due()
        self.clock.set(max(target, self.clock.now()))
        fired += self.run_due()
        return fired


class InlineSerial:
    """Per-key serial execution on the calling thread (re-entrant jobs are queued)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queues: dict[Hashable, deque[tuple[Callable[[], Any], Future[Any]]]] = {}
        self._running: set[Hashable] = set()

    def submit(self, key: Hashable, fn: Callable[[], Any]) -> Future[Any]:
        future: Future[Any] = Future()
        with self._lock:
            self._queues.setdefault(key, deque()).append((fn, future))
            if key in self._running:
                return future
            self._running.add(key)
        while True:
            with self._lock:
                queue = self._queues.get(key)
                if not queue:
                    self._queues.pop(key, None)
                    self._running.discard(key)
                    return future
                job, job_future = queue.popleft()
            try:
                job_future.set_result(job())
            except BaseException as exc:
                job_future.set_exception(exc)

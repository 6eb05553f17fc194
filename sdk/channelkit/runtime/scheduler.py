"""ONE scheduler thread for every timer in the process (or per channel).

Timers live in a heap guarded by a `threading.Condition`; when one is due the
scheduler hands its callback to a pool (it never runs user code on its own thread
unless no pool was given). ``call_later`` returns a `TimerHandle` whose
``cancel()`` stops the callback if it has not been handed over yet.

With a `FakeClock`, nothing fires until the test calls
``clock.advance(seconds)``; that call dispatches every due timer before it returns, so
tests are deterministic (follow it with ``pool.wait_idle()``).
"""

from __future__ import annotations

import heapq
import itertools
import logging
import math
import threading
from collections.abc import Callable
from typing import Any

from channelkit.errors import SchedulerClosed
from channelkit.runtime.clock import Clock, SystemClock
from channelkit.runtime.pool import Executor

__all__ = ["Scheduler", "SchedulerClosed", "TimerHandle"]

logger = logging.getLogger(__name__)

_MAX_REAL_WAIT = 30.0  # the scheduler thread re-checks at least this often


class TimerHandle:
    """A scheduled callback. ``cancel()`` returns True if it prevented the call."""

    __slots__ = ("_args", "_fn", "_lock", "_state", "when")

    def __init__(self, when: float, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self.when = when
        self._fn: Callable[..., Any] | None = fn
        self._args = args
        self._state = "pending"  # pending | fired | cancelled
        self._lock = threading.Lock()

    @property
    def cancelled(self) -> bool:
        return self._state == "cancelled"

    @property
    def fired(self) -> bool:
        return self._state == "fired"

    def cancel(self) -> bool:
        """Cancel the timer; False when it already fired or was cancelled."""
        with self._lock:
            if self._state != "pending":
                return False
            self._state = "cancelled"
            self._fn = None
            self._args = ()
            return True

    def _claim(self) -> tuple[Callable[..., Any], tuple[Any, ...]] | None:
        with self._lock:
            if self._state != "pending" or self._fn is None:
                return None
            self._state = "fired"
            fn, args = self._fn, self._args
            self._fn = None
            self._args = ()
            return fn, args

    def __repr__(self) -> str:
        return f"<TimerHandle when={self.when:.3f} {self._state}>"


class Scheduler:
    """Single-thread timer service: ``call_later(delay, fn, *args) -> TimerHandle``.

    ``pool`` receives due callbacks (``pool.post``); errors are logged, never raised.
    The thread starts on the first timer and is a daemon; ``stop(timeout)`` ends it. A
    manual clock (one with ``subscribe``, like `FakeClock`) needs no thread: its
    ``advance()`` hands every due timer to the pool before it returns.
    """

    def __init__(
        self, pool: Executor | None = None, *, clock: Clock | None = None, name: str = ""
    ) -> None:
        self.clock: Clock = clock if clock is not None else SystemClock()
        self._pool = pool
        self._name = name or "channelkit-scheduler"
        self._cond = threading.Condition(threading.Lock())
        self._heap: list[tuple[float, int, TimerHandle]] = []
        self._seq = itertools.count()
        self._next_compact = 64
        self._thread: threading.Thread | None = None
        self._stopped = False
        self._unsubscribe: Callable[[], None] | None = None
        subscribe = getattr(self.clock, "subscribe", None)
        self._manual = callable(subscribe)
        if callable(subscribe):
            self._unsubscribe = subscribe(self._dispatch_due)

    # -- public -----------------------------------------------------------------------

    def call_later(self, delay: float, fn: Callable[..., Any], /, *args: Any) -> TimerHandle:
        """Call ``fn(*args)`` on the pool after ``delay`` seconds of `clock` time."""
        delay = float(delay)
        if math.isnan(delay):
            raise ValueError("delay: must be a number of seconds, not NaN")
        return self.call_at(self.clock.now() + max(0.0, delay), fn, *args)

    def call_at(self, when: float, fn: Callable[..., Any], /, *args: Any) -> TimerHandle:
        """Call ``fn(*args)`` once ``clock.now() >= when``."""
        when = float(when)
        if math.isnan(when):
            # NaN compares false with everything: at the top of the heap it would
            # block every later timer.
            raise ValueError("when: must be a number, not NaN")
        handle = TimerHandle(when, fn, args)
        if when <= self.clock.now():
            with self._cond:
                if self._stopped:
                    raise SchedulerClosed("scheduler is stopped")
            self._fire(handle)
            return handle
        with self._cond:
            if self._stopped:
                raise SchedulerClosed("scheduler is stopped")
            heapq.heappush(self._heap, (when, next(self._seq), handle))
            self._compact_locked()
            # A manual clock fires due timers from advance() itself, on the advancing
            # thread, before advance() returns; it needs no thread. A thread popping
            # timers too could take them first and hand them to the pool only after
            # advance() returned, breaking "advance, then wait for the pool".
            if not self._manual:
                if self._thread is None:
                    self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
                    self._thread.start()
                elif self._heap[0][2] is handle:
                    self._cond.notify()
        return handle

    def pending_count(self) -> int:
        """Timers not yet fired or cancelled."""
        with self._cond:
            return sum(1 for _w, _s, h in self._heap if not h.cancelled)

    @property
    def thread_alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def stop(self, timeout: float = 5.0) -> None:
        """Drop every pending timer and end the scheduler thread (joined within timeout)."""
        with self._cond:
            self._stopped = True
            for _when, _seq, handle in self._heap:
                handle.cancel()
            self._heap.clear()
            self._cond.notify_all()
            thread = self._thread
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    # -- internals --------------------------------------------------------------------

    def _compact_locked(self) -> None:
        # Cancelled timers stay in the heap until due; rebuild when they dominate so
        # memory follows the number of live timers.
        if len(self._heap) >= self._next_compact:
            live = [e for e in self._heap if not e[2].cancelled]
            if len(live) < len(self._heap):
                heapq.heapify(live)
                self._heap = live
            self._next_compact = max(64, 2 * len(live))

    def _pop_due_locked(self, now: float) -> list[TimerHandle]:
        due: list[TimerHandle] = []
        heap = self._heap
        while heap and heap[0][0] <= now:
            due.append(heapq.heappop(heap)[2])
        return due

    def _dispatch_due(self) -> None:
        with self._cond:
            if self._stopped:
                return
            due = self._pop_due_locked(self.clock.now())
        for handle in due:
            self._fire(handle)

    def _fire(self, handle: TimerHandle) -> None:
        claimed = handle._claim()
        if claimed is None:
            return
        fn, args = claimed
        if self._pool is None:
            _run_logged(fn, args)
            return
        try:
            self._pool.post(_run_logged, fn, args)
        except Exception:
            logger.warning("scheduler could not hand a timer to the pool (pool closed?)")

    def _loop(self) -> None:
        while True:
            with self._cond:
                if self._stopped:
                    return
                now = self.clock.now()
                due = self._pop_due_locked(now)
                if not due:
                    if not self._heap:
                        wait = _MAX_REAL_WAIT
                    else:
                        wait = min(_MAX_REAL_WAIT, max(0.0, self._heap[0][0] - now))
                    self._cond.wait(timeout=wait)
                    continue
            for handle in due:
                self._fire(handle)


def _run_logged(fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
    try:
        fn(*args)
    except Exception:
        logger.exception("timer callback %r failed", getattr(fn, "__qualname__", fn))

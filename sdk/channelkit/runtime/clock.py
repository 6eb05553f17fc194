"""Clocks: the one place channelkit reads time, so tests can replace it.

``now()`` is monotonic seconds (use it for timers and TTLs); ``time()`` is wall-clock
seconds since the epoch (use it for timestamps shown to people). `FakeClock`
never moves by itself: tests call `FakeClock.advance()`, which also fires every
timer of a `Scheduler` that became due.
"""

from __future__ import annotations

import threading
import time as _time
from collections.abc import Callable
from typing import Protocol, runtime_checkable

__all__ = ["Clock", "FakeClock", "SystemClock"]


@runtime_checkable
class Clock(Protocol):
    """Source of time. Implementations are thread-safe."""

    def now(self) -> float:
        """Monotonic seconds; only differences are meaningful."""
        ...

    def time(self) -> float:
        """Wall-clock seconds since the Unix epoch."""
        ...


class SystemClock:
    """The real clock: ``time.monotonic()`` and ``time.time()``."""

    def now(self) -> float:
        return _time.monotonic()

    def time(self) -> float:
        return _time.time()


class FakeClock:
    """A manual clock for tests. Time moves only when `advance()` is called.

    Schedulers built on a FakeClock subscribe to it; ``advance(seconds)`` moves time and
    then, in the calling thread, hands every timer that became due to its pool (in due
    order). Use ``pool.wait_idle(timeout)`` afterwards to wait until those callbacks
    have finished.
    """

    def __init__(self, start: float = 1000.0, wall_start: float = 1_700_000_000.0) -> None:
        self._lock = threading.Lock()
        self._now = float(start)
        self._wall_offset = float(wall_start) - float(start)
        self._listeners: list[Callable[[], None]] = []

    def now(self) -> float:
        with self._lock:
            return self._now

    def time(self) -> float:
        with self._lock:
            return self._now + self._wall_offset

    def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds`` (>= 0) and fire timers that became due."""
        if seconds < 0:
            raise ValueError("seconds: must be >= 0")
        with self._lock:
            self._now += float(seconds)
            listeners = list(self._listeners)
        for listener in listeners:
            listener()

    def subscribe(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call ``listener()`` after every `advance()`; returns an unsubscriber."""
        with self._lock:
            self._listeners.append(listener)

        def unsubscribe() -> None:
            with self._lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return unsubscribe

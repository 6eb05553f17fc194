"""The per-run projection queue: card writes of one run, in the order the run made them.

Card writes of one run must reach the platform in order (finish the old output segment
-> create the question card -> the question's terminal update -> the next segment's
card). `ProjectionQueue` is a `SerialLane`: jobs
run one at a time in enqueue order on the pool, no thread is held while the queue is idle
or waiting on a reserved slot, and a thread that waits for a job drains the queue itself
when nobody else is running it, so a queued projection always has a thread that will run
it (see `channelkit.runtime.serial`).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from channelkit.runtime.serial import SerialLane, Slot

__all__ = ["ProjectionQueue", "Slot"]


class ProjectionQueue(SerialLane):
    """``ProjectionQueue(submit, name)``: ``submit`` takes one zero-argument callable and
    runs it on a pool thread (``pool.post``)."""

    def __init__(self, submit: Callable[[Callable[[], Any]], Any], name: str = "") -> None:
        super().__init__(submit, name=name or "projection queue")

    def enqueue(self, fn: Callable[[], Any], *, drain_here: bool = False) -> Future[Any]:
        """Queue ``fn``; the future completes with its result or exception.

        ``drain_here=True`` (for a caller that is about to wait for the result on a pool
        thread) runs the queue in the calling thread when nobody else is running it, so
        waiting does not need a second pool worker. Never use it on a web thread.
        """
        future = self.submit(fn)
        if drain_here:
            with self._cond:
                take = not self._active and bool(self._jobs) and self._jobs[0].ready
                if take:
                    self._active = True
            if take:
                self._drain(until=future)
        return future

"""An ordered projection queue with reservable slots (one per run).

Card writes of one run must reach the platform in the order the run produced them
(finish the old output segment -> create the question card -> the question's terminal
update -> the next segment's card). :class:`ProjectionQueue` runs jobs one at a time in
enqueue order through ``submit`` (the worker pool); no thread is held while the queue is
idle or waiting.

:meth:`ProjectionQueue.reserve` takes a place in the order *now* for a job that is only
known later (for example the terminal update of a question card whose responder is still
running): later jobs wait behind the reserved slot until :meth:`Slot.fill` (or
:meth:`Slot.skip`) is called. Always fill or skip a slot (use ``try/finally``).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

__all__ = ["ProjectionQueue", "Slot"]

logger = logging.getLogger(__name__)


class Slot:
    """A reserved place in a :class:`ProjectionQueue`."""

    __slots__ = ("_fn", "_future", "_queue", "_ready")

    def __init__(self, queue: ProjectionQueue) -> None:
        self._queue = queue
        self._fn: Callable[[], Any] | None = None
        self._ready = False
        self._future: Future[Any] = Future()

    @property
    def future(self) -> Future[Any]:
        """Completes with the job's result once it ran (None when skipped)."""
        return self._future

    def fill(self, fn: Callable[[], Any]) -> Future[Any]:
        """Provide the job; it runs when every earlier job has run. One-shot."""
        self._queue._fill(self, fn)
        return self._future

    def skip(self) -> None:
        """Release the place without running anything."""
        self._queue._fill(self, None)


class ProjectionQueue:
    """Runs jobs in order through ``submit``; see the module docstring."""

    def __init__(self, submit: Callable[[Callable[[], Any]], Any], name: str = "") -> None:
        self._submit = submit
        self._name = name
        self._lock = threading.Lock()
        self._slots: deque[Slot] = deque()
        self._draining = False

    def __len__(self) -> int:
        with self._lock:
            return len(self._slots)

    def enqueue(self, fn: Callable[[], Any], *, drain_here: bool = False) -> Future[Any]:
        """Queue ``fn``; the future completes with its result or exception.

        ``drain_here=True`` (for a caller that is about to wait for the result on a pool
        thread) runs the queue in the calling thread when nobody else is draining it,
        so waiting does not need a second pool worker. Never use it on a web thread.
        """
        slot = Slot(self)
        with self._lock:
            slot._fn = fn
            slot._ready = True
            self._slots.append(slot)
            inline = drain_here and not self._draining and self._slots[0]._ready
            if inline:
                self._draining = True
        if inline:
            self._drain()
        else:
            self._kick()
        return slot.future

    def call(self, fn: Callable[[], Any], timeout: float) -> Any:
        """Queue ``fn`` (draining here when idle) and wait up to ``timeout`` for its result.

        Raises ``concurrent.futures.TimeoutError`` when it did not run in time.
        """
        return self.enqueue(fn, drain_here=True).result(timeout=timeout)

    def reserve(self) -> Slot:
        """Take a place in the order now; fill it later."""
        slot = Slot(self)
        with self._lock:
            self._slots.append(slot)
        return slot

    def _fill(self, slot: Slot, fn: Callable[[], Any] | None) -> None:
        with self._lock:
            if slot._ready:
                return
            slot._fn = fn
            slot._ready = True
        self._kick()

    def _kick(self) -> None:
        with self._lock:
            if self._draining or not self._slots or not self._slots[0]._ready:
                return
            self._draining = True
        try:
            self._submit(self._drain)
        except Exception:
            logger.exception("projection queue %s could not submit", self._name)
            with self._lock:
                self._draining = False

    def _drain(self) -> None:
        while True:
            with self._lock:
                if not self._slots or not self._slots[0]._ready:
                    self._draining = False
                    return
                slot = self._slots.popleft()
            fn = slot._fn
            slot._fn = None
            if fn is None:
                slot.future.set_result(None)
                continue
            try:
                result = fn()
            except BaseException as exc:
                logger.debug("projection job failed in %s", self._name, exc_info=True)
                slot.future.set_exception(exc)
            else:
                slot.future.set_result(result)

"""Per-key serial queues on a shared pool.

Tasks posted under one key run one after another, in posting order, on pool threads;
tasks of different keys run in parallel. Posting never blocks. A failing task is logged
and does not stop the tasks behind it. A key's entry is removed as soon as its queue
drains, so the map holds only keys with work outstanding.

``ChannelBase`` runs every hook of one agent run on the run's lane (key = run id), and
adapters use the same class for their per-run projection queues.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Hashable
from concurrent.futures import Future
from typing import Any, TypeVar

from channelkit.runtime.pool import Executor

__all__ = ["KeyedSerialQueue", "SerialExecutor"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

_Item = tuple["Future[Any] | None", Callable[..., Any], tuple[Any, ...]]


class KeyedSerialQueue:
    """``post(key, fn, *args)`` / ``submit(key, fn, *args) -> Future``; FIFO per key."""

    def __init__(self, pool: Executor, *, name: str = "serial") -> None:
        self._pool = pool
        self._name = name
        self._lock = threading.Lock()
        self._lanes: dict[Hashable, deque[_Item]] = {}

    def post(self, key: Hashable, fn: Callable[..., Any], /, *args: Any) -> None:
        """Queue ``fn(*args)`` behind earlier tasks of ``key``; errors are logged."""
        self._add(key, (None, fn, args))

    def submit(self, key: Hashable, fn: Callable[..., T], /, *args: Any) -> Future[T]:
        """Like :meth:`post` but returns a Future with the task's result or exception."""
        future: Future[T] = Future()
        self._add(key, (future, fn, args))
        return future

    def pending(self, key: Hashable) -> int:
        """Tasks of ``key`` queued or running."""
        with self._lock:
            lane = self._lanes.get(key)
            return len(lane) if lane is not None else 0

    def __len__(self) -> int:
        """Keys with work outstanding."""
        with self._lock:
            return len(self._lanes)

    def _add(self, key: Hashable, item: _Item) -> None:
        with self._lock:
            lane = self._lanes.get(key)
            if lane is not None:
                lane.append(item)
                return
            self._lanes[key] = deque((item,))
        try:
            self._pool.post(self._drain, key)
        except Exception:
            with self._lock:
                self._lanes.pop(key, None)
            raise

    def _drain(self, key: Hashable) -> None:
        lock = self._lock
        lanes = self._lanes
        while True:
            with lock:
                lane = lanes[key]
                item = lane[0]
            future, fn, args = item
            if future is None:
                try:
                    fn(*args)
                except Exception:
                    logger.exception("%s task for %r failed", self._name, key)
            elif future.set_running_or_notify_cancel():
                try:
                    result = fn(*args)
                except BaseException as exc:
                    future.set_exception(exc)
                else:
                    future.set_result(result)
            with lock:
                lane.popleft()
                if not lane:
                    del lanes[key]
                    return


class SerialExecutor:
    """One serial lane on a pool: ``post``/``submit`` run in order, never in parallel."""

    def __init__(self, pool: Executor, *, name: str = "serial") -> None:
        self._queue = KeyedSerialQueue(pool, name=name)

    def post(self, fn: Callable[..., Any], /, *args: Any) -> None:
        self._queue.post(0, fn, *args)

    def submit(self, fn: Callable[..., T], /, *args: Any) -> Future[T]:
        return self._queue.submit(0, fn, *args)

    @property
    def pending(self) -> int:
        return self._queue.pending(0)

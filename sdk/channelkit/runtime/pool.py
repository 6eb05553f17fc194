"""A small bounded thread pool with ``wait_idle`` and a timed ``shutdown``.

Threads are started lazily, up to ``max_workers``, and live until ``shutdown``; they
are daemon threads, so a forgotten pool never blocks interpreter exit. ``submit``
returns a `concurrent.futures.Future`; ``post`` is the cheaper fire-and-forget
form whose errors are logged.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, Protocol, TypeVar

from channelkit.errors import PoolClosed
from channelkit.observability.tracing import bind

__all__ = ["ConcurrencyLimiter", "Executor", "PoolClosed", "WorkerPool"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

_Task = tuple["Future[Any] | None", Callable[..., Any], tuple[Any, ...]]


def run_task(
    future: Future[Any] | None, fn: Callable[..., Any], args: tuple[Any, ...], what: str
) -> None:
    """Run one task: a fire-and-forget task's exception is logged (never raised into the
    worker); a submitted task's outcome goes to its future (unless it was cancelled)."""
    if future is None:
        try:
            fn(*args)
        except Exception:
            logger.exception("%s %r failed", what, getattr(fn, "__qualname__", fn))
    elif future.set_running_or_notify_cancel():
        try:
            result = fn(*args)
        except BaseException as exc:
            future.set_exception(exc)
        else:
            future.set_result(result)


class Executor(Protocol):
    """What the serial queues and the limiter need from a pool."""

    def submit(self, fn: Callable[..., T], /, *args: Any) -> Future[T]: ...

    def post(self, fn: Callable[..., Any], /, *args: Any) -> None: ...


class WorkerPool:
    """Bounded pool: at most ``max_workers`` threads run submitted callables.

    ``wait_idle(timeout)`` blocks until no task is queued or running (do not call it from
    a pool thread: it would wait for itself). ``shutdown(wait, timeout)`` stops accepting
    work, lets queued tasks finish (or drops them with ``cancel_pending=True``) and joins
    the threads within ``timeout`` seconds.
    """

    def __init__(self, max_workers: int = 8, *, name: str = "channelkit-worker") -> None:
        if max_workers < 1:
            raise ValueError("max_workers: must be >= 1")
        self.max_workers = max_workers
        self._name = name
        self._lock = threading.Lock()
        self._work = threading.Condition(self._lock)
        self._idle = threading.Condition(self._lock)
        self._queue: deque[_Task] = deque()
        self._threads: list[threading.Thread] = []
        self._waiting = 0  # threads blocked waiting for work
        self._unfinished = 0  # queued + running
        self._shutdown = False

    # -- submitting -------------------------------------------------------------------

    def submit(self, fn: Callable[..., T], /, *args: Any) -> Future[T]:
        """Run ``fn(*args)`` on a worker; the Future carries its result or exception."""
        future: Future[T] = Future()
        self._enqueue((future, bind(fn), args))  # runs in the trace context of now
        return future

    def post(self, fn: Callable[..., Any], /, *args: Any) -> None:
        """Run ``fn(*args)`` on a worker without a Future; an exception is logged."""
        self._enqueue((None, bind(fn), args))

    def _enqueue(self, task: _Task) -> None:
        start = False
        with self._lock:
            if self._shutdown:
                raise PoolClosed("pool is shut down")
            self._queue.append(task)
            self._unfinished += 1
            if self._waiting > 0:
                self._work.notify()
            # A notified worker counts as waiting until it wakes, so compare the queue
            # with the waiting workers: two tasks queued before one idle worker wakes
            # need a second thread, or the second waits behind the first's whole run.
            if len(self._queue) > self._waiting and len(self._threads) < self.max_workers:
                start = True
                thread = threading.Thread(
                    target=self._worker,
                    name=f"{self._name}-{len(self._threads) + 1}",
                    daemon=True,
                )
                self._threads.append(thread)
        if start:
            thread.start()

    # -- workers ----------------------------------------------------------------------

    def _worker(self) -> None:
        while True:
            with self._lock:
                while not self._queue:
                    if self._shutdown:
                        return
                    self._waiting += 1
                    self._work.wait(timeout=1.0)
                    self._waiting -= 1
                future, fn, args = self._queue.popleft()
            try:
                run_task(future, fn, args, "pool task")
            finally:
                with self._lock:
                    self._unfinished -= 1
                    if self._unfinished == 0:
                        self._idle.notify_all()

    # -- introspection and lifecycle ---------------------------------------------------

    @property
    def thread_count(self) -> int:
        """Threads started so far (never more than ``max_workers``)."""
        with self._lock:
            return len(self._threads)

    @property
    def unfinished(self) -> int:
        """Tasks queued or running."""
        with self._lock:
            return self._unfinished

    def wait_idle(self, timeout: float = 5.0) -> bool:
        """Block until no task is queued or running; False if ``timeout`` passed first."""
        with self._lock:
            return self._idle.wait_for(lambda: self._unfinished == 0, timeout=timeout)

    def shutdown(
        self, wait: bool = True, timeout: float = 5.0, *, cancel_pending: bool = False
    ) -> bool:
        """Stop accepting work; with ``wait`` join the threads within ``timeout``.

        Returns True when every thread has exited (always True when ``wait`` is False
        and no thread was running).
        """
        with self._lock:
            self._shutdown = True
            if cancel_pending:
                while self._queue:
                    future, _fn, _args = self._queue.popleft()
                    self._unfinished -= 1
                    if future is not None:
                        future.cancel()
                if self._unfinished == 0:
                    self._idle.notify_all()
            self._work.notify_all()
            threads = list(self._threads)
        if not wait:
            return not any(t.is_alive() for t in threads)
        import time

        deadline = time.monotonic() + timeout
        current = threading.current_thread()
        for thread in threads:
            if thread is current:
                continue
            thread.join(max(0.0, deadline - time.monotonic()))
        return not any(t.is_alive() for t in threads if t is not current)

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()


class ConcurrencyLimiter:
    """Runs at most ``limit`` of its tasks at once on ``pool``; the rest wait in order.

    Waiting tasks hold no thread. ``ChannelBase`` uses one to cap concurrent agent runs
    below the pool size so hook lanes and timers always find a free worker.
    """

    def __init__(self, pool: Executor, limit: int) -> None:
        if limit < 1:
            raise ValueError("limit: must be >= 1")
        self._pool = pool
        self.limit = limit
        self._lock = threading.Lock()
        self._running = 0
        self._waiting: deque[tuple[Future[Any] | None, Callable[..., Any], tuple[Any, ...]]] = (
            deque()
        )

    def submit(self, fn: Callable[..., T], /, *args: Any) -> Future[T]:
        future: Future[T] = Future()
        self._admit((future, fn, args))
        return future

    def post(self, fn: Callable[..., Any], /, *args: Any) -> None:
        self._admit((None, fn, args))

    @property
    def running(self) -> int:
        with self._lock:
            return self._running

    def _admit(self, task: _Task) -> None:
        with self._lock:
            if self._running >= self.limit:
                self._waiting.append(task)
                return
            self._running += 1
        self._start(task)

    def _start(self, task: _Task) -> None:
        try:
            self._pool.post(self._run, task)
        except Exception:
            with self._lock:
                self._running -= 1
            raise

    def _run(self, task: _Task) -> None:
        future, fn, args = task
        try:
            run_task(future, fn, args, "limited task")
        finally:
            with self._lock:
                nxt = self._waiting.popleft() if self._waiting else None
                if nxt is None:
                    self._running -= 1
            if nxt is not None:
                try:
                    self._pool.post(self._run, nxt)
                except Exception:
                    # The pool no longer takes work (shut down): nothing queued here can
                    # ever start, so cancel every waiting future instead of leaving its
                    # waiters blocked forever.
                    with self._lock:
                        self._running -= 1
                        dropped = [nxt, *self._waiting]
                        self._waiting.clear()
                    logger.warning(
                        "pool refused work; cancelling %d waiting limited task(s)", len(dropped)
                    )
                    for nf, _fn, _args in dropped:
                        if nf is not None:
                            nf.cancel()

"""Serial lanes on a shared pool: the one implementation of "run these jobs in order".

A `SerialLane` runs its jobs one after another, in the order they were queued,
on pool threads; posting never blocks. A failing job is logged (or reaches its Future)
and does not stop the jobs behind it. `KeyedSerialQueue` holds one lane per key
(run id, chat, ...), created on demand and dropped as soon as it drains, so its map holds
only keys with work outstanding.

Liveness: a lane never needs a *free* pool worker to make progress for someone who is
waiting on it. `SerialLane.wait()` (and `SerialLane.call()`) drains the lane in
the waiting thread whenever no thread is actively running it, so a pool task may wait
for a job of another lane of the same pool even when every worker is busy (with a pool
of one worker, too). The pool task the lane queued for itself finds the work done and
returns. A wait's timeout is therefore a fault path (a job that hangs), never the normal
one.

The Futures a lane hands out (`SerialLane.submit()`, `KeyedSerialQueue.submit()`,
`Slot.future`) keep that promise too: ``future.result(timeout)`` and
``future.exception(timeout)`` help to drain the lane exactly like `SerialLane.wait()`,
so a hook that waits for a card write of its run with a plain ``future.result(...)`` never
holds the only worker the card write needs.

`SerialLane.reserve()` takes a place in the order *now* for a job that is known only
later (the terminal update of a question card whose responder is still running); jobs
behind it wait until `Slot.fill()` or `Slot.skip()`. Always fill or skip a slot.

``ChannelBase`` runs every hook of one agent run on the run's lane (key = run id);
adapters use the same classes for their per-run projection queues.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable
from concurrent.futures import Future
from typing import Any, TypeVar

from channelkit.observability.tracing import bind
from channelkit.runtime.pool import Executor

__all__ = ["KeyedSerialQueue", "LaneFuture", "SerialExecutor", "SerialLane", "Slot"]

logger = logging.getLogger(__name__)

T = TypeVar("T")


class LaneFuture(Future[T]):
    """The Future of a lane job: waiting for it drains the lane in the waiting thread
    whenever nobody else is running it (see the module docstring).

    A wait from inside a job of the same lane cannot help (the lane is busy running the
    waiter); it waits like a plain Future, so give it a timeout.
    """

    def __init__(self, lane: SerialLane | None = None) -> None:
        super().__init__()
        self._lane = lane

    def result(self, timeout: float | None = None) -> T:
        self._help(timeout)
        return super().result(timeout=0 if self.done() else timeout)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        self._help(timeout)
        return super().exception(timeout=0 if self.done() else timeout)

    def _help(self, timeout: float | None) -> None:
        lane = self._lane
        if lane is None or self.done():
            return
        if timeout is not None and (not math.isfinite(timeout) or timeout < 0):
            return  # Future.result reports the bad timeout as it always did
        lane._help(self, None if timeout is None else time.monotonic() + timeout)


class _Job:
    __slots__ = ("args", "fn", "future", "ready")

    def __init__(
        self,
        fn: Callable[..., Any] | None,
        args: tuple[Any, ...],
        future: Future[Any] | None,
        ready: bool,
    ) -> None:
        self.fn = fn if fn is None else bind(fn)  # runs in the trace context of now
        self.args = args
        self.future = future
        self.ready = ready


class Slot:
    """A reserved place in a `SerialLane`."""

    __slots__ = ("_job", "_lane")

    def __init__(self, lane: SerialLane, job: _Job) -> None:
        self._lane = lane
        self._job = job

    @property
    def future(self) -> Future[Any]:
        """Completes with the job's result once it ran (None when skipped)."""
        future = self._job.future
        assert future is not None
        return future

    def fill(self, fn: Callable[[], Any]) -> Future[Any]:
        """Provide the job; it runs when every earlier job has run. One-shot."""
        self._lane._fill(self._job, fn)
        return self.future

    def skip(self) -> None:
        """Release the place without running anything."""
        self._lane._fill(self._job, None)


class SerialLane:
    """Jobs run in order through ``executor.post``; see the module docstring.

    ``executor`` is anything with ``post(fn, *args)`` (a `WorkerPool`) or a plain
    callable taking one zero-argument callable. ``on_idle`` is called (outside the lane's
    lock) each time the lane drains empty.
    """

    def __init__(
        self,
        executor: Executor | Callable[[Callable[[], Any]], Any],
        *,
        name: str = "serial",
        on_idle: Callable[[SerialLane], None] | None = None,
    ) -> None:
        post = getattr(executor, "post", None)
        self._post: Callable[[Callable[[], Any]], Any] = (
            post if callable(post) else executor  # type: ignore[assignment]
        )
        self.name = name
        self._on_idle = on_idle
        self._cond = threading.Condition(threading.Lock())
        self._jobs: deque[_Job] = deque()
        self._active = False  # a thread is inside the drain loop
        self._scheduled = False  # a pool task is queued and has not started yet
        self._running = False  # a job is executing right now
        self.key: Hashable = None  # set by KeyedSerialQueue

    # -- queueing ---------------------------------------------------------------------

    def post(self, fn: Callable[..., Any], /, *args: Any) -> None:
        """Queue ``fn(*args)``; an exception it raises is logged."""
        self._append(_Job(fn, args, None, True))

    def submit(self, fn: Callable[..., T], /, *args: Any) -> Future[T]:
        """Queue ``fn(*args)``; the Future carries its result or exception."""
        future: LaneFuture[T] = LaneFuture(self)
        self._append(_Job(fn, args, future, True))
        return future

    def enqueue(self, fn: Callable[[], Any]) -> Future[Any]:
        """Queue the zero-argument ``fn``; same as ``submit(fn)``."""
        return self.submit(fn)

    def reserve(self) -> Slot:
        """Take a place in the order now; fill it later."""
        job = _Job(None, (), LaneFuture(self), False)
        with self._cond:
            self._jobs.append(job)
        return Slot(self, job)

    def call(self, fn: Callable[[], T], timeout: float) -> T:
        """Queue ``fn`` and wait (helping to drain) up to ``timeout`` s for its result.

        Raises ``concurrent.futures.TimeoutError`` when it did not run in time.
        """
        return self.wait(self.submit(fn), timeout)

    def wait(self, future: Future[T], timeout: float) -> T:
        """Wait for ``future`` (a job of this lane), running the lane here when idle.

        Never call it from a job of this same lane (it would wait for itself).
        """
        if not math.isfinite(timeout) or timeout < 0:
            raise ValueError(f"timeout: must be a finite number >= 0, got {timeout!r}")
        self._help(future, time.monotonic() + timeout)
        return Future.result(future, timeout=0)

    def _help(self, future: Future[Any], deadline: float | None) -> None:
        """Until ``future`` is done or ``deadline`` (monotonic; None: no deadline) passed,
        run the lane here whenever no other thread is running it."""
        while not future.done():
            with self._cond:
                if future.done():
                    break
                take = not self._active and bool(self._jobs) and self._jobs[0].ready
                if take:
                    self._active = True
                else:
                    if deadline is None:
                        self._cond.wait()
                        continue
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        break
                    self._cond.wait(remaining)
                    continue
            self._drain(until=future)

    def __len__(self) -> int:
        """Jobs queued or running."""
        with self._cond:
            return len(self._jobs) + (1 if self._running else 0)

    @property
    def idle(self) -> bool:
        """Nothing queued, nothing running."""
        with self._cond:
            return not self._jobs and not self._active and not self._running

    # -- draining ---------------------------------------------------------------------

    def _append(self, job: _Job) -> None:
        with self._cond:
            self._jobs.append(job)
            kick = self._should_kick_locked()
        if kick:
            self._kick()

    def _fill(self, job: _Job, fn: Callable[[], Any] | None) -> None:
        with self._cond:
            if job.ready:
                return
            job.fn = fn if fn is None else bind(fn)
            job.ready = True
            kick = self._should_kick_locked()
            self._cond.notify_all()  # a waiter may take the drain over
        if kick:
            self._kick()

    def _should_kick_locked(self) -> bool:
        if self._active or self._scheduled or not self._jobs or not self._jobs[0].ready:
            return False
        self._scheduled = True
        return True

    def _kick(self) -> None:
        try:
            self._post(self._pool_drain)
        except Exception:
            with self._cond:
                self._scheduled = False
                self._cond.notify_all()
            raise

    def _pool_drain(self) -> None:
        with self._cond:
            self._scheduled = False
            if self._active:
                return  # a waiter took over
            self._active = True
        self._drain()

    def _drain(self, until: Future[Any] | None = None) -> None:
        """Run ready jobs in order; the caller set ``_active``."""
        idle = False
        while True:
            with self._cond:
                head = self._jobs[0] if self._jobs else None
                if head is None or not head.ready or (until is not None and until.done()):
                    self._active = False
                    idle = head is None
                    kick = until is not None and self._should_kick_locked()
                    self._cond.notify_all()
                    break
                self._jobs.popleft()
                self._running = True
            try:
                self._run(head)
            finally:
                with self._cond:
                    self._running = False
                    self._cond.notify_all()
        if kick:
            try:
                self._kick()
            except Exception:
                logger.exception("%s: could not hand the rest of the lane to the pool", self.name)
        if idle and self._on_idle is not None:
            self._on_idle(self)

    def _run(self, job: _Job) -> None:
        fn, args, future = job.fn, job.args, job.future
        job.fn, job.args = None, ()
        if fn is None:  # a skipped slot
            if future is not None and not future.done():
                future.set_result(None)
            return
        if future is None:
            try:
                fn(*args)
            except Exception:
                logger.exception("%s task %r failed", self.name, getattr(fn, "__qualname__", fn))
            return
        if not future.set_running_or_notify_cancel():
            return
        try:
            result = fn(*args)
        except BaseException as exc:
            logger.debug("%s job failed", self.name, exc_info=True)
            future.set_exception(exc)
        else:
            future.set_result(result)


class KeyedSerialQueue:
    """``post(key, fn, *args)`` / ``submit(key, fn, *args) -> Future``; FIFO per key."""

    def __init__(self, pool: Executor, *, name: str = "serial") -> None:
        self._pool = pool
        self._name = name
        self._lock = threading.Lock()
        self._lanes: dict[Hashable, SerialLane] = {}

    def post(self, key: Hashable, fn: Callable[..., Any], /, *args: Any) -> None:
        """Queue ``fn(*args)`` behind earlier tasks of ``key``; errors are logged."""
        self._add(key, _Job(fn, args, None, True))

    def submit(self, key: Hashable, fn: Callable[..., T], /, *args: Any) -> Future[T]:
        """Like `post()` but returns a Future with the task's result or exception
        (a `LaneFuture`: waiting for it helps to drain the key's lane)."""
        future: LaneFuture[T] = LaneFuture()
        future._lane = self._add(key, _Job(fn, args, future, True))
        return future

    def call(self, key: Hashable, fn: Callable[..., T], timeout: float, *args: Any) -> T:
        """Submit under ``key`` and wait (helping to drain) up to ``timeout`` seconds."""
        future: LaneFuture[T] = LaneFuture()
        lane = future._lane = self._add(key, _Job(fn, args, future, True))
        return lane.wait(future, timeout)

    def wait(self, key: Hashable, future: Future[T], timeout: float) -> T:
        """Wait for ``future`` (a task of ``key``), draining that lane here when idle."""
        with self._lock:
            lane = self._lanes.get(key)
        if lane is None:
            return future.result(timeout=timeout)
        return lane.wait(future, timeout)

    def pending(self, key: Hashable) -> int:
        """Tasks of ``key`` queued or running."""
        with self._lock:
            lane = self._lanes.get(key)
        return len(lane) if lane is not None else 0

    def __len__(self) -> int:
        """Keys with work outstanding."""
        with self._lock:
            return len(self._lanes)

    def _add(self, key: Hashable, job: _Job) -> SerialLane:
        with self._lock:
            lane = self._lanes.get(key)
            if lane is None:
                lane = self._lanes[key] = SerialLane(
                    self._pool, name=f"{self._name} {key!r}", on_idle=self._forget
                )
                lane.key = key
            # Appended under our lock so _forget cannot drop a lane that just got work.
            with lane._cond:
                lane._jobs.append(job)
                kick = lane._should_kick_locked()
        if kick:
            try:
                lane._kick()
            except Exception:
                with self._lock, lane._cond:
                    if lane._jobs and lane._jobs[-1] is job:
                        lane._jobs.pop()
                    if not lane._jobs and self._lanes.get(key) is lane:
                        del self._lanes[key]
                raise
        return lane

    def _forget(self, lane: SerialLane) -> None:
        with self._lock:
            if self._lanes.get(lane.key) is not lane:
                return
            with lane._cond:
                if lane._jobs or lane._active or lane._running or lane._scheduled:
                    return
            del self._lanes[lane.key]


class SerialExecutor:
    """One serial lane on a pool: ``post``/``submit`` run in order, never in parallel."""

    def __init__(self, pool: Executor, *, name: str = "serial") -> None:
        self._lane = SerialLane(pool, name=name)

    def post(self, fn: Callable[..., Any], /, *args: Any) -> None:
        self._lane.post(fn, *args)

    def submit(self, fn: Callable[..., T], /, *args: Any) -> Future[T]:
        return self._lane.submit(fn, *args)

    @property
    def pending(self) -> int:
        return len(self._lane)

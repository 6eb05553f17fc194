"""channelkit.runtime: the threads, timers and bounded maps everything else runs on.

* :class:`WorkerPool` - bounded thread pool (``submit``/``post``, ``wait_idle``,
  ``shutdown``); :class:`ConcurrencyLimiter` caps how many of some tasks run at once.
* :class:`Scheduler` - ONE daemon thread owning every timer (``call_later`` ->
  :class:`TimerHandle` with ``cancel()``); due callbacks run on a pool.
* :class:`KeyedSerialQueue` / :class:`SerialExecutor` - per-key FIFO lanes on a pool.
* :class:`BoundedMap` - cachetools TTL/FIFO/LRU map behind an RLock, max 1,000 entries.
* :class:`Clock`, :class:`SystemClock`, :class:`FakeClock` - injected time.

See ``docs/core.md`` for how adapters use them.
"""

from channelkit.runtime.clock import Clock, FakeClock, SystemClock
from channelkit.runtime.maps import DEFAULT_MAXSIZE, BoundedMap
from channelkit.runtime.pool import ConcurrencyLimiter, Executor, PoolClosed, WorkerPool
from channelkit.runtime.scheduler import Scheduler, SchedulerClosed, TimerHandle
from channelkit.runtime.serial import KeyedSerialQueue, SerialExecutor

__all__ = [
    "DEFAULT_MAXSIZE",
    "BoundedMap",
    "Clock",
    "ConcurrencyLimiter",
    "Executor",
    "FakeClock",
    "KeyedSerialQueue",
    "PoolClosed",
    "Scheduler",
    "SchedulerClosed",
    "SerialExecutor",
    "SystemClock",
    "TimerHandle",
    "WorkerPool",
]

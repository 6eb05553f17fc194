"""channelkit.runtime: the threads, timers and bounded maps everything else runs on.

* `WorkerPool` - bounded thread pool (``submit``/``post``, ``wait_idle``,
  ``shutdown``); `ConcurrencyLimiter` caps how many of some tasks run at once.
* `Scheduler` - ONE daemon thread owning every timer (``call_later`` ->
  `TimerHandle` with ``cancel()``); due callbacks run on a pool.
* `KeyedSerialQueue` / `SerialExecutor` - per-key FIFO lanes on a pool.
* `BoundedMap` - cachetools TTL/FIFO/LRU map behind an RLock, max 1,000 entries.
* `Clock`, `SystemClock`, `FakeClock` - injected time.

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

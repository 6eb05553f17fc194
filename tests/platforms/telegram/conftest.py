from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from channelkit.runtime import FakeClock, KeyedSerialQueue, Scheduler, WorkerPool


class Runtime:
    def __init__(self) -> None:
        self.clock = FakeClock()
        self.pool = WorkerPool(8, name="platform-test")
        self.scheduler = Scheduler(self.pool, clock=self.clock)
        self.serial = KeyedSerialQueue(self.pool)

    def settle(self) -> None:
        assert self.pool.wait_idle(5.0)

    def wait_for(self, condition, timeout: float = 5.0) -> None:  # type: ignore[no-untyped-def]
        """Wait (bounded) for worker threads to make ``condition()`` true."""
        deadline = threading.Event()
        for _ in range(int(timeout / 0.005)):
            if condition():
                return
            deadline.wait(0.005)
        assert condition(), "condition not reached"

    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)
        self.settle()

    def close(self) -> None:
        self.scheduler.stop(1.0)
        self.pool.shutdown(wait=True, timeout=2.0)


@pytest.fixture
def rt() -> Iterator[Runtime]:
    runtime = Runtime()
    yield runtime
    runtime.close()

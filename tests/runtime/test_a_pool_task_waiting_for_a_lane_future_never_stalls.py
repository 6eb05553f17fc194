"""A pool task that waits for a lane job's Future never holds the worker that job needs.

With one worker, a hook (a pool task) that queues a card write on another lane of the same
pool and waits for it with a plain ``future.result(timeout)`` used to wait until its
timeout: the write's drain task sat behind the waiter in the pool's queue. A lane's
Futures drain the lane in the waiting thread, so the wait ends as soon as the write ran.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import TimeoutError as FutureTimeout

import pytest
from channelkit.runtime import KeyedSerialQueue, WorkerPool
from channelkit.runtime.serial import LaneFuture, SerialLane

WAIT_S = 5.0


@pytest.fixture
def pool():
    pool = WorkerPool(1, name="one-worker")
    yield pool
    pool.shutdown()


def test_a_hook_waits_for_a_card_write_on_a_one_worker_pool(pool: WorkerPool) -> None:
    cards = KeyedSerialQueue(pool, name="cards")
    done = threading.Event()
    took: list[float] = []

    def hook() -> None:
        started = time.monotonic()
        future = cards.submit("run-1", lambda: "written")
        assert isinstance(future, LaneFuture)
        assert future.result(timeout=WAIT_S) == "written"
        took.append(time.monotonic() - started)
        done.set()

    pool.post(hook)
    assert done.wait(WAIT_S + 1), "the hook never finished"
    assert took[0] < WAIT_S / 2, f"the hook waited {took[0]:.1f} s for its own pool"


def test_many_waiting_hooks_on_one_worker_each_get_their_write(pool: WorkerPool) -> None:
    cards = KeyedSerialQueue(pool, name="cards")
    results: list[str] = []
    lock = threading.Lock()

    def hook(i: int) -> None:
        value = cards.submit(f"run-{i}", lambda: f"card {i}").result(timeout=WAIT_S)
        with lock:
            results.append(value)

    started = time.monotonic()
    for i in range(64):
        pool.post(hook, i)
    assert pool.wait_idle(WAIT_S * 2)
    assert sorted(results) == sorted(f"card {i}" for i in range(64))
    assert time.monotonic() - started < WAIT_S


def test_order_is_kept_when_the_waiter_drains(pool: WorkerPool) -> None:
    lane = SerialLane(pool, name="run")
    out: list[int] = []
    gate = threading.Event()
    result: list[object] = []

    def waiter() -> None:
        for i in range(5):
            lane.post(out.append, i)
        last = lane.submit(lambda: list(out))
        result.append(last.result(timeout=WAIT_S))
        gate.set()

    pool.post(waiter)
    assert gate.wait(WAIT_S + 1)
    assert result == [[0, 1, 2, 3, 4]]


def test_a_reserved_slot_still_holds_the_waiter_until_filled(pool: WorkerPool) -> None:
    lane = SerialLane(pool, name="run")
    slot = lane.reserve()
    behind = lane.submit(lambda: "behind")
    with pytest.raises(FutureTimeout):
        behind.result(timeout=0.05)
    slot.fill(lambda: "slot")
    assert behind.result(timeout=WAIT_S) == "behind"
    assert slot.future.result(timeout=WAIT_S) == "slot"


def test_exception_helps_too(pool: WorkerPool) -> None:
    cards = KeyedSerialQueue(pool, name="cards")
    box: list[BaseException | None] = []
    done = threading.Event()

    def boom() -> None:
        raise ValueError("card refused")

    def hook() -> None:
        box.append(cards.submit("run", boom).exception(timeout=WAIT_S))
        done.set()

    pool.post(hook)
    assert done.wait(WAIT_S + 1)
    assert isinstance(box[0], ValueError)

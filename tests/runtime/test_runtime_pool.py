from __future__ import annotations

import sys
import threading
import time
from concurrent.futures import CancelledError

import pytest
from channelkit.runtime import ConcurrencyLimiter, PoolClosed, WorkerPool


def test_submit_returns_future_with_result_and_exception():
    pool = WorkerPool(2)
    assert pool.submit(lambda a, b: a + b, 2, 3).result(5) == 5

    def boom() -> None:
        raise ValueError("bad")

    with pytest.raises(ValueError, match="bad"):
        pool.submit(boom).result(5)
    assert pool.shutdown(timeout=5)


def test_threads_are_bounded_and_lazy():
    pool = WorkerPool(3)
    assert pool.thread_count == 0
    release = threading.Event()
    started = threading.Semaphore(0)

    def work() -> None:
        started.release()
        release.wait(5)

    for _ in range(10):
        pool.post(work)
    for _ in range(3):
        assert started.acquire(timeout=5)
    assert pool.thread_count == 3
    assert pool.unfinished == 10
    release.set()
    assert pool.wait_idle(5)
    assert pool.thread_count == 3
    assert pool.shutdown(timeout=5)


def test_wait_idle_times_out_while_busy():
    pool = WorkerPool(1)
    release = threading.Event()
    pool.post(release.wait, 5)
    assert pool.wait_idle(0.05) is False
    release.set()
    assert pool.wait_idle(5) is True
    pool.shutdown()


def test_post_logs_errors_and_keeps_working(caplog):
    pool = WorkerPool(1)

    def boom() -> None:
        raise RuntimeError("kaput")

    pool.post(boom)
    assert pool.submit(lambda: 7).result(5) == 7
    assert "kaput" in caplog.text
    pool.shutdown()


def test_shutdown_joins_and_refuses_new_work():
    pool = WorkerPool(2)
    done = []
    for i in range(5):
        pool.post(done.append, i)
    assert pool.shutdown(wait=True, timeout=5)
    assert sorted(done) == [0, 1, 2, 3, 4]
    with pytest.raises(PoolClosed):
        pool.post(done.append, 9)


def test_shutdown_cancel_pending_drops_queued():
    pool = WorkerPool(1)
    release = threading.Event()
    pool.post(release.wait, 5)
    queued = pool.submit(lambda: 1)
    pool.shutdown(wait=False, cancel_pending=True)
    assert queued.cancelled()
    release.set()
    assert pool.shutdown(wait=True, timeout=5)


def test_limiter_caps_concurrency_and_runs_everything():
    pool = WorkerPool(8)
    limiter = ConcurrencyLimiter(pool, 2)
    lock = threading.Lock()
    running = 0
    peak = 0
    gate = threading.Barrier(2, timeout=5)

    def work(i: int) -> int:
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        if i < 2:
            gate.wait()  # the first two really overlap
        with lock:
            running -= 1
        return i

    futures = [limiter.submit(work, i) for i in range(20)]
    assert [f.result(5) for f in futures] == list(range(20))
    assert peak == 2
    assert limiter.running == 0
    pool.shutdown()


def test_limiter_cancels_every_waiting_task_when_the_pool_closes_under_it():
    pool = WorkerPool(2)
    limiter = ConcurrencyLimiter(pool, 1)
    started = threading.Event()
    release = threading.Event()

    def blocker() -> str:
        started.set()
        assert release.wait(5)
        return "first"

    first = limiter.submit(blocker)
    assert started.wait(5)
    waiting = [limiter.submit(lambda i=i: i) for i in range(3)]
    pool.shutdown(wait=False)  # the pool stops taking work while the limiter holds 3
    release.set()
    assert first.result(5) == "first"
    # Nothing may hang: each queued future is resolved (cancelled), none is left pending.
    for future in waiting:
        with pytest.raises(CancelledError):
            future.result(5)
    assert limiter.running == 0
    with pytest.raises(PoolClosed):
        limiter.submit(lambda: None)
    assert pool.shutdown(timeout=5)


def test_tasks_queued_together_get_their_own_threads():
    # One idle worker, two tasks queued before it wakes: the second must not wait for
    # the first while the pool is below max_workers (it used to: one notify, no thread).
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1.0)  # make "before it wakes" deterministic
    pool = WorkerPool(4)
    release = threading.Event()
    try:
        pool.submit(lambda: None).result(5)
        assert pool.wait_idle(5)
        deadline = time.monotonic() + 5
        while pool._waiting != 1:  # the worker parks right after finishing
            assert time.monotonic() < deadline
            time.sleep(0.001)  # state poll, not a timer wait
        started = [threading.Event(), threading.Event()]
        for ev in started:
            pool.post(lambda ev=ev: (ev.set(), release.wait(5)))
        assert started[0].wait(5)
        assert started[1].wait(5), "second task starved behind the first"
    finally:
        sys.setswitchinterval(previous)
        release.set()
        pool.shutdown(timeout=5)

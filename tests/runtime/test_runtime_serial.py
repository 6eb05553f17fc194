from __future__ import annotations

import threading

from channelkit.runtime import KeyedSerialQueue, SerialExecutor, WorkerPool


def test_tasks_of_one_key_run_in_order_without_blocking_the_caller():
    pool = WorkerPool(4)
    queue = KeyedSerialQueue(pool)
    release = threading.Event()
    out: list[int] = []
    queue.post("k", release.wait, 5)  # blocks the lane, not the caller
    for i in range(50):
        queue.post("k", out.append, i)
    assert out == []
    assert queue.pending("k") == 51
    release.set()
    assert pool.wait_idle(5)
    assert out == list(range(50))
    assert len(queue) == 0  # drained keys are removed
    pool.shutdown()


def test_keys_run_in_parallel():
    pool = WorkerPool(4)
    queue = KeyedSerialQueue(pool)
    barrier = threading.Barrier(3, timeout=5)
    results = [queue.submit(k, barrier.wait) for k in ("a", "b", "c")]
    for f in results:
        f.result(5)
    pool.shutdown()


def test_errors_are_logged_and_do_not_break_the_chain(caplog):
    pool = WorkerPool(2)
    queue = KeyedSerialQueue(pool, name="lane")
    out: list[str] = []

    def boom() -> None:
        raise RuntimeError("lane boom")

    queue.post("k", out.append, "a")
    queue.post("k", boom)
    failed = queue.submit("k", boom)
    queue.post("k", out.append, "b")
    assert pool.wait_idle(5)
    assert out == ["a", "b"]
    assert isinstance(failed.exception(5), RuntimeError)
    assert "lane boom" in caplog.text
    pool.shutdown()


def test_map_stays_bounded_with_many_keys():
    pool = WorkerPool(4)
    queue = KeyedSerialQueue(pool)
    for i in range(2000):
        queue.post(i, lambda: None)
    assert pool.wait_idle(5)
    assert len(queue) == 0
    pool.shutdown()


def test_serial_executor():
    pool = WorkerPool(4)
    ex = SerialExecutor(pool)
    out: list[int] = []
    futures = [ex.submit(out.append, i) for i in range(20)]
    for f in futures:
        f.result(5)
    assert out == list(range(20))
    pool.shutdown()

from __future__ import annotations

import threading

import pytest
from channelkit.runtime import FakeClock, Scheduler, SchedulerClosed, SystemClock, WorkerPool


@pytest.fixture
def pool():
    p = WorkerPool(4)
    yield p
    p.shutdown(timeout=5)


def test_fake_clock_advance_fires_due_timers_in_order(pool):
    clock = FakeClock()
    sched = Scheduler(pool, clock=clock)
    fired: list[str] = []
    lock = threading.Lock()

    def rec(name: str) -> None:
        with lock:
            fired.append(name)

    sched.call_later(5, rec, "b")
    sched.call_later(1, rec, "a")
    sched.call_later(10, rec, "c")
    clock.advance(4.9)
    assert pool.wait_idle(5)
    assert fired == ["a"]
    clock.advance(0.1)
    assert pool.wait_idle(5)
    assert fired == ["a", "b"]
    clock.advance(100)
    assert pool.wait_idle(5)
    assert fired == ["a", "b", "c"]
    assert sched.pending_count() == 0
    sched.stop()


def test_cancel_prevents_callback_and_reports(pool):
    clock = FakeClock()
    sched = Scheduler(pool, clock=clock)
    fired = []
    handle = sched.call_later(1, fired.append, 1)
    assert handle.cancel() is True
    assert handle.cancel() is False
    assert handle.cancelled
    clock.advance(2)
    assert pool.wait_idle(5)
    assert fired == []
    done = sched.call_later(1, fired.append, 2)
    clock.advance(1)
    assert pool.wait_idle(5)
    assert fired == [2]
    assert done.fired and done.cancel() is False
    sched.stop()


def test_zero_delay_runs_without_advancing(pool):
    sched = Scheduler(pool, clock=FakeClock())
    fired = []
    sched.call_later(0, fired.append, "now")
    assert pool.wait_idle(5)
    assert fired == ["now"]
    sched.stop()


def test_one_thread_for_many_timers(pool):
    # a real clock: the timers (10 s and later) stay pending while the test looks
    sched = Scheduler(pool, clock=SystemClock(), name="ck-test-sched")
    before = threading.active_count()
    handles = [sched.call_later(10 + i % 50, lambda: None) for i in range(5000)]
    assert threading.active_count() - before <= 1
    assert sched.pending_count() == 5000
    for h in handles[::2]:
        h.cancel()
    assert sched.pending_count() == 2500
    names = [t.name for t in threading.enumerate() if t.name == "ck-test-sched"]
    assert len(names) == 1
    sched.stop()
    assert not sched.thread_alive


def test_failing_callback_is_logged_not_raised(pool, caplog):
    clock = FakeClock()
    sched = Scheduler(pool, clock=clock)
    ok = []

    def boom() -> None:
        raise RuntimeError("boom")

    sched.call_later(1, boom)
    sched.call_later(1, ok.append, 1)
    clock.advance(1)
    assert pool.wait_idle(5)
    assert ok == [1]
    assert "timer callback" in caplog.text
    sched.stop()


class RecordingExecutor:
    """Takes posts without running them, so the test sees what was handed over when."""

    def __init__(self) -> None:
        self.posted: list[tuple[object, tuple[object, ...]]] = []

    def post(self, fn, *args) -> None:  # type: ignore[no-untyped-def]
        self.posted.append((fn, args))


def test_manual_clock_hands_due_timers_over_before_advance_returns():
    # No scheduler thread may race advance(): with one, it could pop the due timers
    # first and post them after advance() returned, so "advance, then wait for the
    # pool" would find an idle pool and miss them.
    executor = RecordingExecutor()
    clock = FakeClock()
    sched = Scheduler(executor, clock=clock)
    for i in range(50):
        sched.call_later(1 + i % 3, lambda: None)
    assert not sched.thread_alive
    clock.advance(1)
    assert len(executor.posted) == 17  # i % 3 == 0 for 17 of 0..49
    clock.advance(2)
    assert len(executor.posted) == 50 and sched.pending_count() == 0
    sched.stop()


def test_stopped_scheduler_refuses_timers(pool):
    sched = Scheduler(pool, clock=FakeClock())
    sched.stop()
    with pytest.raises(SchedulerClosed):
        sched.call_later(1, lambda: None)


def test_real_clock_scheduler_dispatches_due_timer():
    # delay 0 is due at once: dispatched without waiting on real time
    pool = WorkerPool(2)
    sched = Scheduler(pool, clock=SystemClock())
    done = threading.Event()
    sched.call_later(0, done.set)
    assert done.wait(5)
    far = sched.call_later(3600, done.clear)
    assert far.cancel()
    sched.stop()
    pool.shutdown()


def test_fake_clock_time_and_validation():
    clock = FakeClock(start=10, wall_start=1000)
    assert clock.now() == 10 and clock.time() == 1000
    clock.advance(2.5)
    assert clock.now() == 12.5 and clock.time() == 1002.5
    with pytest.raises(ValueError):
        clock.advance(-1)


def test_nan_times_are_refused(pool):
    # A NaN deadline at the top of the heap would block every later timer.
    clock = FakeClock()
    sched = Scheduler(pool, clock=clock)
    with pytest.raises(ValueError, match="when"):
        sched.call_at(float("nan"), lambda: None)
    with pytest.raises(ValueError, match="delay"):
        sched.call_later(float("nan"), lambda: None)
    fired = threading.Event()
    sched.call_later(1, fired.set)
    clock.advance(1)
    assert fired.wait(5)
    sched.stop()

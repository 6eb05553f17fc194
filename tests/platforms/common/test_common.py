from __future__ import annotations

import math
import threading

from channelkit.platforms.common import (
    MAX_VISIBLE_CHARS,
    TRUNCATION_MARKER,
    OneShotClaim,
    SnapshotWriter,
    StateCell,
    TombstoneStore,
    bound_text,
)
from channelkit.platforms.common.projection_queue import ProjectionQueue
from channelkit.runtime import FakeClock, Scheduler


def make_writer(**kwargs):
    # The runtime's FakeClock and a pool-less Scheduler: timers fire on the test thread
    # inside clock.advance(); the serial queue runs its jobs right away on this thread.
    clock = FakeClock()
    sched = Scheduler(None, clock=clock)
    queue = ProjectionQueue(lambda fn: fn(), name="run")
    writes: list[str] = []

    def write(text: str) -> None:
        writes.append(text)

    writer = SnapshotWriter(
        kwargs.pop("write", write),
        clock=clock,
        scheduler=sched,
        submit=queue.enqueue,
        **kwargs,
    )
    return writer, sched, writes


def test_bound_text_keeps_tail_and_marker():
    text = "a" * 30_000 + "b" * 2_000
    out = bound_text(text)
    assert len(out) == MAX_VISIBLE_CHARS
    assert out.startswith(TRUNCATION_MARKER)
    assert out.endswith("b" * 2_000)
    # re-bounding an already bounded text does not repeat the marker
    again = bound_text(out + "c" * 10)
    assert again.count(TRUNCATION_MARKER) == 1 and again.endswith("c" * 10)
    assert bound_text("short") == "short"


def test_writer_coalesces_with_min_interval():
    writer, sched, writes = make_writer()
    writer.append("a")
    assert writes == ["a"]  # first write immediately
    writer.append("b")
    writer.append("c")
    sched.clock.advance(0.499)
    assert writes == ["a"]
    sched.clock.advance(0.001)
    assert writes == ["a", "abc"]
    sched.clock.advance(5)
    assert writes == ["a", "abc"]  # nothing pending, no re-arm
    assert sched.pending_count() == 0


def test_writer_not_ready_holds_writes_until_start():
    writer, sched, writes = make_writer(ready=False)
    writer.append("x")
    sched.clock.advance(10)
    assert writes == []
    writer.start()  # counts as the open write
    sched.clock.advance(0.49)
    assert writes == []
    sched.clock.advance(0.01)
    assert writes == ["x"]


def test_writer_bounded_and_rate_limited_under_flood():
    writer, sched, writes = make_writer()
    for i in range(1_000):
        writer.append("x" * 50 + str(i))
        sched.clock.advance(0.003)
    final = writer.finalize()
    assert len(final) <= MAX_VISIBLE_CHARS
    assert final.endswith("999")
    assert len(writes) <= math.ceil(3 / 0.5) + 1
    assert all(len(w) <= MAX_VISIBLE_CHARS for w in writes)


def test_writer_failure_latches_and_keeps_text():
    calls = []

    def boom(text: str) -> None:
        calls.append(text)
        raise RuntimeError("stream failed")

    errors = []
    writer, sched, _ = make_writer(write=boom, on_error=errors.append)
    writer.append("one")
    writer.append(" two")
    sched.clock.advance(5)
    assert calls == ["one"]
    assert writer.failed and len(errors) == 1
    assert writer.finalize() == "one two"


def test_finalize_waits_for_in_flight_write_and_rejects_late_text():
    clock = FakeClock()
    sched = Scheduler(None, clock=clock)
    started = threading.Event()
    release = threading.Event()
    writes = []

    def slow_write(text: str) -> None:
        started.set()
        assert release.wait(5)
        writes.append(text)

    def submit(fn):
        threading.Thread(target=fn, daemon=True).start()

    writer = SnapshotWriter(slow_write, clock=clock, scheduler=sched, submit=submit)
    writer.append("hello")  # due now: handed to submit at once
    assert started.wait(5)
    result: list[str] = []
    t = threading.Thread(target=lambda: result.append(writer.finalize(timeout=5)))
    t.start()
    t.join(0.05)
    assert t.is_alive()  # waiting on the write in flight
    release.set()
    t.join(5)
    assert result == ["hello"] and writes == ["hello"]
    assert writer.append("late") is False


def test_queued_flush_after_finalize_is_dropped():
    # a flush queued behind finalize on the same serial queue must not deadlock or write
    clock = FakeClock()
    sched = Scheduler(None, clock=clock)
    queued = []
    writes = []
    writer = SnapshotWriter(writes.append, clock=clock, scheduler=sched, submit=queued.append)
    writer.append("x")
    assert len(queued) == 1
    assert writer.finalize(timeout=0.1) == "x"
    queued[0]()
    assert writes == []


def test_one_shot_claim_64_threads():
    claim = OneShotClaim()
    barrier = threading.Barrier(64)
    wins = []

    def worker():
        barrier.wait()
        if claim.try_claim():
            wins.append(1)

    threads = [threading.Thread(target=worker) for _ in range(64)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wins) == 1
    assert claim.release() and claim.try_claim()


def test_state_cell_compare_and_set():
    cell = StateCell("reserved")
    assert not cell.compare_and_set("pending", "claimed")
    assert cell.compare_and_set("reserved", "pending")
    assert cell.compare_and_set(("pending", "reserved"), "terminal")
    assert not cell.compare_and_set(("pending", "claimed"), "pending")
    assert cell.state == "terminal"


def test_tombstones_ttl_and_cap():
    clock = FakeClock()
    store: TombstoneStore[str, str] = TombstoneStore(clock)
    for i in range(1_500):
        store.add(f"k{i}", "submitted")
    assert len(store) == 1_000
    assert "k0" not in store and store.get("k1499") == "submitted"
    clock.advance(599)
    assert len(store) == 1_000
    clock.advance(2)
    assert len(store) == 0


def test_one_write_in_flight_and_one_replaceable_pending_snapshot():
    clock = FakeClock()
    sched = Scheduler(None, clock=clock)
    release = threading.Event()
    started = []
    lock = threading.Lock()

    def slow_write(text: str) -> None:
        with lock:
            started.append(text)
        assert release.wait(5)

    def submit(fn):
        threading.Thread(target=fn, daemon=True).start()

    writer = SnapshotWriter(slow_write, clock=clock, scheduler=sched, submit=submit)
    writer.append("a")  # first write goes out at once and blocks
    deadline = threading.Event()
    for _ in range(500):
        if started:
            break
        deadline.wait(0.01)
    for chunk in "bcdef":
        writer.append(chunk)
        clock.advance(1.0)  # far past the interval: still no second write in flight
    assert started == ["a"] and writer.has_pending
    release.set()
    for _ in range(500):
        if len(started) == 2:
            break
        deadline.wait(0.01)
    # the pending snapshot was replaced, not queued: one more write with all the text
    assert started == ["a", "abcdef"]
    assert writer.finalize(timeout=5) == "abcdef"
    sched.stop()


# --- typed settings reading ------------------------------------------------------------


def test_settings_kwargs_maps_camel_and_snake_case_and_names_the_path():
    import pytest
    from channelkit.errors import ConfigurationError
    from channelkit.platforms.common.config import camel_case, settings_kwargs
    from channelkit.platforms.telegram import TelegramConfig
    from channelkit.platforms.weixin.config import WeixinConfig

    assert camel_case("typing_interval_s") == "typingIntervalS"
    assert camel_case("typing") == "typing"
    token = "123:abc"
    got = settings_kwargs(TelegramConfig, {"botToken": token, "question_timeout_s": 5}, "tg")
    assert got == {"bot_token": token, "question_timeout_s": 5}
    cfg = TelegramConfig.from_dict(
        {"botToken": token, "typingIntervalS": 3, "nativeQuestions": False}
    )
    assert cfg.typing_interval_s == 3 and cfg.native_questions is False
    wx = WeixinConfig.from_dict({"botToken": "t", "ticketTtlS": 60, "typing": False})
    assert wx.ticket_ttl_s == 60 and wx.typing is False
    cases = [
        (lambda: TelegramConfig.from_dict([]), "telegram"),
        (lambda: TelegramConfig.from_dict({"botToken": token, "nope": 1}), "telegram.nope"),
        (lambda: TelegramConfig.from_dict({}), "telegram.bot_token"),
        (lambda: WeixinConfig.from_dict({"botToken": "t", "BaseUrl": "x"}), "weixin.BaseUrl"),
        (
            lambda: WeixinConfig.from_dict({"botToken": "t", "baseUrl": "ftp://x"}),
            "weixin.base_url",
        ),
        (
            lambda: WeixinConfig.from_dict({"botToken": "t", "ticketTtlS": True}),
            "weixin.ticket_ttl_s",
        ),
        (
            lambda: settings_kwargs(TelegramConfig, {"botToken": 1}, "x", camel=False),
            "x.botToken",
        ),
    ]
    for build, path in cases:
        with pytest.raises(ConfigurationError) as err:
            build()
        assert err.value.path == path

"""A streamed snapshot's write that the platform's rate limit would hold never holds
its pool worker: inside `no_wait()` the pacer raises `Throttled` instead of sleeping, and
`SnapshotWriter` books the write again on the scheduler (not a failure: no latch, no
``on_error``), the newest text going then. Non-blocking callers never jump the line of
the callers that wait, and take no token of a chat while a bot-wide line is waiting."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from channelkit.errors import Throttled
from channelkit.platforms.common import SnapshotWriter
from channelkit.platforms.common.projection_queue import ProjectionQueue
from channelkit.platforms.common.rate_limit import LimitTable, OutboundLimit, OutboundPacer, no_wait
from channelkit.runtime import FakeClock, Scheduler
from channelkit.state import MemoryStore

WAIT_S = 5.0  # bounded real wait for another thread
TABLE = LimitTable(
    platform="test",
    operations={"send": "post"},
    limits={"post": (OutboundLimit(1.0, 2.0, "chat"), OutboundLimit(100.0, 100.0, "bot"))},
    scope_of=lambda op, args, body: args.get("chat"),
)


def _writer(write: Any, clock: FakeClock, **kwargs: Any) -> tuple[SnapshotWriter, Scheduler]:
    # a pool-less Scheduler (timers fire on the test thread inside clock.advance()) and a
    # serial queue that runs its jobs at once on the calling thread: the test's thread
    # is the pool worker, so a write that waited would hold the test
    scheduler = Scheduler(None, clock=clock)
    queue = ProjectionQueue(lambda fn: fn(), name="run")
    writer = SnapshotWriter(write, clock=clock, scheduler=scheduler, submit=queue.enqueue, **kwargs)
    return writer, scheduler


def test_a_throttled_write_is_booked_again_with_the_newest_text_and_does_not_latch() -> None:
    clock = FakeClock()
    calls: list[str] = []
    budget = {"left": 0}

    def write(text: str) -> None:
        calls.append(text)
        if budget["left"] <= 0:
            raise Throttled(2.0)
        budget["left"] -= 1

    errors: list[BaseException] = []
    writer, scheduler = _writer(write, clock, on_error=errors.append)
    writer.append("a")  # throttled at once
    assert calls == ["a"]
    assert not writer.failed and errors == []
    assert writer.has_pending and scheduler.pending_count() == 1  # one timer, 2 s on
    writer.append("b")
    writer.append("c")  # the pending snapshot is replaced, no second timer
    assert scheduler.pending_count() == 1
    budget["left"] = 5
    clock.advance(1.99)
    assert calls == ["a"]  # not before the wait the limit asked for
    clock.advance(0.01)
    assert calls == ["a", "abc"]  # the newest text, once
    assert writer.write_count == 1 and writer.throttled_count == 1
    assert not writer.has_pending and not writer.failed
    assert writer.finalize() == "abc"


def test_a_streamed_write_past_the_chats_budget_returns_its_worker_at_once() -> None:
    clock = FakeClock()
    pacer = OutboundPacer(TABLE, clock=clock, max_wait_s=2.0)
    pacer.override("post", OutboundLimit(0.1, 2.0, "chat"))  # a token every 10 s
    shown: list[str] = []

    def write(text: str) -> None:  # one platform call into chat c1
        pacer.before_call("send", {"chat": "c1"}, None)
        shown.append(text)

    writer, scheduler = _writer(write, clock, min_interval=0.5)
    writer.append("one")
    clock.advance(0.5)
    writer.append(" two")  # the burst of 2: both went
    clock.advance(0.5)
    started = time.monotonic()
    writer.append(" three")  # no token: Throttled, booked on the scheduler
    assert time.monotonic() - started < 1.0  # this worker did not wait for the clock
    assert shown == ["one", "one two"]
    assert writer.has_pending and not writer.failed
    assert pacer.throttled == 1 and pacer.waited == 0 and pacer.unpaced == 0
    clock.advance(8.9)
    assert shown == ["one", "one two"]  # the token comes at 10 s (a tenth was there at 1)
    clock.advance(0.6)  # past it, by at most the interval between two tries
    assert shown == ["one", "one two", "one two three"]


def test_a_non_blocking_call_never_takes_the_token_of_a_caller_waiting_in_line() -> None:
    clock = FakeClock()
    pacer = OutboundPacer(TABLE, clock=clock)
    for _ in range(2):
        pacer.before_call("send", {"chat": "c1"}, None)  # the burst
    went = threading.Event()

    def waiting() -> None:
        pacer.before_call("send", {"chat": "c1"}, None)
        went.set()

    threading.Thread(target=waiting, daemon=True).start()
    deadline = time.monotonic() + WAIT_S
    while not pacer._lines and time.monotonic() < deadline:  # in line
        time.sleep(0.01)
    assert pacer._lines
    clock.advance(1.0)  # one token: the waiting caller's
    with no_wait(), pytest.raises(Throttled) as raised:
        pacer.before_call("send", {"chat": "c1"}, None)
    assert 0 < raised.value.wait <= 1.0  # a token's time: the line moves by one
    assert went.wait(WAIT_S)  # the caller in line got its token
    with no_wait(), pytest.raises(Throttled):  # and nobody else did
        pacer.before_call("send", {"chat": "c1"}, None)
    pacer.before_call("send", {"chat": "c2"}, None)  # outside no_wait: waits as before


def test_a_waiting_bot_wide_line_throttles_before_any_chat_token_is_taken() -> None:
    clock = FakeClock()
    store = MemoryStore(clock=clock)
    table = LimitTable(
        platform="test",
        operations={"send": "post"},
        limits={"post": (OutboundLimit(1.0, 2.0, "chat"), OutboundLimit(0.5, 1.0, "bot"))},
        scope_of=lambda op, args, body: args.get("chat"),
    )
    pacer = OutboundPacer(table, clock=clock, store=store)
    pacer.before_call("send", {"chat": "c2"}, None)  # the bot-wide burst of 1
    went = threading.Event()
    threading.Thread(
        target=lambda: (pacer.before_call("send", {"chat": "c3"}, None), went.set()),
        daemon=True,
    ).start()
    deadline = time.monotonic() + WAIT_S
    while "ratelimit:test:post:bot" not in pacer._lines and time.monotonic() < deadline:
        time.sleep(0.01)  # c3 holds its chat token and waits for the bot's
    with no_wait(), pytest.raises(Throttled):
        pacer.before_call("send", {"chat": "c1"}, None)
    # c1's chat bucket is untouched: its burst of 2 is still there
    assert store.take_token("ratelimit:test:post:c1", rate=1.0, burst=2.0) == 0.0
    assert store.take_token("ratelimit:test:post:c1", rate=1.0, burst=2.0) == 0.0
    clock.advance(2.0)
    assert went.wait(WAIT_S)

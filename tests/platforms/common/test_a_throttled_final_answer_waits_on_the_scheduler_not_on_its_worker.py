"""A final answer whose chat has no rate-limit token left never holds the worker that
delivers it: every attempt of the delivery chain runs inside `no_wait()`, so the pacer
tells it to wait (`Throttled`) and the chain books the next try on the scheduler
(not an attempt, nothing sent twice). The answer arrives once the token is there. An
answer told to wait for `THROTTLE_PATIENCE_S` in all takes its turn in the bucket's
line on its next try, so a busy bucket never starves it."""

from __future__ import annotations

import time

from channelkit.platforms.common.delivery import (
    THROTTLE_PATIENCE_S,
    DeliveryChain,
    DeliveryPath,
    DeliveryTarget,
)
from channelkit.platforms.common.rate_limit import LimitTable, OutboundLimit, OutboundPacer
from channelkit.runtime import FakeClock, Scheduler, WorkerPool

TABLE = LimitTable(
    platform="test",
    operations={"send": "message"},
    limits={"message": (OutboundLimit(1 / 10, 1.0, "chat"),)},  # one each 10 s
    scope_of=lambda op, args, body: args.get("chat"),
)
TARGET = DeliveryTarget("test", "chat-a", "run-1", "owner-1")


def _rig(max_wait_s: float = 60.0) -> tuple[FakeClock, OutboundPacer, DeliveryChain, list[str]]:
    clock = FakeClock()
    pacer = OutboundPacer(TABLE, clock=clock, max_wait_s=max_wait_s)
    # a pool-less scheduler: due timers run on the test thread inside clock.advance()
    chain = DeliveryChain(Scheduler(None, clock=clock))
    return clock, pacer, chain, []


def _path(pacer: OutboundPacer, sent: list[str], text: str) -> DeliveryPath:
    def send() -> None:
        pacer.before_call("send", {"chat": "chat-a"}, None)  # as a generated client does
        sent.append(text)

    return DeliveryPath("text", send)


def test_a_throttled_final_answer_is_booked_and_arrives_once_its_token_is_there() -> None:
    clock, pacer, chain, sent = _rig()
    assert chain.deliver([(_path(pacer, sent, "first"),)], TARGET).state == "delivered"
    started = time.monotonic()
    job = chain.deliver([(_path(pacer, sent, "second"),)], TARGET)
    # returned at once, its worker free: nothing sent, a retry booked on the scheduler
    assert time.monotonic() - started < 0.5
    assert job.state == "pending" and sent == ["first"]
    assert pacer.throttled == 1 and pacer.waited == 0 and pacer.unpaced == 0
    assert job.attempts == 0 and not job.retried  # a wait, not an attempt
    clock.advance(9.0)
    assert sent == ["first"]
    clock.advance(1.0)  # the token is there: the booked try sends it
    assert job.state == "delivered" and sent == ["first", "second"]
    assert chain.health.snapshot()["delivered"] == 2


def test_an_answer_told_to_wait_long_enough_takes_its_turn_in_the_line() -> None:
    clock = FakeClock()
    pool = WorkerPool(1, name="delivery-test")
    pacer = OutboundPacer(TABLE, clock=clock)
    scheduler = Scheduler(pool, clock=clock)
    chain = DeliveryChain(scheduler)  # retries run on the pool
    pacer.override("message", OutboundLimit(1 / 100, 1.0, "chat"))  # a token each 100 s
    sent: list[str] = []
    try:
        chain.deliver([(_path(pacer, sent, "first"),)], TARGET)
        job = chain.deliver([(_path(pacer, sent, "second"),)], TARGET)
        assert job.state == "pending" and pacer.throttled == 1  # told: 60 s (capped)
        # the clock runs: the booked try comes due THROTTLE_PATIENCE_S later, waits in
        # the bucket's line (not told to wait again) until the token comes at 100 s
        deadline = time.monotonic() + 10.0
        while not job.done.is_set() and time.monotonic() < deadline:
            clock.advance(1.0)
            time.sleep(0.002)
        assert job.state == "delivered" and sent == ["first", "second"]
        assert pacer.throttled == 1 and pacer.waited == 1 and pacer.unpaced == 0
        assert THROTTLE_PATIENCE_S <= 100.0
    finally:
        chain.close()
        scheduler.stop(1)
        pool.shutdown()

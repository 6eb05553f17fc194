"""`StateStore.take_token()`: one token bucket per key, atomic, on both stores, paced by
an injected clock (the Redis store takes the clock's time when one is given)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator

import pytest
from channelkit.errors import ConfigurationError
from channelkit.platforms.common.rate_limit import ChatLimit, ChatRateLimiter, Throttled
from channelkit.runtime.clock import FakeClock
from channelkit.state import MemoryStore, StateStore


@pytest.fixture(params=["memory", "redis"])
def made(request: pytest.FixtureRequest) -> Iterator[tuple[StateStore, FakeClock]]:
    clock = FakeClock()
    if request.param == "memory":
        yield MemoryStore(clock=clock), clock
        return
    pytest.importorskip("redis", reason="redis-py is not installed (the redis extra)")
    from channelkit.state import RedisStore

    server = request.getfixturevalue("redis_server")
    store = RedisStore(server.url, namespace=f"tb-{uuid.uuid4().hex}", clock=clock)
    try:
        yield store, clock
    finally:
        store.close()


def test_a_full_bucket_gives_its_burst_then_one_token_per_interval(made) -> None:  # type: ignore[no-untyped-def]
    store, clock = made
    assert [store.take_token("chat", rate=0.5, burst=3) for _ in range(3)] == [0.0] * 3
    assert store.take_token("chat", rate=0.5, burst=3) == pytest.approx(2.0)
    clock.advance(1.0)
    assert store.take_token("chat", rate=0.5, burst=3) == pytest.approx(1.0)  # nothing taken
    clock.advance(1.0)
    assert store.take_token("chat", rate=0.5, burst=3) == 0.0
    assert store.take_token("chat", rate=0.5, burst=3) == pytest.approx(2.0)
    clock.advance(60.0)  # refills up to the burst, never beyond
    assert [store.take_token("chat", rate=0.5, burst=3) for _ in range(4)][-1] > 0
    assert store.take_token("other", rate=0.5, burst=3) == 0.0  # a bucket per key


def test_keep_leaves_tokens_for_callers_that_keep_none(made) -> None:  # type: ignore[no-untyped-def]
    store, _clock = made
    assert store.take_token("c", rate=1, burst=3, keep=1) == 0.0
    assert store.take_token("c", rate=1, burst=3, keep=1) == 0.0
    assert store.take_token("c", rate=1, burst=3, keep=1) == pytest.approx(1.0)
    assert store.take_token("c", rate=1, burst=3) == 0.0  # the kept token
    assert store.take_token("c", rate=1, burst=3) == pytest.approx(1.0)


def test_threads_never_take_more_than_the_burst(made) -> None:  # type: ignore[no-untyped-def]
    store, _clock = made
    taken: list[float] = []
    lock = threading.Lock()

    def take() -> None:
        for _ in range(10):
            wait = store.take_token("race", rate=0.001, burst=5)
            with lock:
                taken.append(wait)

    threads = [threading.Thread(target=take) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert len(taken) == 40
    assert taken.count(0.0) == 5


@pytest.mark.parametrize(
    ("rate", "burst", "keep", "field"),
    [(0, 2, 0, "rate"), (1, 0.5, 0, "burst"), (1, 2, 2, "keep"), (True, 2, 0, "rate")],
)
def test_bad_bucket_numbers_name_the_field(rate, burst, keep, field) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ConfigurationError) as caught:
        MemoryStore().take_token("k", rate=rate, burst=burst, keep=keep)
    assert caught.value.path == field


def test_a_gate_waits_its_bound_then_lets_the_write_go(made) -> None:  # type: ignore[no-untyped-def]
    store, clock = made
    limiter = ChatRateLimiter(
        "telegram",
        limit=lambda _chat: ChatLimit(rate=0.1, burst=2),
        clock=clock,
        store=store,
        max_wait_s=15.0,
    )
    assert limiter.stream_wait("-1") == 0.0
    assert limiter.stream_wait("-1") == pytest.approx(10.0)  # one token kept for messages
    gate = limiter.gate("-1")
    gate()  # the kept token
    with pytest.raises(Throttled) as first:
        gate()
    assert first.value.wait == pytest.approx(10.0)
    clock.advance(9.0)
    with pytest.raises(Throttled) as second:
        gate()
    assert second.value.wait == pytest.approx(1.0)
    clock.advance(1.0)
    gate()  # its token came


def test_a_gate_lets_the_write_go_without_a_token_after_its_bound(made) -> None:  # type: ignore[no-untyped-def]
    store, clock = made
    limiter = ChatRateLimiter(
        "telegram",
        limit=lambda _chat: ChatLimit(rate=0.01, burst=2),  # a token every 100 s
        clock=clock,
        store=store,
        max_wait_s=15.0,
    )
    gate = limiter.gate("-2")
    gate()
    gate()
    with pytest.raises(Throttled) as first:
        gate()
    assert first.value.wait == pytest.approx(15.0)  # never past the bound
    clock.advance(14.0)
    with pytest.raises(Throttled) as second:
        gate()
    assert second.value.wait == pytest.approx(1.0)
    clock.advance(1.0)
    gate()  # the bound passed: the write goes (a 429 would be retried as before)
    with pytest.raises(Throttled):
        gate()  # the next write waits its own bound


def test_a_forced_token_is_owed_and_later_callers_wait_longer(made) -> None:  # type: ignore[no-untyped-def]
    store, clock = made
    assert store.take_token("f", rate=1, burst=2) == 0.0
    assert store.take_token("f", rate=1, burst=2) == 0.0
    assert store.take_token("f", rate=1, burst=2, force=True) == pytest.approx(1.0)
    assert store.take_token("f", rate=1, burst=2) == pytest.approx(2.0)  # one owed
    for _ in range(5):  # the debt is bounded by the burst
        store.take_token("f", rate=1, burst=2, force=True)
    assert store.take_token("f", rate=1, burst=2) == pytest.approx(3.0)
    clock.advance(3.0)
    assert store.take_token("f", rate=1, burst=2) == 0.0

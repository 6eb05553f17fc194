"""SharedDedup: one first delivery across every instance sharing a store; a store outage
drops deliveries (fail closed) with one error per outage."""

from __future__ import annotations

import logging
import uuid
from typing import Any

import pytest
from channelkit.errors import StateStoreUnavailable
from channelkit.platforms.common.shared_dedup import SharedDedup
from channelkit.runtime import FakeClock
from channelkit.state import MemoryStore


class DownStore:
    """A store whose backend can be taken away (``down = True``)."""

    def __init__(self, inner: MemoryStore) -> None:
        self.inner = inner
        self.namespace = inner.namespace
        self.instance_id = inner.instance_id
        self.down = False

    def add(self, key: str, value: Any, *, ttl_s: float | None = None) -> bool:
        if self.down:
            raise StateStoreUnavailable("redis://127.0.0.1:1 unreachable")
        return self.inner.add(key, value, ttl_s=ttl_s)

    def write_if(self, *args: Any, **kwargs: Any) -> str:
        if self.down:
            raise StateStoreUnavailable("redis://127.0.0.1:1 unreachable")
        return self.inner.write_if(*args, **kwargs)

    def delete(self, key: str) -> bool:
        if self.down:
            raise StateStoreUnavailable("redis://127.0.0.1:1 unreachable")
        return self.inner.delete(key)

    def get(self, key: str) -> Any:
        if self.down:
            raise StateStoreUnavailable("redis://127.0.0.1:1 unreachable")
        return self.inner.get(key)


def test_two_instances_sharing_a_store_admit_an_id_once() -> None:
    clock = FakeClock()
    store = MemoryStore(namespace="bot", clock=clock)
    a = SharedDedup(clock.time, ttl=60.0, scope="t", store=store)
    b = SharedDedup(clock.time, ttl=60.0, scope="t", store=store)
    assert a.first(7) is True
    assert b.first(7) is False
    assert a.first(7) is False
    assert b.first(8) is True


def test_the_claim_expires_after_the_redelivery_window() -> None:
    clock = FakeClock()
    store = MemoryStore(namespace="bot", clock=clock)
    a = SharedDedup(clock.time, ttl=60.0, scope="t", store=store)
    b = SharedDedup(clock.time, ttl=60.0, scope="t", store=store)
    assert a.first("m")
    clock.advance(61.0)
    assert b.first("m") is True


def test_forget_lets_a_redelivery_be_served_by_another_instance() -> None:
    clock = FakeClock()
    store = MemoryStore(namespace="bot", clock=clock)
    a = SharedDedup(clock.time, ttl=60.0, scope="t", store=store)
    b = SharedDedup(clock.time, ttl=60.0, scope="t", store=store)
    assert a.first("m")
    a.forget("m")  # refused (the channel closed)
    assert b.first("m") is True


def test_scopes_do_not_collide() -> None:
    clock = FakeClock()
    store = MemoryStore(namespace="bot", clock=clock)
    assert SharedDedup(clock.time, ttl=60.0, scope="telegram-update", store=store).first(1)
    assert SharedDedup(clock.time, ttl=60.0, scope="weixin-msg", store=store).first(1)


def test_without_a_store_it_is_the_in_process_dedup_log() -> None:
    clock = FakeClock()
    a = SharedDedup(clock.time, ttl=60.0, scope="t")
    assert a.first(1) and not a.first(1)
    assert len(a) == 1


def test_a_store_outage_drops_deliveries_with_one_error_then_recovers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock()
    store = DownStore(MemoryStore(namespace="bot", clock=clock))
    dedup = SharedDedup(clock.time, ttl=60.0, scope="t", store=store)  # type: ignore[arg-type]
    store.down = True
    with caplog.at_level(logging.WARNING, logger="channelkit.platforms.common.shared_dedup"):
        assert dedup.first(1) is False
        assert dedup.first(2) is False
        assert dedup.first(1) is False
        errors = [r for r in caplog.records if r.levelno == logging.ERROR]
        assert len(errors) == 1 and "unavailable" in errors[0].getMessage()
        assert dedup.outage_drops == 3
        store.down = False
        assert dedup.first(1) is True  # a redelivery after the outage is served
        assert dedup.first(3) is True
        warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 1 and "answers again" in warnings[0].getMessage()
        store.down = True
        assert dedup.first(4) is False
        errors = [r for r in caplog.records if r.levelno == logging.ERROR]
        assert len(errors) == 2  # a second outage: a second error


def test_two_processes_redis_stores_admit_an_id_once(redis_server: Any) -> None:
    from channelkit.state import RedisStore

    namespace = f"dedup-{uuid.uuid4().hex[:8]}"
    one = RedisStore(redis_server.url, namespace=namespace)
    two = RedisStore(redis_server.url, namespace=namespace)
    try:
        clock = FakeClock()
        a = SharedDedup(clock.time, ttl=60.0, scope="telegram-update", store=one)
        b = SharedDedup(clock.time, ttl=60.0, scope="telegram-update", store=two)
        results = [b.first(42), a.first(42)]
        assert sorted(results) == [False, True]
    finally:
        one.close()
        two.close()

"""Closing a store-backed channel never waits out the inbox pop.

The inbox consumer of a `Cluster` blocks in `store.pop(inbox, poll_s)`. `stop()` wakes
it with a message to its own inbox, so the consumer ends at once, on the memory store
and on Redis alike; the wake-up is never applied as a forwarded action, and a stale one
left in the inbox is dropped by the next incarnation.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from channelkit.platforms.common.cluster import Cluster, ClusterOptions
from channelkit.runtime.clock import FakeClock
from channelkit.runtime.scheduler import Scheduler
from channelkit.state import MemoryStore, StateStore
from channelkit.testing import wait_until

POLL_S = 60.0  # far longer than the join below: only the wake-up can end the pop


@pytest.fixture(params=["memory", "redis"])
def store(request: pytest.FixtureRequest) -> Iterator[StateStore]:
    namespace = f"wake-{uuid.uuid4().hex[:8]}"
    if request.param == "memory":
        memory = MemoryStore(namespace=namespace)
        yield memory
        memory.close()
        return
    from channelkit.state import RedisStore

    server = request.getfixturevalue("redis_server")
    redis = RedisStore(server.url, namespace=namespace)
    yield redis
    redis.close()


def _cluster(store: StateStore, applied: list[dict[str, Any]], scheduler: Scheduler) -> Cluster:
    return Cluster(
        store,
        channel="wake-test",
        clock=FakeClock(),
        scheduler=scheduler,
        submit=lambda fn: fn(),
        apply=applied.append,
        sweep=lambda first: None,
        options=ClusterOptions(poll_s=POLL_S),
    )


def test_stop_ends_a_consumer_blocked_in_the_inbox_pop(store: StateStore) -> None:
    scheduler = Scheduler(clock=FakeClock())
    applied: list[dict[str, Any]] = []
    cluster = _cluster(store, applied, scheduler)
    try:
        cluster.start()
        consumers = [t for t in threading.enumerate() if t.name == "wake-test-inbox"]
        assert consumers and all(t.is_alive() for t in consumers)
        cluster.stop(timeout=10.0)
        assert not any(t.is_alive() for t in consumers), "the consumer still waits in its pop"
        assert applied == []  # the wake-up is not a forwarded action
    finally:
        scheduler.stop()


def test_a_stale_wake_up_is_dropped_and_real_messages_still_arrive(store: StateStore) -> None:
    scheduler = Scheduler(clock=FakeClock())
    applied: list[dict[str, Any]] = []
    cluster = _cluster(store, applied, scheduler)
    try:
        store.push(cluster.inbox(cluster.instance_id), {"_channelkit_wake": "an old instance"})
        store.push(cluster.inbox(cluster.instance_id), {"action": "stop", "run": "r1"})
        cluster.start()
        wait_until(lambda: applied, timeout=10.0, what="the forwarded action")
        cluster.stop(timeout=10.0)
        assert applied == [{"action": "stop", "run": "r1"}]
    finally:
        scheduler.stop()

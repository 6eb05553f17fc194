"""The StateStore contract, run against MemoryStore and RedisStore alike.

Each backend hands out *handles* onto one shared state: for Redis, separate RedisStore
objects over the same server (two processes); for memory, the one MemoryStore of the
namespace (one process). TTLs run on a FakeClock for MemoryStore; Redis keeps its own
time, so its expiry tests use a short real TTL and poll with a bounded deadline.
"""

from __future__ import annotations

import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from channelkit.errors import ConfigurationError
from channelkit.runtime.clock import FakeClock
from channelkit.state import MemoryStore, StateStore

BOUND_S = 5.0  # generous bound for "promptly" on a loaded CI machine


class Backend:
    def __init__(self, kind: str, url: str | None = None) -> None:
        self.kind = kind
        self.url = url
        self.clock = FakeClock()
        self.prefix = uuid.uuid4().hex[:10]
        self._memory: dict[str, MemoryStore] = {}
        self._opened: list[StateStore] = []

    def make(self, namespace: str = "bot") -> StateStore:
        """A new handle onto this backend's state of ``namespace``."""
        ns = f"{self.prefix}-{namespace}"
        if self.kind == "memory":
            return self._memory.setdefault(ns, MemoryStore(namespace=ns, clock=self.clock))
        from channelkit.state import RedisStore

        assert self.url is not None
        store = RedisStore(self.url, namespace=ns, clock=self.clock)
        self._opened.append(store)
        return store

    def expire(self, store: StateStore, key: str, ttl_s: float) -> None:
        """Let ``ttl_s`` pass for ``key`` and see it gone (FakeClock, or bounded polling)."""
        if self.kind == "memory":
            self.clock.advance(ttl_s + 0.001)
            return
        deadline = time.monotonic() + BOUND_S
        while store.get(key) is not None:
            assert time.monotonic() < deadline, f"{key} did not expire within {BOUND_S} s"
            time.sleep(0.01)

    @property
    def short_ttl(self) -> float:
        return 30.0 if self.kind == "memory" else 0.05

    def close(self) -> None:
        for store in [*self._opened, *self._memory.values()]:
            store.close()


@pytest.fixture(params=["memory", "redis"])
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    if request.param == "redis":
        pytest.importorskip("redis", reason="redis-py is not installed (the redis extra)")
        server = request.getfixturevalue("redis_server")
        made = Backend("redis", server.url)
    else:
        made = Backend("memory")
    try:
        yield made
    finally:
        made.close()


def race(threads: int, body: Callable[[int], Any]) -> list[Any]:
    """Run ``body(i)`` on ``threads`` threads released together; their results in order."""
    barrier = threading.Barrier(threads)
    results: list[Any] = [None] * threads
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            barrier.wait(BOUND_S)
            results[i] = body(i)
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    workers = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(30)
    assert not any(w.is_alive() for w in workers), "a racing thread hung"
    assert not errors, errors
    return results


# -- identity ------------------------------------------------------------------------------


def test_a_store_is_a_state_store_with_its_namespace_and_a_unique_instance_id(
    backend: Backend,
) -> None:
    store, other = backend.make("a"), backend.make("b")
    assert isinstance(store, StateStore)
    assert store.namespace == f"{backend.prefix}-a"
    assert re.fullmatch(r".+-\d+-[0-9a-f]{8}", store.instance_id)
    assert store.instance_id != other.instance_id
    store.ping()


# -- put / get / delete ----------------------------------------------------------------------


def test_put_then_get_returns_an_equal_copy_and_put_overwrites(backend: Backend) -> None:
    store = backend.make()
    value = {"n": 1, "s": "é", "nested": {"list": [1, 2.5, None, True]}}
    store.put("k", value)
    got = store.get("k")
    assert got == value
    assert got is not value
    assert got is not None
    got["n"] = 99
    assert store.get("k") == value, "a returned dict is the caller's own copy"
    store.put("k", {"n": 2})
    assert store.get("k") == {"n": 2}
    assert store.get("absent") is None


def test_delete_reports_whether_a_value_was_there(backend: Backend) -> None:
    store = backend.make()
    store.put("k", {"v": 1})
    assert store.delete("k") is True
    assert store.get("k") is None
    assert store.delete("k") is False


def test_bad_keys_values_and_ttls_are_refused_before_anything_is_stored(
    backend: Backend,
) -> None:
    store = backend.make()
    with pytest.raises(ConfigurationError, match="key"):
        store.put("", {"v": 1})
    with pytest.raises(ConfigurationError, match="JSON"):
        store.put("k", {"v": object()})
    with pytest.raises(ConfigurationError, match="mapping"):
        store.put("k", ["not", "a", "dict"])  # type: ignore[arg-type]
    for ttl in (0, -1, float("nan"), float("inf")):
        with pytest.raises(ConfigurationError, match="ttl_s"):
            store.add("k", {"v": 1}, ttl_s=ttl)
    assert store.get("k") is None


# -- add: set-if-absent ----------------------------------------------------------------------


def test_add_stores_only_when_the_key_is_absent(backend: Backend) -> None:
    store = backend.make()
    assert store.add("claim", {"by": "a"}) is True
    assert store.add("claim", {"by": "b"}) is False
    assert store.get("claim") == {"by": "a"}
    store.delete("claim")
    assert store.add("claim", {"by": "c"}) is True
    assert store.get("claim") == {"by": "c"}


def test_sixty_four_threads_racing_add_on_one_key_across_two_stores_one_wins(
    backend: Backend,
) -> None:
    stores = [backend.make(), backend.make()]
    won = race(64, lambda i: stores[i % 2].add("claim", {"by": i}, ttl_s=60))
    winners = [i for i, ok in enumerate(won) if ok]
    assert len(winners) == 1, winners
    assert stores[1].get("claim") == {"by": winners[0]}


# -- replace: compare-and-set ----------------------------------------------------------------


def test_replace_sets_only_when_the_whole_value_matches(backend: Backend) -> None:
    store = backend.make()
    assert store.replace("k", {"v": 1}, {"v": 2}) is False, "absent never matches"
    assert store.get("k") is None
    store.put("k", {"state": "open", "n": 1})
    assert store.replace("k", {"state": "open"}, {"state": "x"}) is False, "whole value"
    assert store.replace("k", {"n": 1, "state": "open"}, {"state": "done"}) is True
    assert store.get("k") == {"state": "done"}
    assert store.replace("k", {"state": "open", "n": 1}, {"state": "again"}) is False
    assert store.get("k") == {"state": "done"}


def test_replace_with_none_deletes_only_a_matching_value(backend: Backend) -> None:
    store = backend.make()
    store.put("k", {"owner": "a"})
    assert store.replace("k", {"owner": "b"}, None) is False
    assert store.get("k") == {"owner": "a"}
    assert store.replace("k", {"owner": "a"}, None) is True
    assert store.get("k") is None


def test_sixty_four_threads_racing_replace_on_one_key_across_two_stores_one_wins(
    backend: Backend,
) -> None:
    stores = [backend.make(), backend.make()]
    stores[0].put("k", {"state": "pending"})
    won = race(64, lambda i: stores[i % 2].replace("k", {"state": "pending"}, {"by": i}))
    winners = [i for i, ok in enumerate(won) if ok]
    assert len(winners) == 1, winners
    assert stores[0].get("k") == {"by": winners[0]}


def test_compare_and_set_increments_lose_no_update(backend: Backend) -> None:
    stores = [backend.make(), backend.make()]
    stores[0].put("counter", {"n": 0})

    def bump(i: int) -> int:
        store, tries = stores[i % 2], 0
        for _ in range(20):
            while True:
                tries += 1
                current = store.get("counter")
                assert current is not None
                if store.replace("counter", current, {"n": current["n"] + 1}):
                    break
        return tries

    race(8, bump)
    assert stores[1].get("counter") == {"n": 160}


# -- TTL ---------------------------------------------------------------------------------------


def test_a_value_put_with_a_ttl_expires_and_a_put_without_one_does_not(
    backend: Backend,
) -> None:
    store = backend.make()
    ttl = backend.short_ttl
    store.put("keep", {"v": 1}, ttl_s=ttl)
    store.put("keep", {"v": 2})  # a put without ttl_s clears the earlier TTL
    store.put("gone", {"v": 1}, ttl_s=ttl)
    backend.expire(store, "gone", ttl)
    assert store.get("gone") is None
    assert store.get("keep") == {"v": 2}
    assert "gone" not in store.scan("")
    assert store.delete("gone") is False


def test_an_expired_claim_can_be_claimed_again(backend: Backend) -> None:
    store = backend.make()
    ttl = backend.short_ttl
    assert store.add("tombstone", {"by": "a"}, ttl_s=ttl) is True
    backend.expire(store, "tombstone", ttl)
    assert store.add("tombstone", {"by": "b"}, ttl_s=60) is True
    assert store.get("tombstone") == {"by": "b"}


def test_replace_applies_its_own_ttl(backend: Backend) -> None:
    store = backend.make()
    ttl = backend.short_ttl
    store.put("k", {"v": 1})
    assert store.replace("k", {"v": 1}, {"v": 2}, ttl_s=ttl) is True
    backend.expire(store, "k", ttl)
    assert store.get("k") is None
    assert store.replace("k", {"v": 2}, {"v": 3}) is False


def test_memory_ttl_runs_on_the_injected_clock() -> None:
    clock = FakeClock()
    store = MemoryStore(clock=clock)
    store.add("claim", {"v": 1}, ttl_s=10)
    clock.advance(9.999)
    assert store.get("claim") == {"v": 1}
    assert store.add("claim", {"v": 2}) is False
    clock.advance(0.002)
    assert store.get("claim") is None
    assert store.add("claim", {"v": 2}) is True


# -- namespaces ------------------------------------------------------------------------------


def test_namespaces_isolate_two_bots_sharing_a_backend(backend: Backend) -> None:
    one, two = backend.make("one"), backend.make("two")
    one.put("k", {"bot": 1})
    assert two.get("k") is None
    assert two.add("k", {"bot": 2}) is True
    assert one.get("k") == {"bot": 1}
    assert two.get("k") == {"bot": 2}
    assert one.scan("") == ["k"]
    one.push("q", {"for": 1})
    assert two.pop("q", 0) is None
    assert one.pop("q", 0) == {"for": 1}
    assert two.delete("k") is True
    assert one.get("k") == {"bot": 1}


# -- queues ----------------------------------------------------------------------------------


def test_push_then_pop_is_fifo_across_two_store_objects(backend: Backend) -> None:
    producer, consumer = backend.make(), backend.make()
    for i in range(20):
        producer.push("jobs", {"i": i})
    got = [consumer.pop("jobs", 1.0) for _ in range(20)]
    assert got == [{"i": i} for i in range(20)]
    assert consumer.pop("jobs", 0) is None
    producer.push("other", {"x": 1})
    assert consumer.pop("jobs", 0) is None, "queues are separate"
    assert consumer.pop("other", 0) == {"x": 1}


def test_pop_returns_none_after_its_timeout_when_nothing_arrives(backend: Backend) -> None:
    store = backend.make()
    started = time.monotonic()
    assert store.pop("empty", 0.05) is None
    assert store.pop("empty", 0) is None
    assert time.monotonic() - started < BOUND_S


def test_a_waiting_pop_wakes_when_another_store_pushes(backend: Backend) -> None:
    waiter, pusher = backend.make(), backend.make()
    got: list[Any] = []
    thread = threading.Thread(target=lambda: got.append(waiter.pop("wake", 30.0)))
    started = time.monotonic()
    thread.start()
    pusher.push("wake", {"hello": 1})
    thread.join(BOUND_S + 5)
    assert got == [{"hello": 1}]
    assert time.monotonic() - started < BOUND_S + 5, "woke long before the 30 s timeout"


def test_each_pushed_message_is_popped_exactly_once_by_competing_consumers(
    backend: Backend,
) -> None:
    stores = [backend.make(), backend.make()]
    for i in range(40):
        stores[i % 2].push("work", {"i": i})

    def drain(i: int) -> list[int]:
        mine: list[int] = []
        while (message := stores[i % 2].pop("work", 0)) is not None:
            mine.append(message["i"])
        return mine

    taken = race(8, drain)
    flat = sorted(i for part in taken for i in part)
    assert flat == list(range(40))
    for part in taken:
        assert part == sorted(part), "each consumer sees the queue's order"


# -- scan ------------------------------------------------------------------------------------


def test_scan_lists_keys_by_prefix_without_the_namespace_and_is_bounded(
    backend: Backend,
) -> None:
    store = backend.make()
    for i in range(30):
        store.put(f"run:{i:02d}", {"i": i})
    store.put("card:1", {"c": 1})
    store.put("run*glob", {"literal": True})
    runs = store.scan("run:")
    assert runs == [f"run:{i:02d}" for i in range(30)]
    assert len(store.scan("run:", limit=5)) == 5
    assert set(store.scan("run:", limit=5)) <= set(runs)
    assert store.scan("card:") == ["card:1"]
    assert store.scan("run*") == ["run*glob"], "the prefix is literal, not a pattern"
    assert store.scan("nothing") == []
    with pytest.raises(ConfigurationError, match="limit"):
        store.scan("", limit=0)

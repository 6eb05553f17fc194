"""Fencing tokens, checked by the store itself (MemoryStore under its lock, RedisStore in
one Lua script on a real redis-server on 127.0.0.1).

Each lease acquisition takes the next token of a counter; a renewal keeps it; a write
carrying a token is made only while the lease still holds that token. A survivor's
fence mark on an expired lease ends the old holder for good: its renewals and every
write it carries its token on are refused, even while it still trusts its lease
locally; it stops its runs and logs that once. A lease expiry is simulated by deleting
the lease key: the state a TTL leaves behind, without waiting for it.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from channelkit.platforms.common.cluster import Cluster, ClusterOptions
from channelkit.runtime.clock import FakeClock
from channelkit.state import MemoryStore, StateStore
from channelkit.state.base import GUARD_ABSENT, GUARD_EXISTS, GUARD_STALE, GUARD_WRITTEN

LEASE, COUNTER = "ch:lease:a", "ch:lease-token"


class Backend:
    def __init__(self, kind: str, url: str | None = None) -> None:
        self.kind, self.url = kind, url
        self.clock = FakeClock()
        self.namespace = f"fence-{uuid.uuid4().hex[:10]}"
        self._memory: MemoryStore | None = None
        self._opened: list[StateStore] = []

    def make(self) -> StateStore:
        """A new handle on the shared state (for Redis: another process's connection)."""
        if self.kind == "memory":
            if self._memory is None:
                self._memory = MemoryStore(namespace=self.namespace, clock=self.clock)
            return self._memory
        from channelkit.state import RedisStore

        assert self.url is not None
        store = RedisStore(self.url, namespace=self.namespace, clock=self.clock)
        self._opened.append(store)
        return store

    def close(self) -> None:
        for store in self._opened:
            store.close()


@pytest.fixture(params=["memory", "redis"])
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    if request.param == "redis":
        pytest.importorskip("redis", reason="redis-py is not installed (the redis extra)")
        made = Backend("redis", request.getfixturevalue("redis_server").url)
    else:
        made = Backend("memory")
    try:
        yield made
    finally:
        made.close()


def hold(store: StateStore, token: int, key: str = LEASE) -> int:
    return store.hold_lease(key, {"instance": key}, token=token, ttl_s=30.0, counter=COUNTER)


def test_each_acquisition_takes_a_larger_token_and_a_renewal_keeps_it(backend: Backend) -> None:
    store = backend.make()
    a = hold(store, 0)
    assert a >= 1
    assert hold(store, a) == a  # renewed
    assert store.get(LEASE) == {"instance": LEASE, "token": a}
    b = hold(backend.make(), 0, key="ch:lease:b")
    assert b > a  # one counter for the channel's leases
    assert hold(store, a + 7) == 0  # a token it does not hold renews nothing
    assert store.get(LEASE) == {"instance": LEASE, "token": a}


def test_a_write_is_made_only_while_the_token_is_current(backend: Backend) -> None:
    store = backend.make()
    token = hold(store, 0)
    assert store.write_if(LEASE, "token", token, "card", {"v": 1}) == GUARD_WRITTEN
    assert store.get("card") == {"v": 1}
    claim = store.write_if(LEASE, "token", token, "card", {"v": 2}, only_if_absent=True)
    assert claim == GUARD_EXISTS
    assert store.write_if(LEASE, "token", token + 1, "card", {"v": 3}) == GUARD_STALE
    assert store.write_if(LEASE, "token", token + 1, "card", None) == GUARD_STALE
    assert store.get("card") == {"v": 1}  # nothing changed by the refused writes
    assert store.write_if(LEASE, "token", token, "card", None) == GUARD_WRITTEN
    assert store.get("card") is None
    store.delete(LEASE)  # expired
    assert store.write_if(LEASE, "token", token, "card", {"v": 4}) == GUARD_ABSENT
    assert store.get("card") is None


def test_a_fenced_lease_refuses_its_old_token_for_good(backend: Backend) -> None:
    holder, survivor = backend.make(), backend.make()
    token = hold(holder, 0)
    assert survivor.add(LEASE, {"fencedBy": "b"}) is False  # alive: nothing taken
    holder.delete(LEASE)  # the holder was paused past its lease
    assert survivor.add(LEASE, {"fencedBy": "b"}) is True  # taken over
    assert hold(holder, token) == 0  # the resumed holder cannot renew ...
    assert holder.write_if(LEASE, "token", token, "card", {"late": True}) == GUARD_STALE
    assert holder.get("card") is None  # ... nor write
    assert survivor.get(LEASE) == {"fencedBy": "b"}


def test_one_claim_wins_among_racing_token_holders(backend: Backend) -> None:
    stores = [backend.make() for _ in range(4)]
    token = hold(stores[0], 0)
    barrier = threading.Barrier(16)
    results: list[str] = []
    lock = threading.Lock()

    def claim(i: int) -> None:
        barrier.wait(10)
        got = stores[i % 4].write_if(
            LEASE, "token", token, "claim", {"by": i}, ttl_s=60.0, only_if_absent=True
        )
        with lock:
            results.append(got)

    threads = [threading.Thread(target=claim, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(results) == [GUARD_EXISTS] * 15 + [GUARD_WRITTEN]


def test_after_the_store_is_wiped_the_lease_is_taken_with_a_larger_token(
    redis_server: Any,
) -> None:
    pytest.importorskip("redis", reason="redis-py is not installed (the redis extra)")
    import redis

    made = Backend("redis", redis_server.url)
    try:
        store = made.make()
        first = hold(store, 0)
        second = hold(store, 0, key="ch:lease:b")
        raw = redis.Redis.from_url(redis_server.url)
        try:
            for key in raw.scan_iter(match=f"{made.namespace}:*"):
                raw.delete(key)  # this namespace's keys flushed, counter included
        finally:
            raw.close()
        assert store.get(LEASE) is None
        again = hold(store, second)
        assert again > second > first  # tokens only increase, whatever the counter says
        assert store.write_if(LEASE, "token", again, "card", {"v": 1}) == GUARD_WRITTEN
    finally:
        made.close()


# -- the cluster's view: fenced by the store while still trusting its lease -----------------


class _Scheduler:
    def call_later(self, delay: float, callback: Any) -> Any:
        raise RuntimeError("not scheduled in this test")


def cluster(store: StateStore, clock: FakeClock) -> Cluster:
    return Cluster(
        store,
        channel="ch",
        clock=clock,
        scheduler=_Scheduler(),  # type: ignore[arg-type]
        submit=lambda fn: fn(),
        apply=lambda message: None,
        sweep=lambda first: None,
        options=ClusterOptions(lease_renew_s=5.0, lease_expiry_s=30.0),
    )


def test_an_instance_still_trusting_its_lease_is_refused_by_the_store_and_stops_once(
    backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    a, b = cluster(backend.make(), backend.clock), cluster(backend.make(), backend.clock)
    stopped: list[bool] = []
    a.on_fenced = lambda: stopped.append(True)
    assert a.renew() and b.renew()
    assert 0 < a.token < b.token
    assert a.write("record", "ch:card:t1", {"instance": a.instance_id}) == GUARD_WRITTEN
    assert b.take_over(a.instance_id) is False  # a holds its lease
    a.store.delete(a.lease_key(a.instance_id))  # the store expired it (a was paused)
    assert b.take_over(a.instance_id) is True
    assert a.holds_lease() is True  # a's own view: its trust window is still open
    caplog.set_level(logging.ERROR, logger="channelkit.platforms.common.cluster")
    late = {"instance": a.instance_id, "text": "late"}
    assert a.write("card text", "ch:card:t1", late) == GUARD_STALE  # refused by the store
    assert a.store.get("ch:card:t1") == {"instance": a.instance_id}
    claim = a.write("claim", "ch:claim:t1", {"by": a.instance_id}, only_if_absent=True)
    assert claim == GUARD_STALE
    assert a.store.get("ch:claim:t1") is None  # it settles nothing either
    assert a.fenced is True and a.holds_lease() is False and a.renew() is False
    assert stopped == [True]  # its runs are stopped once
    lost = [r for r in caplog.records if "lost its lease" in r.getMessage()]
    assert len(lost) == 1
    assert b.write("tomb", "ch:tomb:t1", {"state": "Failed"}) == GUARD_WRITTEN


def test_a_lease_the_store_lost_within_its_expiry_is_taken_again_and_reregistered(
    backend: Backend,
) -> None:
    a = cluster(backend.make(), backend.clock)
    again: list[bool] = []
    a.on_reacquired = lambda: again.append(True)
    assert a.renew()
    first = a.token
    a.store.delete(a.lease_key(a.instance_id))  # wiped (a renewed 1 s ago, not expired)
    backend.clock.advance(1.0)
    assert a.write("record", "ch:run:r1", {"instance": a.instance_id}) == GUARD_WRITTEN
    assert a.token > first and a.reacquired == 1 and again == [True]
    assert a.fenced is False


def test_a_lease_gone_after_a_silence_past_its_expiry_in_a_wiped_store_fences_itself(
    backend: Backend,
) -> None:
    from channelkit.platforms.common.store_watch import EPOCH_KEY, watch_of

    a = cluster(backend.make(), backend.clock)
    watch_of(a.store, backend.clock.time).check_epoch(force=True)
    assert a.renew()
    a.store.delete(a.lease_key(a.instance_id))  # a survivor's mark would be gone too
    a.store.delete(EPOCH_KEY)  # the store came back empty
    backend.clock.advance(31.0)  # a was silent longer than its lease
    assert a.renew() is False
    assert a.fenced is True
    assert "fencedBy" in (a.store.get(a.lease_key(a.instance_id)) or {})


def test_a_matching_record_is_claimed_in_one_step_and_a_mismatch_claims_nothing(
    backend: Backend,
) -> None:
    store = backend.make()
    token = hold(store, 0)
    store.put("card", {"kind": "status", "owner": "u1", "n": 3})
    args: dict[str, Any] = {"guard": LEASE, "field": "token", "expected": token, "ttl_s": 60.0}
    assert store.claim_matching("card", {"owner": "u2"}, "claim", {"by": 1}, **args) == (
        {"kind": "status", "owner": "u1", "n": 3},
        "mismatch",
    )
    assert store.get("claim") is None
    assert store.claim_matching("nothing", {"owner": "u1"}, "claim", {"by": 1}, **args) == (
        None,
        "mismatch",
    )
    match = {"kind": "status", "owner": "u1", "n": "3"}
    found, outcome = store.claim_matching("card", match, "claim", {"by": 1}, **args)
    assert found == {"kind": "status", "owner": "u1", "n": 3} and outcome == GUARD_WRITTEN
    assert store.claim_matching("card", match, "claim", {"by": 2}, **args)[1] == GUARD_EXISTS
    stale = {**args, "expected": token + 1}
    assert store.claim_matching("card", match, "claim2", {"by": 3}, **stale)[1] == GUARD_STALE
    assert store.get("claim") == {"by": 1} and store.get("claim2") is None


def test_a_match_compares_text_the_same_way_in_every_store(backend: Backend) -> None:
    store = backend.make()
    token = hold(store, 0)
    store.put("card", {"group": True, "n": 12, "owner": "u1"})
    args: dict[str, Any] = {"guard": LEASE, "field": "token", "expected": token}
    assert store.claim_matching("card", {"group": "True"}, "c1", {}, **args)[1] == "mismatch"
    assert store.claim_matching("card", {"n": "12.0"}, "c1", {}, **args)[1] == "mismatch"
    match = {"group": "true", "n": "12", "owner": "u1"}
    assert store.claim_matching("card", match, "c1", {}, **args)[1] == GUARD_WRITTEN


def test_a_write_before_any_lease_while_the_store_is_down_is_an_outage_not_a_refusal() -> None:
    from channelkit.errors import StateStoreUnavailable

    class Down(MemoryStore):
        def hold_lease(self, *args: Any, **kwargs: Any) -> int:
            raise StateStoreUnavailable("redis://127.0.0.1:1 unreachable")

    clock = FakeClock()
    a = cluster(Down(namespace="down", clock=clock), clock)
    with pytest.raises(StateStoreUnavailable):
        a.guarded("ch:claim:t1", {"by": 1}, only_if_absent=True)
    assert a.write("record", "ch:card:t1", {"v": 1}) is None  # logged as an outage
    assert a.down is True and a.fenced is False
    assert a.store.get("ch:card:t1") is None

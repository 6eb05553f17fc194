from __future__ import annotations

import threading

import pytest
from channelkit.runtime import BoundedMap, FakeClock


def test_default_cap_is_1000_and_oldest_inserted_is_evicted():
    m: BoundedMap[int, int] = BoundedMap()
    assert m.maxsize == 1000
    for i in range(1000):
        m[i] = i
    assert m.get(0) == 0  # a read does not refresh
    m[1000] = 1000
    assert 0 not in m
    assert len(m) == 1000
    assert m.keys()[:2] == [1, 2]


def test_ttl_uses_injected_clock_and_reads_do_not_reorder():
    clock = FakeClock()
    m: BoundedMap[str, int] = BoundedMap(3, ttl=10, clock=clock)
    m["a"] = 1
    clock.advance(5)
    m["b"] = 2
    m["c"] = 3
    assert m["a"] == 1  # read: no reordering
    m["d"] = 4  # evicts the oldest inserted ("a")
    assert m.keys() == ["b", "c", "d"]
    clock.advance(10)
    assert m.get("b") is None and len(m) == 0
    with pytest.raises(KeyError):
        m["b"]


def test_lru_policy_refreshes_on_read():
    m: BoundedMap[str, int] = BoundedMap(2, policy="lru")
    m["a"] = 1
    m["b"] = 2
    assert m["a"] == 1
    m["c"] = 3
    assert m.keys() == ["a", "c"]


def test_remove_if_checks_identity_and_setdefault_pop():
    m: BoundedMap[str, object] = BoundedMap(10)
    first, second = object(), object()
    m["k"] = first
    assert m.remove_if("k", second) is False
    assert m.remove_if("k", first) is True
    assert m.setdefault("k", lambda: second) is second
    assert m.setdefault("k", object) is second
    assert m.pop("k") is second
    assert m.pop("k") is None
    assert m.items() == []


def test_concurrent_access_is_safe():
    clock = FakeClock()
    m: BoundedMap[int, int] = BoundedMap(100, ttl=5, clock=clock)

    def worker(base: int) -> None:
        for i in range(2000):
            m[base * 10000 + i] = i
            m.get(base * 10000 + i - 1)
            m.items() if i % 500 == 0 else None

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(m) == 100


def test_validation():
    with pytest.raises(ValueError, match="maxsize"):
        BoundedMap(0)
    with pytest.raises(ValueError, match="ttl"):
        BoundedMap(1, ttl=0)

"""MemoryStore specifics: bounded (oldest out), close wakes waiting pops."""

from __future__ import annotations

import threading
import time

import pytest
from channelkit.errors import ConfigurationError
from channelkit.runtime.clock import FakeClock
from channelkit.state import MemoryStore


def test_past_maxsize_the_oldest_written_key_goes_out() -> None:
    store = MemoryStore(maxsize=3)
    for key in ("a", "b", "c"):
        store.put(key, {"k": key})
    store.put("a", {"k": "a2"})  # rewriting makes "a" the newest
    store.put("d", {"k": "d"})
    assert store.get("b") is None
    assert store.scan("") == ["a", "c", "d"]
    assert store.add("e", {"k": "e"}) is True
    assert store.scan("") == ["a", "d", "e"]


def test_a_queue_past_maxsize_drops_its_oldest_message() -> None:
    store = MemoryStore(maxsize=2)
    for i in range(3):
        store.push("q", {"i": i})
    assert [store.pop("q", 0), store.pop("q", 0), store.pop("q", 0)] == [
        {"i": 1},
        {"i": 2},
        None,
    ]


def test_close_wakes_a_waiting_pop_with_none() -> None:
    store = MemoryStore()
    got: list[object] = []
    thread = threading.Thread(target=lambda: got.append(store.pop("q", 60.0)))
    thread.start()
    started = time.monotonic()
    store.close()
    thread.join(10)
    assert got == [None]
    assert time.monotonic() - started < 10


def test_expired_keys_do_not_count_in_scan_and_are_dropped() -> None:
    clock = FakeClock()
    store = MemoryStore(clock=clock)
    store.put("old", {"v": 1}, ttl_s=1)
    store.put("new", {"v": 1})
    clock.advance(2)
    assert store.scan("") == ["new"]
    assert "old" not in store._data  # dropped, not just hidden


def test_maxsize_and_namespace_are_validated() -> None:
    with pytest.raises(ConfigurationError, match="maxsize"):
        MemoryStore(maxsize=0)
    with pytest.raises(ConfigurationError, match="namespace"):
        MemoryStore(namespace="has:colon")

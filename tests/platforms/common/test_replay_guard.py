"""ReplayGuard: one use per key while fresh, bounded memory that never forgets a fresh key."""

from __future__ import annotations

import pytest
from channelkit.platforms.common.replay import ReplayGuard
from channelkit.runtime import FakeClock


def test_a_key_is_admitted_once_until_it_expires() -> None:
    clock = FakeClock()
    guard = ReplayGuard(clock.time)
    now = clock.time()
    assert guard.admit("sig", now + 60)
    assert not guard.admit("sig", now + 60)
    clock.advance(61)
    assert not guard.admit("stale", now + 60)  # already outside its window
    assert guard.admit("sig", clock.time() + 60)  # expired: a new use of the same bytes


def test_when_full_the_accepted_window_shrinks_instead_of_forgetting_fresh_keys() -> None:
    clock = FakeClock()
    guard = ReplayGuard(clock.time, maxsize=1_000)
    now = clock.time()
    for n in range(1_000):
        assert guard.admit(n, now + 100 + n)
    assert guard.floor == float("-inf")
    assert guard.admit("new", now + 2_000)  # full: the earliest expiring key (0) is dropped
    assert len(guard) == 1_000
    assert guard.floor == now + 100
    assert not guard.admit(0, now + 100)  # forgotten, but refused: the floor covers it
    assert not guard.admit("old-but-fresh", now + 50)  # signed earlier than memory covers
    assert guard.admit("later", now + 5_000)


def test_first_and_forget_work_as_a_dedup_log() -> None:
    clock = FakeClock()
    guard = ReplayGuard(clock.time, ttl=10)
    assert guard.first("id") and not guard.first("id") and "id" in guard
    guard.forget("id")
    assert guard.first("id")
    clock.advance(11)
    assert "id" not in guard and guard.first("id")


@pytest.mark.parametrize("size", [999, 10_001])
def test_memory_is_bounded_between_1000_and_10000_entries(size: int) -> None:
    with pytest.raises(ValueError, match="maxsize"):
        ReplayGuard(FakeClock().time, maxsize=size)

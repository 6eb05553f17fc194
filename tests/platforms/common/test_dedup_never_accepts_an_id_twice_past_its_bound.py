"""The dedup rule of ``platforms/common/replay.py``: an id is never accepted twice while
the platform may still deliver it, whatever the memory bound dropped."""

from __future__ import annotations

import pytest
from channelkit.platforms.common.replay import (
    MIN_REPLAY_ENTRIES,
    ReplayGuard,
    sent_at_seconds,
)
from channelkit.platforms.common.shared_dedup import SharedDedup
from channelkit.runtime import FakeClock

WINDOW = 3600.0


def test_an_id_dropped_by_the_memory_bound_is_refused_by_its_send_time() -> None:
    clock = FakeClock(wall_start=1_700_000_000.0)
    guard = ReplayGuard(clock.time, ttl=WINDOW, maxsize=MIN_REPLAY_ENTRIES)
    sent = clock.time()
    assert guard.first("m-0", sent)
    for i in range(1, 3 * MIN_REPLAY_ENTRIES):
        clock.advance(0.001)
        assert guard.first(f"m-{i}", clock.time())
    assert len(guard) == MIN_REPLAY_ENTRIES  # bounded
    assert "m-0" not in guard  # forgotten ...
    assert not guard.first("m-0", sent)  # ... and still refused
    assert guard.refused_stale == 1
    clock.advance(0.001)
    assert guard.first("m-new", clock.time())  # a new message still gets through


def test_an_id_past_its_redelivery_window_is_refused() -> None:
    clock = FakeClock(wall_start=1_700_000_000.0)
    guard = ReplayGuard(clock.time, ttl=WINDOW)
    sent = clock.time()
    assert guard.first("m", sent)
    clock.advance(WINDOW + 1)
    assert len(guard) == 0
    assert not guard.first("m", sent)


def test_ordered_ids_keep_a_high_water_mark() -> None:
    clock = FakeClock(wall_start=1_700_000_000.0)
    guard = ReplayGuard(clock.time, ttl=WINDOW, maxsize=MIN_REPLAY_ENTRIES, ordered=True)
    for update_id in range(100, 100 + 3 * MIN_REPLAY_ENTRIES):
        assert guard.first(update_id)
    assert len(guard) == MIN_REPLAY_ENTRIES
    assert guard.high_water == 100 + 2 * MIN_REPLAY_ENTRIES - 1
    assert not guard.first(100)  # forgotten long ago: still a replay
    assert not guard.first(100 + 3 * MIN_REPLAY_ENTRIES - 1)  # remembered
    assert guard.first(100 + 3 * MIN_REPLAY_ENTRIES)  # the next update


def test_ordered_ids_forgotten_by_the_ttl_stay_refused() -> None:
    clock = FakeClock(wall_start=1_700_000_000.0)
    guard = ReplayGuard(clock.time, ttl=WINDOW, ordered=True)
    assert guard.first(7)
    clock.advance(WINDOW + 1)
    assert guard.first(8)  # purges 7, raising the mark
    assert not guard.first(7)


def test_an_ordered_guard_names_a_non_integer_key() -> None:
    guard = ReplayGuard(FakeClock().time, ordered=True)
    with pytest.raises(TypeError, match="key"):
        guard.first("7")


def test_forget_lets_a_refused_delivery_come_again() -> None:
    clock = FakeClock(wall_start=1_700_000_000.0)
    guard = ReplayGuard(clock.time, ttl=WINDOW, ordered=True)
    assert guard.first(5)
    guard.forget(5)  # refused for another reason (channel closed): may be retried
    assert guard.first(5)


def test_shared_dedup_passes_the_send_time_on() -> None:
    clock = FakeClock(wall_start=1_700_000_000.0)
    dedup = SharedDedup(clock.time, ttl=WINDOW, scope="t", maxsize=MIN_REPLAY_ENTRIES)
    sent = clock.time()
    assert dedup.first("m-0", sent)
    for i in range(1, 2 * MIN_REPLAY_ENTRIES):
        clock.advance(0.001)
        assert dedup.first(f"m-{i}")
    assert not dedup.first("m-0", sent)
    assert len(dedup) == MIN_REPLAY_ENTRIES


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        (1_700_000_000, 1_700_000_000.0),
        ("1700000000123", 1_700_000_000.123),
        ("1700000000123456", 1_700_000_000.123456),
        (" 1700000000 ", 1_700_000_000.0),
        (None, None),
        (True, None),
        ("nan", None),
        ("-5", None),
        (1.5, None),
        ("", None),
        (0, None),
    ],
)
def test_send_times_in_seconds_milliseconds_or_microseconds(value: object, seconds) -> None:
    got = sent_at_seconds(value)
    assert got == pytest.approx(seconds) if seconds is not None else got is None

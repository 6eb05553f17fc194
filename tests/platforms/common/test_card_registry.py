"""The card registry: records by id with indexes, cap, claims, tombstones, bounded maps."""

from __future__ import annotations

from channelkit.platforms.common.registry import (
    MAX_LIVE_RECORDS,
    CardRegistry,
    MemoryCardRegistry,
    MemoryStateRegistry,
    StateRegistry,
)
from channelkit.runtime import FakeClock


def test_records_indexes_and_removal() -> None:
    reg: MemoryCardRegistry[str, str] = MemoryCardRegistry(FakeClock())
    assert reg.add("a", "rec-a", track="t-a", scope=("s", "o"))
    assert not reg.add("a", "other")  # a taken key changes nothing
    assert reg.get("a") == "rec-a" and reg.find("track", "t-a") == "rec-a"
    assert reg.add("b", "rec-b", scope=("s", "o"))  # the newer record takes the scope
    assert reg.find("scope", ("s", "o")) == "rec-b"
    assert reg.remove("a", "not-a") is None and reg.remove("a") == "rec-a"
    assert reg.find("track", "t-a") is None and reg.find("scope", ("s", "o")) == "rec-b"
    assert reg.index_size("track") == 0 and reg.records() == ["rec-b"] and len(reg) == 1


def test_cap_refuses_beyond_maxsize() -> None:
    reg: MemoryCardRegistry[int, str] = MemoryCardRegistry(FakeClock(), maxsize=2)
    assert reg.add(1, 1) and reg.add(2, 2) and not reg.add(3, 3)
    assert MemoryCardRegistry(FakeClock()).maxsize == MAX_LIVE_RECORDS == 1_000


def test_tombstones_expire_on_the_injected_clock_and_are_capped() -> None:
    clock = FakeClock()
    reg: MemoryCardRegistry[str, str] = MemoryCardRegistry(clock, tombstone_maxsize=3)
    for i in range(5):
        reg.bury(f"k{i}", f"state{i}")
    assert reg.tombstone_count() == 3 and reg.tombstone("k0") is None
    assert reg.tombstones() == ["state2", "state3", "state4"]
    clock.advance(601)
    assert reg.tombstone("k4") is None and reg.tombstone_count() == 0


def test_claims_are_one_shot() -> None:
    reg: MemoryCardRegistry[str, str] = MemoryCardRegistry(FakeClock())
    cell = reg.state("reserved")
    assert cell.compare_and_set(("reserved", "pending"), "claimed")
    assert not cell.compare_and_set(("reserved", "pending"), "claimed")
    claim = reg.claim()
    assert claim.try_claim() and not claim.try_claim() and claim.release()


def test_state_registry_shares_by_name_and_dedups_deliveries() -> None:
    clock = FakeClock()
    state = MemoryStateRegistry(clock)
    assert state.cards("x") is state.cards("x") and state.cards("x") is not state.cards("y")
    owners = state.map("owners", ttl=10.0)
    owners["m"] = 1
    assert state.map("owners")["m"] == 1
    seen = state.deliveries("updates", ttl=60.0)
    assert seen.first("u1") and not seen.first("u1") and "u1" in seen
    seen.forget("u1")
    assert seen.first("u1")
    clock.advance(61)
    assert seen.first("u1") and len(seen) == 1
    clock.advance(11)
    assert "m" not in owners


def test_memory_implementations_satisfy_the_protocols() -> None:
    registry: CardRegistry[str, str] = MemoryCardRegistry(FakeClock())
    store: StateRegistry = MemoryStateRegistry(FakeClock())
    assert len(registry) == 0 and store.cards("k") is not None

"""RunJournal across instances sharing one store: a process that starts tells the people
of the runs dead instances left, never those of a live instance's runs in progress; a
named instance tells its earlier incarnation's runs at once, an instance that died is
told of when its lease lapses, by a live instance's sweep; each run is told once.

Each "process" is a journal with its own scheduler on one fake clock; the store is one
MemoryStore on that clock (its TTLs lapse as the clock moves). A process that dies stops
its scheduler: its lease is no longer renewed."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from channelkit.errors import StateStoreUnavailable
from channelkit.platforms.common.run_journal import LEASE_EXPIRY_S, LEASE_RENEW_S, RunJournal
from channelkit.runtime import Scheduler
from channelkit.state import MemoryStore, StateStore

from tests.platforms._shared import Runtime


class Process:
    """One process of the bot: its scheduler and its journal; ``told`` collects what its
    journal tells (chat, record)."""

    def __init__(self, rt: Runtime, store: StateStore, name: str | None) -> None:
        self.scheduler = Scheduler(rt.pool, clock=rt.clock)
        self.journal = RunJournal(
            "feishu", store=store, scheduler=self.scheduler, instance_name=name
        )
        self.told: list[tuple[str, dict[str, Any]]] = []

    def start(self) -> None:
        """What a channel does when the service starts it: tell the leftovers."""
        self.journal.tell_leftovers(lambda chat, _thread, record: self.told.append((chat, record)))

    def run(self, chat: str, message: str) -> None:
        self.journal.record(f"{chat}:{message}", {"chat": chat, "message": message})

    def crash(self) -> None:
        """``kill -9``: nothing of it runs any more (no renewal, no close)."""
        self.scheduler.stop(1.0)


@pytest.fixture
def rt() -> Iterator[Runtime]:
    runtime = Runtime()
    yield runtime
    runtime.close()


@pytest.fixture
def store(rt: Runtime) -> Iterator[MemoryStore]:
    memory = MemoryStore(namespace="bot", clock=rt.clock)
    yield memory
    memory.close()


def _chats(process: Process) -> list[str]:
    return [chat for chat, _ in process.told]


@pytest.mark.parametrize("names", [("a", "b"), (None, None)], ids=["named", "unnamed"])
def test_a_starting_instance_leaves_a_live_instances_run_alone(
    rt: Runtime, store: MemoryStore, names: tuple[str | None, str | None]
) -> None:
    running, starting = Process(rt, store, names[0]), Process(rt, store, names[1])
    running.start()
    running.run("chat-1", "m1")
    starting.start()  # a rolling restart of the other instance
    rt.advance(0)
    for _ in range(4):  # both renew; the run goes on past several lease lifetimes
        rt.advance(LEASE_EXPIRY_S)
    assert starting.told == [] and running.told == []
    running.journal.done("chat-1:m1")  # the run ends; nothing is left to tell
    rt.advance(LEASE_RENEW_S)
    assert starting.told == [] and running.told == []


def test_the_runs_of_an_instance_that_died_are_told_once_when_its_lease_lapses(
    rt: Runtime, store: MemoryStore
) -> None:
    survivor, doomed = Process(rt, store, "a"), Process(rt, store, "b")
    survivor.start()
    doomed.start()
    doomed.run("chat-2", "m2")
    doomed.crash()
    rt.advance(LEASE_EXPIRY_S - LEASE_RENEW_S)  # its lease still holds
    assert survivor.told == []
    rt.advance(2 * LEASE_RENEW_S)  # lapsed, then the survivor's next renewal sweeps
    assert _chats(survivor) == ["chat-2"]
    record = survivor.told[0][1]
    assert record == {"chat": "chat-2", "message": "m2"}  # the channel's own fields only
    rt.advance(3 * LEASE_EXPIRY_S)
    assert _chats(survivor) == ["chat-2"]  # once


def test_a_named_instance_tells_its_earlier_incarnations_runs_at_once(
    rt: Runtime, store: MemoryStore
) -> None:
    before = Process(rt, store, "a")
    before.start()
    before.run("chat-3", "m3")
    before.crash()  # the old lease is still there: a restart within its lifetime
    after = Process(rt, store, "a")
    after.start()
    assert _chats(after) == ["chat-3"]
    after.run("chat-4", "m4")  # its own run goes on: its sweeps leave it alone
    rt.advance(3 * LEASE_EXPIRY_S)
    assert _chats(after) == ["chat-3"]


def test_an_unnamed_instance_tells_its_earlier_incarnations_runs_once_the_lease_lapses(
    rt: Runtime, store: MemoryStore
) -> None:
    before = Process(rt, store, None)
    before.start()
    before.run("chat-5", "m5")
    before.crash()
    after = Process(rt, store, None)
    after.start()
    assert after.told == []  # it cannot tell the old process from a live one yet
    rt.advance(LEASE_EXPIRY_S + LEASE_RENEW_S)
    assert _chats(after) == ["chat-5"]


def test_a_closed_instance_gives_its_lease_up(rt: Runtime, store: MemoryStore) -> None:
    survivor, leaving = Process(rt, store, "a"), Process(rt, store, "b")
    survivor.start()
    leaving.start()
    leaving.run("chat-6", "m6")  # a record a graceful end left (its end never came)
    leaving.journal.close()
    rt.advance(LEASE_RENEW_S)  # the survivor's next renewal, long before the lapse
    assert _chats(survivor) == ["chat-6"]


def test_without_a_scheduler_every_stored_record_is_taken_at_start(store: MemoryStore) -> None:
    """A single poller owns its bot: it takes whatever is left when it starts."""
    RunJournal("telegram", store=store).record("1:10", {"chat": "1"})
    assert RunJournal("telegram", store=store).take_leftovers() == [{"chat": "1"}]


def test_over_redis_a_restarted_instance_tells_only_the_dead_ones_runs(
    rt: Runtime, redis_server: Any
) -> None:
    """Two processes' own RedisStores on one namespace: a live instance's run stays, the
    run of the instance that was killed (its lease key gone, as Redis expires it) is
    told once."""
    from channelkit.state import RedisStore

    namespace = f"journal-{uuid.uuid4().hex[:8]}"
    stores = [RedisStore(redis_server.url, namespace=namespace) for _ in range(3)]
    try:
        live, killed, restarted = (Process(rt, store, None) for store in stores)
        live.start()
        killed.start()
        live.run("chat-7", "m7")
        killed.run("chat-8", "m8")
        killed.crash()
        restarted.start()
        assert restarted.told == []  # both leases are there: nothing is known dead
        assert killed.journal.instance is not None
        stores[0].delete(f"feishu:alive:{killed.journal.instance}")  # its TTL ran out
        rt.advance(LEASE_RENEW_S)
        told = _chats(live) + _chats(restarted)
        assert told == ["chat-8"], told  # once, by whichever swept first
    finally:
        for store in stores:
            store.close()


class Outage:
    """A store whose backend can be taken away (``down = True``)."""

    def __init__(self, inner: MemoryStore) -> None:
        self.inner = inner
        self.down = False

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name not in ("put", "get", "scan", "add", "delete"):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            if self.down:
                raise StateStoreUnavailable("redis://127.0.0.1:1 unreachable")
            return attr(*args, **kwargs)

        return call


def test_a_store_outage_is_logged_once_and_the_sweep_resumes_after_it(
    rt: Runtime, store: MemoryStore, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="channelkit.platforms.common.run_journal")
    flaky = Outage(store)
    survivor = Process(rt, flaky, "a")  # type: ignore[arg-type]
    doomed = Process(rt, flaky, "b")  # type: ignore[arg-type]
    survivor.start()
    doomed.start()
    doomed.run("chat-9", "m9")
    doomed.crash()
    flaky.down = True
    for _ in range(4):
        rt.advance(LEASE_EXPIRY_S)
    failed = [r for r in caplog.records if "lease failed" in r.getMessage()]
    assert len(failed) == 1 and survivor.told == []  # one warning for the whole outage
    flaky.down = False
    rt.advance(LEASE_RENEW_S)
    assert any("renewed again" in r.getMessage() for r in caplog.records)
    assert _chats(survivor) == ["chat-9"]

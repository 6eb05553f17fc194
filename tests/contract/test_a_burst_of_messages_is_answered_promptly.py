"""A burst of messages from many people is answered promptly, on every chat platform.

64 and 128 people each send one message at (nearly) the same moment; every one of them
gets their answer exactly once, and the last answer is shown within :data:`BURST_BOUND_S`
of the first message, with the default pools and with every pool of the channel at one
worker. The bound is generous for a loaded CI machine, yet fails on a stall: a task that
waits for work queued on its own pool holds its worker until its wait times out (about a
minute), so with one worker, or more waiters than workers, the answers stop. The times
themselves are the benchmark's (``benchmarks/bench_burst.py``), not this test's.

Each platform runs through its contract driver (emulator + real channel over HTTP on
127.0.0.1, FakeClock); the people are the emulator's person under different user ids,
all in the emulator's one chat (sessions are per chat and sender).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from channelkit.agents import FunctionAgent, Turn
from channelkit.platforms.common.rate_limit import ChatLimit
from channelkit.runtime import FakeClock, WorkerPool
from contract_drivers import DRIVERS, Driver

pytestmark = pytest.mark.slow  # many seconds of real time: its file starts first

#: Real seconds from the first message to the last answer. The stall it catches is a
#: minute per wave of waiters (a hook holding its worker until a 59 s wait times out);
#: the slowest healthy case, 128 runs through a one-worker run pool one after another
#: (each holds the worker until its final card is written), takes about 10 s on a loaded
#: 2-core machine (docs/performance.md, "A burst of people at once").
BURST_BOUND_S = 20.0

#: The emulator attribute naming the person who sends (each emulator has one person).
SENDER_ATTRIBUTE = {
    "dingtalk": "user_id",
    "feishu": "user_open_id",
    "telegram": "user_id",
    "slack": "user_id",
    "weixin": "user_id",
}


def sender_attribute(platform: str) -> str | None:
    """The emulator attribute naming the person: `SENDER_ATTRIBUTE`, or for a platform
    defined outside the package its driver's ``sender_attribute``."""
    named = SENDER_ATTRIBUTE.get(platform)
    return named if named is not None else getattr(DRIVERS.get(platform), "sender_attribute", None)


ANSWER = re.compile(r"answer for (p\d+)\.")


class Answers:
    """The agent: each run waits until every person has sent (so all the runs answer at
    the same moment, the burst the hooks see), then answers its person."""

    def __init__(self) -> None:
        self.everyone_sent = threading.Event()

    def __call__(self, turn: Turn) -> str:
        self.everyone_sent.wait(BURST_BOUND_S)
        return f"answer for {turn.text.strip()}."


def person_id(platform: str, default: Any, index: int) -> Any:
    """A user id of the emulator's own shape for person ``index``."""
    if isinstance(default, int):
        return 1_000_000 + index
    digits = str(70_000_000 + index)
    if platform == "feishu":
        return "ou_" + digits.rjust(len(default) - 3, "0")
    if platform == "slack":
        return f"U{digits}"
    return f"{default}{index}" if not default[-1:].isdigit() else f"user{digits}"


@contextmanager
def one_worker_pools(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every pool the channel creates (hooks, card writes, timers, runs) has one worker."""
    import channelkit.core.channel as channel_module

    def one_worker(_workers: int, **options: Any) -> WorkerPool:
        return WorkerPool(1, **options)

    monkeypatch.setattr(channel_module, "WorkerPool", one_worker)
    yield


def burst(driver: Driver, people: int, agent: Answers) -> tuple[float, dict[str, int]]:
    """``people`` people send one message each; returns (seconds to the last answer,
    answers shown per person)."""
    platform = driver.platform
    attribute = sender_attribute(platform)
    assert attribute is not None
    emulator = driver.emulator
    default = getattr(emulator, attribute)
    started = time.monotonic()
    try:
        for i in range(people):
            # sends are answered at once (ACK first), so the runs overlap
            setattr(emulator, attribute, person_id(platform, default, i))
            driver.send(f"p{i}")
    finally:
        setattr(emulator, attribute, default)
        agent.everyone_sent.set()
    sent_s = time.monotonic() - started
    counts: dict[str, int] = {}
    deadline = started + BURST_BOUND_S
    while True:
        counts = {}
        for segment in driver.segments():
            found = ANSWER.search(segment.text)
            if found is not None and segment.state == "completed":
                counts[found.group(1)] = counts.get(found.group(1), 0) + 1
        if len(counts) == people or time.monotonic() > deadline:
            break
        driver.tick()
        time.sleep(0.02)
    elapsed = time.monotonic() - started
    missing = [f"p{i}" for i in range(people) if f"p{i}" not in counts]
    assert not missing, (
        f"{platform}: {len(missing)} of {people} people had no answer {elapsed:.1f} s after "
        f"the first message (sending took {sent_s:.1f} s): {missing[:8]}"
    )
    return elapsed, counts


@pytest.mark.parametrize("pools", ["default pools", "one-worker pools"])
@pytest.mark.parametrize("people", [64, 128])
@pytest.mark.parametrize("platform", sorted(DRIVERS))
def test_every_person_of_a_burst_gets_one_answer_promptly(
    platform: str, people: int, pools: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    driver_class = DRIVERS[platform]
    if sender_attribute(platform) is None:
        pytest.fail(f"{platform}: name the emulator's sender attribute in SENDER_ATTRIBUTE")
    clock = FakeClock(start=time.monotonic(), wall_start=time.time())
    agent = Answers()
    with (
        one_worker_pools(monkeypatch) if pools == "one-worker pools" else _nothing(),
        driver_class.start(FunctionAgent(agent, name="burst"), clock) as driver,
    ):
        unlimited_chat(driver)
        elapsed, counts = burst(driver, people, agent)
        # nothing shown twice: every answer on exactly one finished segment
        twice = {who: n for who, n in counts.items() if n != 1}
        assert not twice, f"{platform}: answers shown more than once: {twice}"
        assert elapsed < BURST_BOUND_S


def unlimited_chat(driver: Driver) -> None:
    """Every person writes in the emulator's one chat, where a platform's per-chat limit
    (Telegram: one message a second) would pace 128 answers over minutes of the clock
    the test ticks: a measure of the limit, not of a stall. The burst is about stalls,
    so that chat gets no limit here; pacing has its own contract rule."""
    limiter = getattr(driver.pg.channel, "rate_limiter", None)
    if limiter is not None:
        limiter.set_limit(lambda chat_id: ChatLimit(rate=1_000_000.0, burst=1_000_000.0))


@contextmanager
def _nothing() -> Iterator[None]:
    yield

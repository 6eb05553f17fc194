"""Final-answer delivery under transient faults (fake clock, local fake platforms).

1,000 final answers per platform, each through the platform's real path layout
(Telegram: HTML -> plain; Weixin: sendmessage; Feishu: card -> text, each with a
``uuid``; DingTalk: session webhook -> robot API), with a 10% chance of a transient
fault on *every* call, chosen evenly among: 429 (``retry_after`` 1 s), 500, connect
timeout, connection reset while connecting, and read timeout (the request arrived or
not, 50/50: the outcome is unknown to the sender). Each fault is the exception the
generated clients raise for it, so :func:`channelkit.platforms.common.delivery.classify`
sees what it sees in production.

Reported per platform, for the :class:`~channelkit.platforms.common.delivery.DeliveryChain`
and for a no-retry baseline measured in the same run (one attempt on the first path, as
before): answers shown (%), duplicates (an answer shown twice; Feishu de-duplicates by
``uuid`` like the platform), answers whose outcome was unknown, and the delay the chain
added (fake-clock seconds from the first attempt to the answer shown, p50 / p99 over all
answers and p99 over the answers that needed a retry).

Run: ``python benchmarks/bench_delivery_faults.py``
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from channelkit.errors import ConnectTimeout, RateLimited, ReadTimeout, ServerError, TransportError
from channelkit.http.retry import RetryPolicy
from channelkit.platforms.common.delivery import (
    DeliveryChain,
    DeliveryPath,
    DeliveryTarget,
    default_policy,
)
from channelkit.runtime import FakeClock, Scheduler

RUNS = 1_000
FAULT_RATE = 0.10
SEED = 20261202


class _ConnectReset(Exception):
    """Stands for urllib3's NewConnectionError (reset while connecting)."""


_ConnectReset.__name__ = "NewConnectionError"


def _reset_before_sending() -> TransportError:
    error = TransportError("POST /x: ConnectionError")
    error.__context__ = _ConnectReset("[Errno 104] Connection reset by peer")
    return error


class _TimedScheduler(Scheduler):
    """The runtime scheduler (no pool: callbacks run on the advancing thread) that
    remembers when its timers are due, so the benchmark jumps straight there."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__(None, clock=clock)
        self.due: list[float] = []

    def call_later(self, delay: float, fn: Callable[..., Any], /, *args: Any) -> Any:
        handle = super().call_later(delay, fn, *args)
        self.due.append(handle.when)
        return handle


@dataclass
class FakePlatform:
    """Shows messages; a call fails with probability ``rate`` (one of five faults)."""

    rng: random.Random
    rate: float
    shown: dict[str, int] = field(default_factory=dict)  # answer id -> times shown
    keys: set[str] = field(default_factory=set)  # uuids already honoured
    unknown: int = 0

    def call(self, answer: str, key: str | None = None) -> None:
        if self.rng.random() < self.rate:
            fault = self.rng.randrange(5)
            if fault == 0:
                raise RateLimited("Too Many Requests", status=429, retry_after=1.0)
            if fault == 1:
                raise ServerError("Internal Server Error", status=500)
            if fault == 2:
                raise ConnectTimeout("POST /x: connect timeout")
            if fault == 3:
                raise _reset_before_sending()
            if self.rng.random() < 0.5:  # the request arrived before the read timed out
                self._show(answer, key)
            raise ReadTimeout("POST /x: read timeout")
        self._show(answer, key)

    def _show(self, answer: str, key: str | None) -> None:
        if key is not None:
            if key in self.keys:
                return  # Feishu: one message per uuid
            self.keys.add(key)
        self.shown[answer] = self.shown.get(answer, 0) + 1


def _paths(platform: str, fake: FakePlatform, answer: str) -> tuple[DeliveryPath, ...]:
    call = fake.call
    if platform == "telegram":
        return (
            DeliveryPath("sendMessage HTML", lambda: call(answer)),
            DeliveryPath("sendMessage plain", lambda: call(answer)),
        )
    if platform == "weixin":
        return (DeliveryPath("sendmessage", lambda: call(answer)),)
    if platform == "feishu":
        card_key, text_key = f"{answer}-card", f"{answer}-text"
        return (
            DeliveryPath("card", lambda: call(answer, card_key), idempotent=True),
            DeliveryPath("text", lambda: call(answer, text_key), idempotent=True),
        )
    return (
        DeliveryPath("session webhook", lambda: call(answer)),
        DeliveryPath("robot groupMessages/send", lambda: call(answer)),
    )


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@dataclass
class Result:
    shown: int
    duplicates: int
    unknown: int
    latencies: list[float]
    retried_latencies: list[float]


def measure(platform: str, *, retry: bool) -> Result:
    rng = random.Random(f"{SEED}-{platform}")  # the same faults for chain and baseline
    fake = FakePlatform(rng, FAULT_RATE)
    clock = FakeClock()
    scheduler = _TimedScheduler(clock)
    policy = default_policy() if retry else RetryPolicy(max_attempts=1)
    policy.jitter = random.Random(SEED).random
    chain = DeliveryChain(scheduler, policy=policy)
    latencies: list[float] = []
    retried: list[float] = []
    unknown = 0
    for n in range(RUNS):
        answer = f"answer-{n}"
        paths = _paths(platform, fake, answer)
        if not retry:
            paths = paths[:1]  # before: one attempt on the first path, no alternate
        job = chain.deliver([paths], DeliveryTarget(platform, "chat", f"run-{n}", "owner"))
        while not job.done.is_set():
            when = scheduler.due.pop(0)
            clock.advance(max(0.0, when - clock.now()))
        unknown += int(job.uncertain)
        if job.state == "delivered" and job.latency is not None:
            latencies.append(job.latency)
            if job.retried:
                retried.append(job.latency)
    shown = sum(1 for n in range(RUNS) if fake.shown.get(f"answer-{n}", 0) > 0)
    duplicates = sum(1 for count in fake.shown.values() if count > 1)
    return Result(shown, duplicates, unknown, latencies, retried)


def main() -> None:
    import logging

    logging.getLogger("channelkit").setLevel(logging.CRITICAL)  # the losses are counted
    print(f"{RUNS} final answers per platform, {FAULT_RATE:.0%} transient faults per call")
    header = (
        f"{'platform':<10} {'mode':<9} {'shown %':>8} {'dupes':>6} {'unknown':>8} "
        f"{'p50 s':>6} {'p99 s':>6} {'p99 retried s':>14}"
    )
    print(header)
    for platform in ("telegram", "weixin", "feishu", "dingtalk"):
        for mode, retry in (("no-retry", False), ("chain", True)):
            r = measure(platform, retry=retry)
            print(
                f"{platform:<10} {mode:<9} {100.0 * r.shown / RUNS:>8.1f} {r.duplicates:>6} "
                f"{r.unknown:>8} {_percentile(r.latencies, 0.5):>6.2f} "
                f"{_percentile(r.latencies, 0.99):>6.2f} "
                f"{_percentile(r.retried_latencies, 0.99):>14.2f}"
            )


if __name__ == "__main__":
    main()

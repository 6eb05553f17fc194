"""The Discord emulator's per-route rate-limit buckets: every answer carries the
``X-RateLimit-*`` headers, a request over the limit is a 429 with ``retry_after``, and
channelkit's REST rate limiter paces a burst of edits to the bucket (never a 429) and
honours a 429 the emulator forces (sent again after ``retry_after`` on the FakeClock)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from channelkit.platforms.discord.ratelimit import DiscordRateLimiter
from channelkit.playground.discord import GROUP_CHANNEL, DiscordEmulator
from channelkit.playground.server import LocalServer
from channelkit.runtime.clock import FakeClock
from channelkit.runtime.pool import WorkerPool
from channelkit.runtime.scheduler import Scheduler

TOKEN = "playground-discord-bot-token"
AUTH = {"Authorization": f"Bot {TOKEN}"}


class Rig:
    def __init__(self) -> None:
        self.clock = FakeClock(wall_start=time.time())
        self.pool = WorkerPool(4, name="test-discord-emu-rl")
        self.scheduler = Scheduler(self.pool, clock=self.clock)
        self.emulator = DiscordEmulator(bot_token=TOKEN, clock=self.clock)
        self.server = LocalServer()
        self.server.start(self.emulator)
        self.session = requests.Session()

    def call(self, method: str, path: str, body: Any = None) -> requests.Response:
        return self.session.request(
            method, f"{self.server.url}/api/v10{path}", json=body, headers=AUTH, timeout=5
        )

    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)
        self.settle()

    def settle(self) -> None:
        for _ in range(20):  # a send finishing pumps its route, which may post more
            assert self.pool.wait_idle(10.0)

    def close(self) -> None:
        self.session.close()
        self.server.stop()
        self.emulator.close()
        self.scheduler.stop(2.0)
        self.pool.shutdown(timeout=2.0)


@pytest.fixture
def rig() -> Iterator[Rig]:
    r = Rig()
    yield r
    r.close()


def test_every_answer_carries_the_bucket_and_one_more_is_a_429(rig: Rig) -> None:
    rig.emulator.set_limit("create_message", 2, 5.0)
    first = rig.call("POST", f"/channels/{GROUP_CHANNEL}/messages", {"content": "one"})
    assert first.status_code == 200
    assert first.headers["X-RateLimit-Limit"] == "2"
    assert first.headers["X-RateLimit-Remaining"] == "1"
    assert float(first.headers["X-RateLimit-Reset-After"]) == pytest.approx(5.0)
    assert float(first.headers["X-RateLimit-Reset"]) == pytest.approx(rig.clock.time() + 5.0)
    bucket = first.headers["X-RateLimit-Bucket"]
    assert rig.call("POST", f"/channels/{GROUP_CHANNEL}/messages", {"content": "two"}).ok
    third = rig.call("POST", f"/channels/{GROUP_CHANNEL}/messages", {"content": "three"})
    assert third.status_code == 429
    assert third.json() == {
        "message": "You are being rate limited.",
        "retry_after": 5.0,
        "global": False,
    }
    assert third.headers["X-RateLimit-Bucket"] == bucket
    assert third.headers["X-RateLimit-Scope"] == "user"
    assert third.headers["Retry-After"] == "5"
    other = rig.call("POST", "/channels/1500000000000000999/messages", {"content": "elsewhere"})
    assert other.status_code == 200  # another channel counts in its own bucket
    rig.clock.advance(5.0)
    assert rig.call("POST", f"/channels/{GROUP_CHANNEL}/messages", {"content": "four"}).ok
    texts = [v["text"] for v in rig.emulator.state()["views"].values()]
    assert texts == ["one", "two", "elsewhere", "four"]  # the refused one left no message


def test_the_rate_limiter_paces_a_burst_of_edits_without_a_429(rig: Rig) -> None:
    rig.emulator.set_limit("edit_message", 5, 5.0)
    message = rig.call("POST", f"/channels/{GROUP_CHANNEL}/messages", {"content": "0"}).json()
    limiter = DiscordRateLimiter(rig.scheduler, rig.pool)
    path = f"/api/v10/channels/{GROUP_CHANNEL}/messages/{message['id']}"
    futures = [
        limiter.submit(
            "PATCH",
            path,
            lambda i=i: rig.session.patch(
                f"{rig.server.url}{path}", json={"content": str(i)}, headers=AUTH, timeout=5
            ),
        )
        for i in range(1, 51)
    ]
    rig.settle()
    windows = 0
    while not all(f.done() for f in futures):
        windows += 1
        assert windows <= 12, "the edits did not go out at the bucket's pace"
        rig.advance(5.0)
    assert [f.result(timeout=1).status_code for f in futures] == [200] * 50
    assert rig.emulator.buckets.counts["throttled"] == 0
    assert 9 <= windows <= 11  # 5 edits a window: 50 edits take 10 windows
    view = rig.emulator.view(message["id"])
    assert view is not None and view["updates"] == 50
    # every edit arrived once (those of one window go out together, in any order)
    edits = [c["body"]["content"] for c in rig.emulator.calls(method="PATCH")]
    assert sorted(edits, key=int) == [str(i) for i in range(1, 51)]
    limiter.close()


def test_a_429_the_emulator_forces_is_sent_again_after_retry_after(rig: Rig) -> None:
    limiter = DiscordRateLimiter(rig.scheduler, rig.pool)
    rig.emulator.force_429("create_message", count=1, retry_after=2.5)
    path = f"/api/v10/channels/{GROUP_CHANNEL}/messages"
    future = limiter.submit(
        "POST",
        path,
        lambda: rig.session.post(
            f"{rig.server.url}{path}", json={"content": "hello"}, headers=AUTH, timeout=5
        ),
    )
    rig.settle()
    calls = rig.emulator.calls()
    assert [c["status"] for c in calls] == [429]
    assert not future.done()
    rig.advance(2.4)
    assert len(rig.emulator.calls()) == 1  # not before retry_after
    rig.advance(0.1)
    assert future.result(timeout=5).status_code == 200
    assert [c["status"] for c in rig.emulator.calls()] == [429, 200]
    assert limiter.counts["throttled"] == 1
    assert [v["text"] for v in rig.emulator.state()["views"].values()] == ["hello"]
    limiter.close()


def test_a_wrong_token_is_401_and_an_empty_message_is_50006(rig: Rig) -> None:
    wrong = requests.post(
        f"{rig.server.url}/api/v10/channels/{GROUP_CHANNEL}/messages",
        json={"content": "x"},
        headers={"Authorization": "Bot nope"},
        timeout=5,
    )
    assert wrong.status_code == 401 and wrong.json()["code"] == 0
    empty = rig.call("POST", f"/channels/{GROUP_CHANNEL}/messages", {"content": ""})
    assert empty.status_code == 400 and empty.json()["code"] == 50006
    long = rig.call("POST", f"/channels/{GROUP_CHANNEL}/messages", {"content": "x" * 2001})
    assert long.status_code == 400 and "content" in long.json()["errors"]
    unknown = rig.call("PATCH", f"/channels/{GROUP_CHANNEL}/messages/123", {"content": "y"})
    assert unknown.status_code == 404 and unknown.json()["code"] == 10008

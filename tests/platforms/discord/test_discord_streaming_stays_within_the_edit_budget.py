"""Discord streaming under rate limits: 1,000 chunks a second for 10 s make at most
ceil(T / edit interval) + 3 writes of the segment's message and never run into the
channel bucket's 429; a 429 Discord answers anyway is waited out on the fake clock and
the edit is sent again, nothing dropped."""

from __future__ import annotations

import math
import re
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import requests_mock as rm
from channelkit.core import ChannelPromptOwner, OutputSegmentContext, SessionTarget
from channelkit.testing import ScriptedBridge, wait_until

from tests.platforms.discord.discord_env import DM, OWNER, Env

WINDOW, LIMIT = 5.0, 5  # Discord's message bucket: about 5 writes per 5 s per channel
SLOW_DOWN = "You are being rate limited."


class ChannelBucket:
    """Discord's side: `LIMIT` message writes per `WINDOW` seconds of fake time per
    channel, with the rate-limit headers; one more is a 429."""

    def __init__(self, env: Env) -> None:
        self.env = env
        self.lock = threading.Lock()
        self.windows: dict[str, tuple[float, int]] = {}
        self.throttled = 0
        self.forced: list[float] = []  # retry_after of the next answers: forced 429s

    def __call__(self, request: Any, context: Any, answer: Any) -> Any:
        channel = re.search(r"/channels/(\d+)/", request.path)
        assert channel is not None
        now = self.env.rt.clock.now()
        with self.lock:
            if self.forced:
                context.status_code = 429
                return {"message": SLOW_DOWN, "retry_after": self.forced.pop(0), "global": False}
            start, used = self.windows.get(channel.group(1), (now, 0))
            if now >= start + WINDOW:
                start, used = now, 0
            if used >= LIMIT:
                self.throttled += 1
                context.status_code = 429
                wait = start + WINDOW - now
                return {"message": SLOW_DOWN, "retry_after": wait, "global": False}
            used += 1
            self.windows[channel.group(1)] = (start, used)
            context.headers.update(
                {
                    "X-RateLimit-Bucket": "messages",
                    "X-RateLimit-Limit": str(LIMIT),
                    "X-RateLimit-Remaining": str(LIMIT - used),
                    "X-RateLimit-Reset-After": f"{start + WINDOW - now:.3f}",
                }
            )
        return answer(request, context)


@pytest.fixture
def mocker() -> Iterator[rm.Mocker]:
    with rm.Mocker() as m:
        yield m


def _limited(env: Env) -> ChannelBucket:
    bucket = ChannelBucket(env)
    ids = iter(range(7_000_000_000_000_000_001, 8_000_000_000_000_000_000))
    lock = threading.Lock()

    def created(request: Any, context: Any) -> dict[str, Any]:
        with lock:
            return {"id": str(next(ids)), "channel_id": DM}

    def edited(request: Any, context: Any) -> dict[str, Any]:
        return {"id": request.path.rsplit("/", 1)[1], "channel_id": DM}

    env.mock.post(
        re.compile(r".*/channels/\d+/messages$"),
        json=lambda r, c: bucket(r, c, created),
    )
    env.mock.patch(
        re.compile(r".*/channels/\d+/messages/\d+$"),
        json=lambda r, c: bucket(r, c, edited),
    )
    return bucket


def _segment() -> OutputSegmentContext:
    return OutputSegmentContext(
        channel_name="discord",
        session_id="s-1",
        run_id="r-1",
        segment_id="seg-1",
        owner=ChannelPromptOwner(OWNER),
        target=SessionTarget("discord", OWNER, DM),
    )


def _advance(env: Env, seconds: float) -> None:
    """Move fake time; wait until the hook pool is idle, or its only work is an edit
    waiting for the channel bucket to reset (which only fake time can bring)."""
    env.rt.clock.advance(seconds)
    limiter = env.channel.api.limiter

    def waiting_for_the_bucket() -> bool:
        _, remaining, reset = limiter.bucket_of("PATCH", f"/channels/{DM}/messages/70000000001")
        return limiter.waiting() > 0 and remaining == 0 and reset > 0

    wait_until(
        lambda: env.rt.pool.wait_idle(0.01) or waiting_for_the_bucket(),
        what="the due work",
    )


def _writes(env: Env) -> list[tuple[str, str]]:
    return [
        (method, path)
        for method, path, _ in env.calls()
        if re.search(r"/channels/\d+/messages(/\d+)?$", path)
    ]


def test_a_thousand_chunks_a_second_stay_within_the_budget(rt, mocker) -> None:  # type: ignore[no-untyped-def]
    env = Env(rt, mocker, ScriptedBridge([]))
    bucket = _limited(env)
    output, segment = env.channel.output, _segment()
    seconds, interval = 10, env.channel.discord_config.edit_interval_s
    for _ in range(seconds * 10):  # 100 chunks every 0.1 s of fake time
        for n in range(100):
            output.append(segment, "abcdefghij"[n % 10])
        _advance(env, 0.1)
    closing = threading.Thread(target=output.close_segment, args=(segment, "completed"))
    closing.start()
    deadline = time.monotonic() + 30.0
    # the end and the overflow messages wait for the bucket too: move time until done
    while closing.is_alive() or not env.rt.pool.wait_idle(0.01):
        assert time.monotonic() < deadline, "the segment never ended"
        _advance(env, 0.5)
    closing.join(5.0)
    rt.settle()
    message_id = env.edits()[0][0]
    streamed = [b for mid, b in env.edits() if mid == message_id]
    # the first post, the coalesced edits, the final edit: within the budget
    assert 1 + len(streamed) <= math.ceil(seconds / interval) + 3
    assert bucket.throttled == 0  # the limiter waited out the bucket: never a 429
    assert streamed[-1]["components"] == []  # the Stop button is gone at the end
    # the 10,000 characters: the message shows the first 2,000, the rest follow
    shown = streamed[-1]["content"] + "".join(p["content"] for p in env.posts(DM)[1:])
    assert shown == "abcdefghij" * 1_000
    env.channel.close(2.0)


def test_a_429_is_waited_out_and_the_edit_is_sent_again(rt, mocker) -> None:  # type: ignore[no-untyped-def]
    env = Env(rt, mocker, ScriptedBridge([]))
    bucket = _limited(env)
    output, segment = env.channel.output, _segment()
    output.append(segment, "first")
    wait_until(lambda: env.posts(DM), what="the message")
    bucket.forced.append(2.0)
    output.append(segment, " second")
    _advance(env, 1.0)  # the edit is due and answered 429 with retry_after 2 s
    wait_until(lambda: env.channel.api.limiter.counts.get("throttled"), what="the 429")
    assert len(env.edits()) == 1  # the throttled attempt only
    _advance(env, 1.0)
    assert len(env.edits()) == 1  # retry_after is 2 s: not yet
    _advance(env, 1.0)  # the pause is over: the same edit goes again
    wait_until(lambda: len(env.edits()) == 2, what="the edit sent again")
    assert env.edits()[-1][1]["content"] == "first second"
    output.close_segment(segment, "completed")
    rt.settle()
    env.channel.close(2.0)

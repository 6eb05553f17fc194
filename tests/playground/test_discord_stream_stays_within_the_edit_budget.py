"""Discord: a fast answer streams within the edit budget and never meets a 429.

A real DiscordChannel on the Discord emulator (Gateway + REST over 127.0.0.1) on a
FakeClock: the agent says 1,000 chunks a second for 10 s of fake time. Every 10 chunks it
lets the channel's pool go idle and moves the clock 10 ms, so each REST call the emulator
records is stamped with the fake time it went out at.

* each message (a visible output segment, or its continuation past 2,000 characters) is
  written at most ``ceil(T / budget) + 3`` times, ``T`` its life from the first post to
  the last edit and ``budget`` the channel's edit interval;
* the emulator's per-channel buckets never answer 429, and the messages show exactly the
  answer;
* a 429 the emulator forces on an edit is honoured: the edit goes out again no sooner
  than its ``retry_after``, and the answer still arrives whole.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterator
from itertools import cycle
from typing import Any

import pytest
from channelkit.agents.function import FunctionAgent
from channelkit.playground import Playground
from channelkit.playground.discord import DM_CHANNEL
from channelkit.runtime.clock import FakeClock

LONG = 60.0  # real seconds any wait may take on a loaded machine
SECONDS = 10.0
TICK_S = 0.01
TICK_CHUNKS = 10  # 1,000 chunks a second
LETTERS = "abcdefghijklmnopqrstuvwxyz"
RETRY_S = 1.5  # the forced 429's retry_after
MESSAGES = f"/api/v10/channels/{DM_CHANNEL}/messages"


class Recorder:
    """The emulator's recorded calls, each with the fake time it went out at."""

    def __init__(self, pg: Playground, clock: FakeClock) -> None:
        self.pg, self.clock = pg, clock
        self.seen = 0
        self.lock = threading.Lock()
        self.calls: list[tuple[float, dict[str, Any]]] = []

    def idle_and_record(self) -> None:
        """Record the calls made so far, once the channel's pool is idle or waits for the
        fake time to move (a request queued on the rate limiter: after a 429, its
        ``retry_after``)."""
        pool = self.pg.channel.pool
        limiter = self.pg.channel.api.limiter
        # once a 429 came, the edit it hit waits for its retry_after on the fake clock (a
        # busy pool no real time changes): probe briefly. A call still in flight is then
        # recorded at a later step, which only lengthens the measured wait after the 429
        probe = 0.005 if limiter.counts.get("throttled") else 0.05
        if not pool.wait_idle(probe) and limiter.waiting() == 0:
            assert pool.wait_idle(LONG), "the channel's pool never went idle"
        now = self.clock.now()
        with self.lock:
            for call in self.pg.emulator.calls():
                if call["seq"] > self.seen:
                    self.seen = call["seq"]
                    self.calls.append((now, call))

    def writes(self) -> dict[str, list[tuple[float, int, str]]]:
        """message id -> [(fake time, status, content)] of its post and edits."""
        out: dict[str, list[tuple[float, int, str]]] = {}
        with self.lock:
            for at, call in self.calls:
                path, status = call["path"], call["status"]
                body = call.get("body") or {}
                if call["method"] == "POST" and path == MESSAGES and status == 200:
                    key = str(call["response"]["id"])
                elif call["method"] == "PATCH" and path.startswith(MESSAGES + "/"):
                    key = path.rsplit("/", 1)[1]
                else:
                    continue
                out.setdefault(key, []).append((at, status, str(body.get("content", ""))))
        return out


def stream(
    force_429: float | None = None, seconds: float = SECONDS
) -> Iterator[tuple[Playground, Recorder, str]]:
    clock = FakeClock(start=time.monotonic(), wall_start=time.time())
    letters = cycle(LETTERS)
    said: list[str] = []
    holder: dict[str, Any] = {}

    def answer(turn: Any) -> str:
        recorder: Recorder = holder["recorder"]
        for n in range(round(seconds / TICK_S) * TICK_CHUNKS):
            chunk = next(letters) + ("\n" if n % 70 == 69 else "")
            said.append(chunk)
            turn.say(chunk)
            if n % TICK_CHUNKS == TICK_CHUNKS - 1:
                recorder.idle_and_record()
                clock.advance(TICK_S)
                if force_429 is not None and n // TICK_CHUNKS == round(force_429 / TICK_S):
                    holder["pg"].emulator.force_429("edit_message", 1, retry_after=RETRY_S)
                recorder.idle_and_record()
        holder["done"] = True
        return ""

    agent = FunctionAgent(answer, name="fast")
    try:
        with Playground(platform="discord", agent=agent, clock=clock) as pg:
            recorder = Recorder(pg, clock)
            holder["pg"], holder["recorder"] = pg, recorder
            assert pg.emulator.gateway.wait_identified(LONG)
            _, result = pg.emulator.send_user_message("write fast")
            assert result.status == 200
            deadline = time.monotonic() + 4 * LONG
            while "done" not in holder:
                assert time.monotonic() < deadline, "the agent never finished"
                time.sleep(0.05)
            # the last edits and posts (paced by the interval and the buckets: the clock
            # has to move), until the chat shows the answer or 200 s of fake time passed
            for _ in range(2_000):
                recorder.idle_and_record()
                if shown(pg) == "".join(said).replace("\n", ""):
                    break
                clock.advance(0.1)
            yield pg, recorder, "".join(said)
    finally:
        agent.close()


def shown(pg: Playground) -> str:
    """The bot's messages, joined, without line breaks (a message may end at one)."""
    views = pg.emulator.state()["views"].values()
    return "".join(v["text"] for v in views if not v["ephemeral"]).replace("\n", "")


@pytest.fixture(scope="module")
def steady() -> Iterator[tuple[Playground, Recorder, str]]:
    yield from stream()


def test_each_message_is_written_within_the_edit_budget(
    steady: tuple[Playground, Recorder, str],
) -> None:
    pg, recorder, _ = steady
    budget = pg.channel.discord_config.edit_interval_s
    writes = recorder.writes()
    assert len(writes) >= 2  # 10,000+ characters: several messages of 2,000
    for message_id, done in writes.items():
        life = done[-1][0] - done[0][0]
        assert len(done) <= math.ceil(life / budget) + 3, (message_id, life, len(done))


def test_no_429_and_the_messages_show_exactly_the_answer(
    steady: tuple[Playground, Recorder, str],
) -> None:
    pg, recorder, answer = steady
    statuses = [call["status"] for _, call in recorder.calls]
    assert 429 not in statuses
    assert pg.emulator.buckets.counts["throttled"] == 0
    assert shown(pg) == answer.replace("\n", "")
    assert not any("ck:stop:" in str(v["keyboard"]) for v in pg.emulator.state()["views"].values())


def test_a_forced_429_is_waited_out_and_nothing_is_lost() -> None:
    for pg, recorder, answer in stream(force_429=1.0, seconds=3.0):
        throttled = [(at, call) for at, call in recorder.calls if call["status"] == 429]
        assert len(throttled) == 1
        at, call = throttled[0]
        later = [
            t
            for t, c in recorder.calls
            if c["path"] == call["path"] and c["method"] == "PATCH" and t > at
        ]
        assert later and later[0] - at >= RETRY_S - 1e-6
        assert shown(pg) == answer.replace("\n", "")

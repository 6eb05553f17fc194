"""Slack: a long, fast answer streams live to its end, spaced, and ends without a burst.

Over the Slack emulator (real HTTP) on a FakeClock: the agent says 4,000 chunks of 10
characters at 1,000 chunks a second (40,000 characters over 4 s of fake time). Every
10 chunks the agent lets the channel's pool go idle and moves the clock 10 ms, so each
Web API call the emulator records is stamped with the fake time it went out at.

* updates keep coming for the whole answer: no gap between two streaming calls is
  longer than the interval (plus one tick), and the last live update shows all but the
  last interval's worth of text;
* the calls of the stream are spaced by at least the interval, which honours Slack's
  Tier 4 budget for ``chat.appendStream`` (100 calls a minute) and no call carries more
  than 12,000 characters of ``markdown_text``;
* the end is one bounded call sequence: at most two calls in the same instant;
* the stream shows exactly the answer.
"""

from __future__ import annotations

import threading
from itertools import pairwise
from typing import Any

import pytest
from channelkit.agents.function import FunctionAgent
from channelkit.core import ChannelPromptOwner, OutputSegmentContext, SessionTarget
from channelkit.errors import ApiError
from channelkit.platforms.slack import output
from channelkit.platforms.slack.output import SegmentStreams

from tests.platforms.slack.slack_emulator import LONG, SlackRig

#: Slack's documented limits: ``markdown_text`` up to 12,000 characters a call, and
#: ``chat.appendStream`` is a Tier 4 method (100 calls a minute)
MAX_MARKDOWN = 12_000
APPEND_STREAM_CALLS_PER_MINUTE = 100
MIN_STREAM_INTERVAL = 60.0 / APPEND_STREAM_CALLS_PER_MINUTE
CHUNKS = 4_000
CHUNK_CHARS = 10
TICK_CHUNKS = 10  # 10 chunks at 1,000 a second: 10 ms of fake time
TICK_S = 0.01
STREAM_PATHS = ("/chat.startStream", "/chat.appendStream", "/chat.stopStream")
#: the longest the end may put in one instant: the last update and the stop
MAX_CALLS_AT_ONCE = 2


def _chunk(n: int) -> str:
    return f"{n:08d},\n" if n % 8 == 7 else f"{n:08d}, "


ANSWER = "".join(_chunk(n) for n in range(CHUNKS))
assert len(ANSWER) == CHUNKS * CHUNK_CHARS
#: a last piece far longer than one call carries, said at once (the agent's return value)
LAST = "".join(f"tail {n:05d}\n" for n in range(2_500))  # 27,500 characters


class Timeline:
    """The emulator's recorded Web API calls, each with the fake time it went out at."""

    def __init__(self, rig: SlackRig) -> None:
        self.rig = rig
        self.seen = 0
        self.calls: list[tuple[float, dict[str, Any]]] = []
        self.lock = threading.Lock()

    def idle_and_record(self) -> None:
        assert self.rig.channel.pool.wait_idle(LONG), "the channel's pool never went idle"
        now = self.rig.clock.now()
        with self.lock:
            for call in self.rig.emulator.calls():
                if call["seq"] > self.seen:
                    self.seen = call["seq"]
                    self.calls.append((now, call))

    def stream(self) -> list[tuple[float, str, dict[str, Any]]]:
        with self.lock:
            return [(at, c["path"], c["body"]) for at, c in self.calls if c["path"] in STREAM_PATHS]


@pytest.fixture(scope="module", params=["steady", "long last chunk"])
def streamed(request: pytest.FixtureRequest) -> tuple[Timeline, float, float, str]:
    """Runs the answer (``long last chunk``: the agent then returns 27,500 more
    characters, said in one chunk); returns the timeline, the fake time the run started,
    the fake time the agent returned and the whole answer."""
    last = LAST if request.param == "long last chunk" else ""
    holder: dict[str, Any] = {}

    def answer(turn: Any) -> str:
        timeline: Timeline = holder["timeline"]
        clock = holder["rig"].clock
        holder["start"] = clock.now()
        for n in range(CHUNKS):
            turn.say(_chunk(n))
            if n % TICK_CHUNKS == TICK_CHUNKS - 1:
                timeline.idle_and_record()
                clock.advance(TICK_S)
                timeline.idle_and_record()
        holder["end"] = clock.now()
        return last  # said as the final chunk

    agent = FunctionAgent(answer, name="fast")
    try:
        with SlackRig.start(agent) as rig:
            timeline = Timeline(rig)
            holder["rig"], holder["timeline"] = rig, timeline
            rig.send("write a long answer")
            rig.wait(lambda: "end" in holder, "the agent to finish", timeout=120)
            # the end of the stream (a paced end needs the clock to move)
            for _ in range(1_000):
                assert rig.channel.wait_idle(LONG)
                timeline.idle_and_record()
                if any(path == "/chat.stopStream" for _, path, _ in timeline.stream()):
                    break
                rig.clock.advance(TICK_S)
            return timeline, holder["start"], holder["end"], ANSWER + last
    finally:
        agent.close()


def test_updates_keep_coming_for_the_whole_answer(
    streamed: tuple[Timeline, float, float, str],
) -> None:
    timeline, start, end, _ = streamed
    calls = timeline.stream()
    live = [(at, body) for at, path, body in calls if path != "/chat.stopStream"]
    times = [start] + [at for at, _ in live]
    gaps = [b - a for a, b in pairwise(times)]
    assert max(gaps) <= MIN_STREAM_INTERVAL + TICK_S + 1e-6, gaps
    # the last live update came within one interval (and a tick) of the answer's end
    last_live = max(at for at, _ in live if at <= end)
    assert last_live >= end - MIN_STREAM_INTERVAL - TICK_S - 1e-6, (last_live, end)
    shown_live = sum(len(body.get("markdown_text") or "") for at, body in live if at <= end)
    produced_per_interval = MIN_STREAM_INTERVAL / TICK_S * TICK_CHUNKS * CHUNK_CHARS
    assert shown_live >= len(ANSWER) - 2 * produced_per_interval, shown_live


def test_calls_are_spaced_and_the_end_is_no_burst(
    streamed: tuple[Timeline, float, float, str],
) -> None:
    timeline, _, _, _ = streamed
    calls = timeline.stream()
    assert [path for _, path, _ in calls].count("/chat.startStream") == 1
    assert calls[-1][1] == "/chat.stopStream"
    assert all(len(body.get("markdown_text") or "") <= MAX_MARKDOWN for _, _, body in calls)
    # every call at least the interval after the one before, but the stop, which may
    # follow the last update at once
    for (before, _, _), (after, path, _) in pairwise(calls):
        if path != "/chat.stopStream":
            assert after - before >= MIN_STREAM_INTERVAL - 1e-6, (before, after, path)
    instants: dict[float, int] = {}
    for at, _, _ in calls:
        instants[round(at, 6)] = instants.get(round(at, 6), 0) + 1
    assert max(instants.values()) <= MAX_CALLS_AT_ONCE, instants
    # and within Slack's Tier 4 budget for one stream
    span = calls[-1][0] - calls[0][0]
    assert len(calls) - 1 <= span / 60.0 * APPEND_STREAM_CALLS_PER_MINUTE + 1


def test_the_stream_shows_exactly_the_answer(streamed: tuple[Timeline, float, float, str]) -> None:
    timeline, _, _, answer = streamed
    shown = "".join(body.get("markdown_text") or "" for _, _, body in timeline.stream())
    assert shown == answer


def test_the_channel_encodes_slacks_documented_limits() -> None:
    assert output.MAX_MARKDOWN == MAX_MARKDOWN
    assert getattr(output, "MIN_STREAM_INTERVAL", None) == MIN_STREAM_INTERVAL


class _StreamApi:
    """Records streaming calls; ``fail_append`` makes that appendStream call raise."""

    def __init__(self, fail_append: int | None = None) -> None:
        self.calls: list[tuple[str, str | None]] = []
        self.appends = 0
        self.fail_append = fail_append

    def start_stream(self, channel: str, anchor: Any, text: str, recipient: Any) -> str:
        self.calls.append(("start", text))
        return "1.0"

    def append_stream(self, channel: str, ts: str, text: str) -> None:
        self.appends += 1
        if self.appends == self.fail_append:
            raise ApiError("boom", status=500)
        self.calls.append(("append", text))

    def stop_stream(self, channel: str, ts: str, text: str | None) -> None:
        self.calls.append(("stop", text))

    def post(self, *args: Any) -> str:
        return "2.0"

    def update(self, *args: Any) -> None:
        pass


def _segment() -> OutputSegmentContext:
    target = SessionTarget("slack", "U1", "D1", None, False)
    return OutputSegmentContext(
        "slack", "s1", "r1", "seg1", ChannelPromptOwner("U1"), target, message_id="1.1"
    )


def _streams(rt: Any, api: _StreamApi, unseen: list[str]) -> SegmentStreams:
    return SegmentStreams(
        api,  # type: ignore[arg-type]
        clock=rt.clock,
        scheduler=rt.scheduler,
        submit=lambda key, fn: rt.serial.submit(key, fn),
        on_unseen=lambda segment, text: unseen.append(text),
    )


def test_a_paced_end_is_spaced_on_the_clock_and_a_failure_hands_the_rest_on(rt: Any) -> None:
    api, unseen = _StreamApi(fail_append=2), []
    streams, segment = _streams(rt, api, unseen), _segment()
    streams.append(segment, "hello ")
    rt.settle()
    assert api.calls == [("start", "hello ")]
    assert streams.finish_run(segment, "hello " + LAST) == ""  # the stream will carry it
    rt.settle()
    assert api.calls == [("start", "hello ")]  # nothing at once: the interval first
    rt.advance(MIN_STREAM_INTERVAL)
    assert api.calls[-1] == ("append", LAST[:MAX_MARKDOWN])
    rt.advance(MIN_STREAM_INTERVAL / 2)
    assert len(api.calls) == 2 and unseen == []  # spaced: nothing before the interval
    rt.advance(MIN_STREAM_INTERVAL / 2 + 0.001)  # the second piece fails ...
    assert unseen == [LAST[MAX_MARKDOWN:]]  # ... and it and the rest are handed on
    rt.advance(10 * MIN_STREAM_INTERVAL)
    assert len(api.calls) == 2  # nothing more is tried
    streams.close()


def test_close_sends_a_paced_end_that_is_still_waiting(rt: Any) -> None:
    api, unseen = _StreamApi(), []
    streams, segment = _streams(rt, api, unseen), _segment()
    streams.append(segment, "hello ")
    rt.settle()
    streams.finish_run(segment, "hello " + LAST)
    streams.close()
    shown = "".join(text or "" for _, text in api.calls)
    assert shown == "hello " + LAST and api.calls[-1][0] == "stop"
    rt.advance(10 * MIN_STREAM_INTERVAL)  # the timers find nothing left to send
    assert "".join(text or "" for _, text in api.calls) == "hello " + LAST
    assert unseen == []

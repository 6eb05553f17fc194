"""Slack output: one stream per visible segment, coalesced, with a fallback and Stop."""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import requests_mock as rm
from channelkit.core import ChannelPromptOwner, OutputSegmentContext, SessionTarget
from channelkit.platforms.slack.output import STOP_ACTION, SegmentStreams
from channelkit.testing import ScriptedBridge, boundary, chunk, final, gate, wait_until

from tests.platforms.slack.slack_env import (
    DM,
    OWNER,
    STRANGER,
    STREAM_CALLS,
    Env,
    called,
    mock_web_api,
)


def streamed_text(env: Env) -> str:
    """Everything the streaming calls wrote, in order."""
    return "".join(body.get("markdown_text", "") for _, body in env.calls(*STREAM_CALLS))


@pytest.fixture
def mocker() -> Iterator[rm.Mocker]:
    with rm.Mocker() as m:
        yield m


def test_text_streams_into_one_message_and_the_final_answer_ends_it(rt, mocker) -> None:  # type: ignore[no-untyped-def]
    mock_web_api(mocker)
    script = [chunk("Hello "), called(mocker, "chat.startStream"), chunk("world")]
    env = Env(rt, mocker, ScriptedBridge(script))
    env.message("hi")
    env.settle()
    names = [name for name, _ in env.calls(*STREAM_CALLS)]
    assert names[0] == "chat.startstream" and names[-1] == "chat.stopstream"
    assert names.count("chat.startstream") == 1 and names.count("chat.stopstream") == 1
    assert streamed_text(env) == "Hello world"
    start = env.bodies("chat.startStream")[0]
    assert start["channel"] == DM and "recipient_user_id" not in start  # a DM
    # No message repeats the answer; the Stop button's message ends as "Done.".
    posts = env.bodies("chat.postMessage")
    assert [p["text"] for p in posts] == ["Working…"]
    assert posts[0]["blocks"][-1]["elements"][0]["action_id"] == STOP_ACTION
    assert env.bodies("chat.update")[-1]["text"] == "Done."
    env.channel.close(2.0)


def test_a_boundary_closes_the_stream_and_later_text_is_shown_once(rt, mocker) -> None:  # type: ignore[no-untyped-def]
    mock_web_api(mocker)
    env = Env(
        rt,
        mocker,
        ScriptedBridge(
            [chunk("first"), called(mocker, "chat.startStream"), boundary(), chunk("second")]
        ),
    )
    env.message("hi")
    env.settle()
    names = [name for name, _ in env.calls()]
    # The first segment's stream is stopped before anything of the second is shown.
    assert names.index("chat.stopstream") < max(
        i for i, (name, body) in enumerate(env.calls()) if "second" in str(body)
    )
    streamed = streamed_text(env)
    posted = "".join(p["text"] for p in env.bodies("chat.postMessage") if p["text"] != "Working…")
    assert streamed.startswith("first")
    assert (streamed + posted).count("second") == 1 and (streamed + posted).count("first") == 1
    env.channel.close(2.0)


def test_refused_streaming_falls_back_to_post_and_update(rt, mocker) -> None:  # type: ignore[no-untyped-def]
    mock_web_api(mocker, refuse=("chat.startStream",))
    script = [chunk("Hello "), called(mocker, "chat.postMessage"), chunk("world")]
    env = Env(rt, mocker, ScriptedBridge(script))
    env.message("hi")
    env.settle()
    assert len(env.bodies("chat.startStream")) == 1
    assert env.bodies("chat.appendStream") == [] and env.bodies("chat.stopStream") == []
    posts = env.bodies("chat.postMessage")
    assert len(posts) == 1 and posts[0]["blocks"][-1]["elements"][0]["action_id"] == STOP_ACTION
    last = env.bodies("chat.update")[-1]
    assert last["text"] == "Hello world" and last["ts"] == "1700000000.000001"
    assert all(b["type"] != "actions" for b in last["blocks"])  # the button is gone
    assert env.channel.streams.streaming_available is False
    env.channel.close(2.0)


def test_a_final_answer_longer_than_what_streamed_is_completed_in_the_stream(rt, mocker) -> None:  # type: ignore[no-untyped-def]
    mock_web_api(mocker)
    env = Env(
        rt,
        mocker,
        ScriptedBridge(
            [chunk("Hello"), called(mocker, "chat.startStream"), final("Hello, and more")]
        ),
    )
    env.message("hi")
    env.settle()
    assert streamed_text(env) == "Hello, and more"
    assert [p["text"] for p in env.bodies("chat.postMessage")] == ["Working…"]
    env.channel.close(2.0)


def _stop_value(env: Env, channel: str) -> tuple[str, str]:
    """The Stop button's segment id and the control message ts in ``channel``."""
    for request in env.mock.request_history:
        if request.path.endswith("/chat.postmessage"):
            body = request.json()
            if body["channel"] == channel and body["text"] == "Working…":
                button = body["blocks"][-1]["elements"][0]
                return button["value"], body["channel"]
    raise AssertionError("no Stop button")


def test_stop_by_the_owner_cancels_exactly_that_run_and_a_stranger_gets_one_notice(
    rt, mocker
) -> None:  # type: ignore[no-untyped-def]
    mock_web_api(mocker)
    release = threading.Event()
    bridge = ScriptedBridge([chunk("working on it"), gate(release, timeout=30.0)])
    env = Env(rt, mocker, bridge)
    try:
        env.message("first", user=OWNER, channel=DM)
        env.message("second", user="U0SECOND", channel="D0TWO")
        wait_until(lambda: len(env.bodies("chat.startStream")) == 2, what="two streams")
        wait_until(
            lambda: len([p for p in env.bodies("chat.postMessage") if p["text"] == "Working…"])
            == 2,
            what="two Stop buttons",
        )
        segment_id, _ = _stop_value(env, DM)
        # A stranger taps twice: one ephemeral notice, nothing cancelled.
        env.click(STOP_ACTION, segment_id, user=STRANGER)
        env.click(STOP_ACTION, segment_id, user=STRANGER)
        wait_until(lambda: len(env.bodies("chat.postEphemeral")) == 1, what="one notice")
        notice = env.bodies("chat.postEphemeral")[0]
        assert notice["user"] == STRANGER and notice["channel"] == DM
        assert bridge.cancels == []
        # The owner's tap cancels exactly the first run.
        env.click(STOP_ACTION, segment_id, user=OWNER)
        wait_until(lambda: len(bridge.cancels) == 1, what="one cancel")
        first_session = next(s for s, text in bridge.prompts if text == "first")
        assert bridge.cancels == [first_session]
        wait_until(lambda: len(env.bodies("chat.stopStream")) == 1, what="the stream stopped")
        stop = env.bodies("chat.stopStream")[0]
        assert "Stopped" in stop.get("markdown_text", "")
        assert len(env.bodies("chat.postEphemeral")) == 1
    finally:
        release.set()
        env.settle()
        env.channel.close(2.0)
    assert len(env.bodies("chat.stopStream")) == 2  # the second run finished normally


class _RecordingApi:
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def start_stream(self, *args: Any) -> str:
        self.calls.append(("start", args))
        return "1.0"

    def append_stream(self, *args: Any) -> None:
        self.calls.append(("append", args))

    def stop_stream(self, *args: Any) -> None:
        self.calls.append(("stop", args))

    def post(self, *args: Any) -> str:
        self.calls.append(("post", args))
        return "2.0"

    def update(self, *args: Any) -> None:
        self.calls.append(("update", args))


@pytest.mark.parametrize("seconds", [3, 7])
def test_a_thousand_chunks_a_second_make_a_bounded_number_of_streaming_calls(rt, seconds) -> None:  # type: ignore[no-untyped-def]
    api = _RecordingApi()
    streams = SegmentStreams(
        api,  # type: ignore[arg-type]
        clock=rt.clock,
        scheduler=rt.scheduler,
        submit=lambda key, fn: rt.serial.submit(key, fn),
    )
    target = SessionTarget("slack", OWNER, DM, None, False)
    segment = OutputSegmentContext(
        "slack", "s1", "r1", "seg1", ChannelPromptOwner(OWNER), target, message_id="1.1"
    )
    for ms in range(seconds * 1000):
        streams.append(segment, "x")
        rt.clock.advance(0.001)
        if ms % 100 == 99:
            rt.settle()
    rt.settle()
    streams.end_segment(segment, "completed")
    streaming = [c for c in api.calls if c[0] in ("start", "append", "stop")]
    assert len(streaming) <= math.ceil(seconds / 0.5) + 3
    assert len(streaming) >= seconds  # it did stream along the way
    text = "".join(str(args[2] or "") for name, args in streaming if name != "stop")
    stop_text = streaming[-1][1][2] if len(streaming[-1][1]) > 2 else ""
    assert text + (stop_text or "") == "x" * seconds * 1000

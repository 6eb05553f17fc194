"""Slack: a failed run is told once in the chat, and a failed segment keeps its text.

Three shapes of a failure: before any output (one "Failed, please retry." message), with
the segment's stream open (its Stop message turns into "Failed.", nothing else), and
right after the first text while no message showed it yet (the text is posted, then the
"Failed." marker; no notice on top).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
import requests_mock as rm
from channelkit.core import LifecycleType, OutputSegmentContext
from channelkit.platforms.slack.adapter import TEXT_FAILED
from channelkit.platforms.slack.output import STOP_ACTION
from channelkit.testing import WAIT, ScriptedBridge, chunk, fail, gate, wait_until

from tests.platforms.slack.slack_env import STREAM_CALLS, Env, mock_web_api


@pytest.fixture
def mocker() -> Iterator[rm.Mocker]:
    with rm.Mocker() as m:
        yield m


def posted(env: Env) -> list[str]:
    return [body["text"] for body in env.bodies("chat.postMessage")]


def told(env: Env) -> int:
    """How often the chat says the run failed: notices, "Failed." markers and Stop
    messages updated to "Failed."."""
    updates = [body["text"] for body in env.bodies("chat.update")]
    return sum(1 for t in posted(env) + updates if t in (TEXT_FAILED, "Failed."))


def failed_event(env: Env) -> bool:
    return any(e.type is LifecycleType.FAILED for e in env.channel.events)


def test_a_run_failing_before_any_output_posts_one_failure_notice(rt, mocker) -> None:  # type: ignore[no-untyped-def]
    mock_web_api(mocker)
    env = Env(rt, mocker, ScriptedBridge([fail(RuntimeError("agent process exited"))]))
    env.message("hi")
    env.settle()
    assert failed_event(env)
    assert posted(env) == [TEXT_FAILED]
    assert env.calls(*STREAM_CALLS) == []
    env.channel.close(2.0)


def test_a_failed_open_stream_says_failed_on_its_stop_message_only(rt, mocker) -> None:  # type: ignore[no-untyped-def]
    mock_web_api(mocker)
    shown = threading.Event()
    env = Env(rt, mocker, ScriptedBridge([chunk("partial"), gate(shown), fail(RuntimeError())]))
    env.message("hi")
    wait_until(lambda: posted(env) == ["Working…"], WAIT, what="the stream and its Stop")
    shown.set()
    env.settle()
    assert "".join(b.get("markdown_text", "") for _, b in env.calls(*STREAM_CALLS)) == "partial"
    assert env.bodies("chat.update")[-1]["text"] == "Failed."
    assert posted(env) == ["Working…"]  # no notice on top
    assert told(env) == 1
    env.channel.close(2.0)


def hold_stream_lane(env: Env, release: threading.Event) -> None:
    """The segment's stream lane is busy (an earlier write) when the first text comes, so
    the text is still unshown when the run fails."""
    channel = env.channel
    original = channel.on_response_chunk

    def on_response_chunk(
        chat_id: str, text: str, session_id: str, segment: OutputSegmentContext | None = None
    ) -> None:
        if segment is not None:
            channel.lanes.post(("slack-stream", segment.run_id), release.wait, WAIT)
        original(chat_id, text, session_id, segment)

    channel.on_response_chunk = on_response_chunk  # type: ignore[method-assign]


def test_a_run_failing_before_its_first_text_was_shown_keeps_the_text_marked_failed(
    rt: Any, mocker: rm.Mocker
) -> None:
    mock_web_api(mocker)
    script = [chunk("partial <!channel>"), fail(RuntimeError("agent process exited"))]
    env = Env(rt, mocker, ScriptedBridge(script))
    release = threading.Event()
    hold_stream_lane(env, release)
    env.message("hi")
    wait_until(lambda: failed_event(env), WAIT, what="the failed run")
    wait_until(lambda: len(posted(env)) == 2, WAIT, what="the failed segment")
    release.set()
    env.settle()
    assert env.calls(*STREAM_CALLS) == []  # the held write found the segment closed
    text, marker = env.bodies("chat.postMessage")
    assert text["text"] == "partial &lt;!channel&gt;"  # kept, mass mention escaped
    assert marker["text"] == "Failed." and STOP_ACTION not in str(marker)
    assert text.get("thread_ts") == marker.get("thread_ts")
    assert told(env) == 1  # the marker tells it: no notice on top
    env.channel.close(2.0)

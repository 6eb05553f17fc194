"""Slack assistant threads: the status shows while a run works and is cleared after."""

from __future__ import annotations

import json

import requests_mock as rm
from channelkit.testing import ScriptedBridge, chunk

from tests.platforms.slack.slack_env import DM, OWNER, TEAM, Env, mock_web_api


def _thread_message(env: Env, text: str) -> None:
    event = {
        "type": "message",
        "user": OWNER,
        "text": text,
        "channel": DM,
        "channel_type": "im",
        "ts": "1699999999.000500",
        "thread_ts": "1699999999.000100",
    }
    body = {"type": "event_callback", "team_id": TEAM, "event_id": "EvT1", "event": event}
    env.post(env.request(json.dumps(body).encode()))


def test_a_run_in_an_assistant_thread_sets_then_clears_the_status(rt) -> None:  # type: ignore[no-untyped-def]
    with rm.Mocker() as m:
        mock_web_api(m)
        env = Env(rt, m, ScriptedBridge([chunk("hi")]))
        _thread_message(env, "hello")
        env.settle()
        statuses = [b["status"] for b in env.bodies("assistant.threads.setStatus")]
        assert statuses == ["is thinking...", ""]
        assert {b["thread_ts"] for b in env.bodies("assistant.threads.setStatus")} == {
            "1699999999.000100"
        }
        # the answer goes into the same thread: as a stream, or (a run that ends before
        # its first stream flush, e.g. on a loaded machine) as a posted message
        answers = env.bodies("chat.startStream") or env.bodies("chat.postMessage")
        assert answers and answers[0]["thread_ts"] == "1699999999.000100", answers
        env.channel.close(2.0)


def test_a_refused_status_never_fails_the_run(rt) -> None:  # type: ignore[no-untyped-def]
    with rm.Mocker() as m:
        mock_web_api(m, refuse=("assistant.threads.setStatus",))
        env = Env(rt, m, ScriptedBridge([chunk("hi")]))
        _thread_message(env, "hello")
        env.settle()
        assert [e.type.value for e in env.channel.events][-1] == "completed"
        # the answer still reaches the person: streamed, or (a run that ends before its
        # first stream flush, e.g. on a loaded machine) posted as one message
        shown = "".join(
            b.get("markdown_text", "")
            for method in ("chat.startStream", "chat.appendStream", "chat.stopStream")
            for b in env.bodies(method)
        ) + "".join(b.get("text", "") for b in env.bodies("chat.postMessage"))
        assert "hi" in shown
        env.channel.close(2.0)


def test_a_top_level_direct_message_sets_no_status(rt) -> None:  # type: ignore[no-untyped-def]
    with rm.Mocker() as m:
        mock_web_api(m)
        env = Env(rt, m, ScriptedBridge([chunk("hi")]))
        env.message("hello")
        env.settle()
        assert env.bodies("assistant.threads.setStatus") == []
        env.channel.close(2.0)

"""Slack shows the agent's Markdown as mrkdwn - ``*bold*``, ``<url|text>``, code blocks,
``&<>`` escaped (no mass mention), never a raw ``**`` - in the message updated while a
segment streams (``streaming="update"``, its open bold span closed in the preview) and
in the answer a loop run posts with ``chat.postMessage``. (``chat.startStream`` streams
take ``markdown_text``, which Slack renders itself.)"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import requests_mock as rm
from channelkit.core import SessionTarget
from channelkit.testing import ScriptedBridge, chunk

from tests.platforms.slack.slack_env import DM, Env, called, mock_web_api

FIRST = "# Result\n\n```python\nprint('ok')\n```\n\nThe build is **green and"
REST = " passing**, see [the log](https://ci.example.com/1) <!here>."


@pytest.fixture
def mocker() -> Iterator[rm.Mocker]:
    with rm.Mocker() as m:
        yield m


def _sections(env: Env) -> list[str]:
    return [
        block["text"]["text"]
        for body in env.bodies("chat.postMessage") + env.bodies("chat.update")
        for block in body.get("blocks") or []
        if block.get("type") == "section"
    ]


def test_an_updated_message_shows_mrkdwn_and_its_preview_closes_open_bold(rt, mocker) -> None:  # type: ignore[no-untyped-def]
    mock_web_api(mocker)
    script = [chunk(FIRST), called(mocker, "chat.postMessage"), chunk(REST)]
    env = Env(rt, mocker, ScriptedBridge(script), streaming="update")
    env.message("build status?")
    env.settle()
    sections = _sections(env)
    assert sections and all("**" not in s for s in sections), sections
    final = env.bodies("chat.update")[-1]["blocks"][0]["text"]["text"]
    assert final == (
        "*Result*\n\n```\nprint('ok')\n```\n\nThe build is *green and passing*, see "
        "<https://ci.example.com/1|the log> &lt;!here&gt;."
    )
    env.channel.close(2.0)


def test_a_preview_of_an_open_bold_span_is_closed(rt, mocker) -> None:  # type: ignore[no-untyped-def]
    mock_web_api(mocker)
    script = [chunk(FIRST), called(mocker, "chat.postMessage")]
    env = Env(rt, mocker, ScriptedBridge(script), streaming="update")
    env.message("build status?")
    env.settle()
    assert any(s.endswith("The build is *green and*") for s in _sections(env)), _sections(env)
    env.channel.close(2.0)


def test_a_loop_runs_answer_is_posted_as_mrkdwn(rt, mocker) -> None:  # type: ignore[no-untyped-def]
    mock_web_api(mocker)
    env = Env(rt, mocker, ScriptedBridge([chunk(FIRST), chunk(REST)]))
    env.channel.run_loop_prompt(SessionTarget("slack", "cron", DM), "report").result(timeout=10)
    env.settle()
    posted = [p["text"] for p in env.bodies("chat.postMessage") if "passing" in p["text"]]
    assert posted == [
        "*Result*\n\n```\nprint('ok')\n```\n\nThe build is *green and passing*, see "
        "<https://ci.example.com/1|the log> &lt;!here&gt;."
    ]
    env.channel.close(2.0)

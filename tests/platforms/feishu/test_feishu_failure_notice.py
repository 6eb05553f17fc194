"""A Feishu run that fails is never silent: the person sees the failed label."""

from __future__ import annotations

from typing import Any

import test_feishu_adapter as fa
from channelkit.platforms.feishu.api import FeishuApi
from channelkit.testing import wait_until
from feishu_helpers import FakeFeishu, message_event, request

FAILED_EN = "*Failed, please retry*"


def _run(rt: Any, fake: FakeFeishu, api: FeishuApi, behaviour: Any) -> list[str]:
    script = fa.Script()
    script.behaviour = behaviour
    channel = fa.build(rt, api, script, language="en")
    try:
        channel.handle_event_request(request(message_event("hi")))
        wait_until(lambda: script.calls == 1)
        rt.settle()
        return fa.labels(fake)
    finally:
        channel.close()


def _cannot_start(turn: Any) -> str:
    raise FileNotFoundError("no-such-agent")


def _dies_mid_run(turn: Any) -> str:
    turn.say("Working on it")
    raise RuntimeError("agent process exited")


def test_a_failure_before_output_shows_the_failed_label(
    rt: Any, fake: FakeFeishu, api: FeishuApi
) -> None:
    assert _run(rt, fake, api, _cannot_start) == [FAILED_EN]


def test_an_agent_dying_mid_run_shows_the_failed_label_once(
    rt: Any, fake: FakeFeishu, api: FeishuApi
) -> None:
    assert _run(rt, fake, api, _dies_mid_run) == [FAILED_EN]
    assert [fa.finals(fake)[0][0]] == ["Working on it"]

"""A Weixin run that fails is never silent: the person gets a "Failed" message."""

from __future__ import annotations

from typing import Any

from channelkit.core import LifecycleType
from channelkit.platforms.weixin.adapter import TEXT_FAILED
from channelkit.testing import ScriptedBridge, chunk, fail

from tests.platforms.weixin import test_weixin_adapter as wx

Env = wx.Env
inbound = wx.inbound
mock = wx.mock  # the iLink API on requests-mock (fixture)


class _NoStart:
    """A bridge whose prompt raises at once (the agent process cannot be spawned)."""

    def prompt(self, session_id: str, text: str, sink: Any) -> str:
        raise FileNotFoundError("no-such-agent")

    def cancel_session(self, session_id: str) -> bool:
        return False

    def respond_to_permission(self, request_id: str, response: Any) -> bool:
        return False

    def close(self) -> None:
        pass


def _run(env: wx.Env) -> list[str]:
    env.channel.handle_weixin_message(inbound("hi"))
    env.rt.settle()
    assert env.channel.events[-1].type is LifecycleType.FAILED
    texts = env.texts()
    env.channel.close()
    return texts


def test_an_agent_that_cannot_start_shows_failed(rt, mock) -> None:  # type: ignore[no-untyped-def]
    assert _run(Env(rt, mock, _NoStart())) == [TEXT_FAILED]  # type: ignore[arg-type]


def test_a_failure_before_output_shows_failed(rt, mock) -> None:  # type: ignore[no-untyped-def]
    assert _run(Env(rt, mock, ScriptedBridge([fail(RuntimeError("boom"))]))) == [TEXT_FAILED]


def test_an_agent_dying_mid_run_shows_failed(rt, mock) -> None:  # type: ignore[no-untyped-def]
    bridge = ScriptedBridge([chunk("Working on it"), fail(RuntimeError("died"))])
    assert _run(Env(rt, mock, bridge)) == [TEXT_FAILED]


def test_failure_shown_with_typing_off(rt, mock) -> None:  # type: ignore[no-untyped-def]
    bridge = ScriptedBridge([fail(RuntimeError("boom"))])
    assert _run(Env(rt, mock, bridge, typing=False)) == [TEXT_FAILED]

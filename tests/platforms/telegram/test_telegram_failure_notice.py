"""A Telegram run that fails is never silent: the person gets a "Failed" message."""

from __future__ import annotations

from typing import Any

from channelkit.core import LifecycleType
from channelkit.platforms.telegram.adapter import TEXT_FAILED
from channelkit.testing import ScriptedBridge, chunk, fail

from tests.platforms.telegram.tg_env import Env, texts


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


def _failed(env: Env) -> None:
    env.settle()
    assert env.channel.events[-1].type is LifecycleType.FAILED


def test_an_agent_that_cannot_start_shows_failed(rt, mock) -> None:  # type: ignore[no-untyped-def]
    env = Env(rt, mock, _NoStart())  # type: ignore[arg-type]
    env.message("hi")
    _failed(env)
    assert texts(env) == [TEXT_FAILED]
    env.channel.close()


def test_a_failure_before_output_shows_failed(rt, mock) -> None:  # type: ignore[no-untyped-def]
    env = Env(rt, mock, ScriptedBridge([fail(RuntimeError("boom"))]))
    env.message("hi")
    _failed(env)
    assert texts(env) == [TEXT_FAILED]
    env.channel.close()


def test_an_agent_dying_mid_run_shows_failed(rt, mock) -> None:  # type: ignore[no-untyped-def]
    env = Env(rt, mock, ScriptedBridge([chunk("Working on it"), fail(RuntimeError("died"))]))
    env.message("hi")
    _failed(env)
    assert texts(env)[-1] == TEXT_FAILED
    env.channel.close()

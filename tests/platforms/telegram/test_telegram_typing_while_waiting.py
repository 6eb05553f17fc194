"""Telegram typing pauses while a run waits for the person and resumes on the answer.

Fake clock: the keep-alive ticks every 4 s; no ``sendChatAction`` goes out while a
question or permission request waits.
"""

from __future__ import annotations

import threading
from typing import Any

from channelkit.testing import ScriptedBridge, ask, chunk, gate, permission_request

from tests.platforms.telegram import test_telegram_output as out
from tests.platforms.telegram.tg_env import Env, texts


def _typing(env: Env) -> int:
    return len(env.calls("sendChatAction"))


def _hooks_done(env: Env) -> None:
    """Let the hook pool finish (the run itself blocks on the person)."""
    assert env.rt.pool.wait_idle(5.0)


def _ticks(env: Env, n: int) -> None:
    for _ in range(n):
        env.rt.clock.advance(4.0)
        _hooks_done(env)


def test_typing_pauses_during_a_native_question_and_resumes_after_the_answer(rt, mock) -> None:  # type: ignore[no-untyped-def]
    bot = out.Bot(mock)
    release = threading.Event()
    env = Env(rt, mock, ScriptedBridge([out._ask(), chunk("Deploying."), gate(release)]))
    env.message("deploy")
    rt.wait_for(lambda: len(bot.questions()) == 1)
    _hooks_done(env)
    before = _typing(env)
    _ticks(env, 3)
    assert _typing(env) == before  # waiting for the person: no typing
    assert env.channel.typing.is_paused("1001")
    out._answer(env, bot)
    rt.wait_for(lambda: _typing(env) > before)  # resumed at once
    resumed = _typing(env)
    _ticks(env, 2)
    assert _typing(env) == resumed + 2  # and keeps ticking
    release.set()
    out._done(env)


def test_typing_pauses_during_a_text_permission_prompt(rt, mock) -> None:  # type: ignore[no-untyped-def]
    release = threading.Event()
    steps: list[Any] = [
        ask(lambda s: permission_request("req-p", s)),
        chunk("Ran it."),
        gate(release),
    ]
    env = Env(rt, mock, ScriptedBridge(steps))
    env.message("run it")
    rt.wait_for(lambda: any("/approve" in t for t in texts(env)))
    _hooks_done(env)
    before = _typing(env)
    _ticks(env, 3)
    assert _typing(env) == before
    env.message("/approve")
    rt.wait_for(lambda: env.channel.pending_request_ids() == [])
    _ticks(env, 1)
    assert _typing(env) > before  # typing again after the answer
    release.set()
    out._done(env)

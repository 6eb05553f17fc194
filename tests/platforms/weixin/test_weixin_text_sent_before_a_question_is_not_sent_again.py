"""Weixin shows nothing while a run writes, so the core sends the text written before a
question before its prompt (``text_only_output``); that text is not sent again, neither
with the final answer nor with the stopped notice of a shutdown."""

from __future__ import annotations

import threading
from typing import Any

from channelkit.platforms.weixin.adapter import STOPPED_MARKER
from channelkit.testing import ScriptedBridge, ask, chunk, final, gate, question_request

from tests.platforms._shared import question
from tests.platforms.weixin.test_weixin_adapter import Env, inbound, mock  # noqa: F401

BEFORE = "I will ask you first."
QUESTIONS = [question("Env", ["Prod", "Staging"])]


def _asks(*after: Any) -> ScriptedBridge:
    return ScriptedBridge(
        [chunk(BEFORE), ask(lambda s: question_request("req-1", s, QUESTIONS)), *after]
    )


def test_the_final_answer_leaves_out_the_text_sent_before_the_question(rt, mock) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    env = Env(rt, mock, _asks(chunk("Thanks!"), final("Thanks!")))
    env.channel.handle_weixin_message(inbound("deploy"))
    rt.wait_for(lambda: len(env.texts()) == 2)
    assert env.texts()[0] == BEFORE
    assert env.texts()[1].startswith("Permission required to run a tool")
    env.channel.handle_weixin_message(inbound("/deny"))
    rt.settle()
    assert [t for t in env.texts() if "Thanks!" in t] == ["Thanks!"]  # on its own
    assert sum(BEFORE in t for t in env.texts()) == 1
    env.channel.close()


def test_a_shutdown_while_the_question_waits_does_not_send_that_text_again(rt, mock) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    env = Env(rt, mock, _asks(final("never")))
    env.channel.handle_weixin_message(inbound("deploy"))
    rt.wait_for(lambda: len(env.texts()) == 2)
    env.channel.close()
    assert sum(BEFORE in t for t in env.texts()) == 1, env.texts()
    assert not any(STOPPED_MARKER in t and BEFORE in t for t in env.texts())


def test_a_shutdown_after_the_question_sends_only_the_text_written_since(rt, mock) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    never, working = threading.Event(), threading.Event()
    steps = (chunk("Working on it."), lambda ctx: working.set(), gate(never, 5.0), final("x"))
    env = Env(rt, mock, _asks(*steps))
    env.channel.handle_weixin_message(inbound("deploy"))
    rt.wait_for(lambda: len(env.texts()) == 2)
    env.channel.handle_weixin_message(inbound("/deny"))
    assert working.wait(5.0)
    assert env.channel.pool.wait_idle(5.0)  # the channel has seen the text
    env.channel.close()
    stopped = [t for t in env.texts() if STOPPED_MARKER in t]
    assert stopped == [f"Working on it.\n\n{STOPPED_MARKER}"], env.texts()
    assert sum(BEFORE in t for t in env.texts()) == 1, env.texts()

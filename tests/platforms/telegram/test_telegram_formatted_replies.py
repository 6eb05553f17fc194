"""Telegram replies keep what the person saw and show the agent's Markdown formatted.

A real ``TelegramChannel`` on the real ``ChannelBase``; the Bot API is requests-mock.
"""

from __future__ import annotations

import itertools
import threading
from typing import Any

import pytest
from channelkit.core import LifecycleType
from channelkit.core.text import MSG_CANCELLED
from channelkit.markdown import Dialect, render
from channelkit.platforms.telegram.output import CANCELLED_MARKER
from channelkit.testing import ScriptedBridge, chunk, final, gate

from tests.platforms.telegram.tg_env import CHAT, Env, url


def _sent(env: Env) -> list[dict[str, Any]]:
    return env.calls("sendMessage")


def _done(env: Env) -> None:
    env.rt.wait_for(lambda: any(e.type.terminal for e in env.channel.events))
    env.settle()


def test_bold_markdown_is_sent_as_html(rt, mock) -> None:  # type: ignore[no-untyped-def]
    env = Env(rt, mock, ScriptedBridge([final("**hello** & <world>")]))
    env.message("hi")
    _done(env)
    [sent] = _sent(env)
    assert sent["parse_mode"] == "HTML"
    assert sent["text"] == "<b>hello</b> &amp; &lt;world&gt;"
    assert "**" not in sent["text"]
    env.channel.close()


def test_plain_text_is_sent_without_a_parse_mode(rt, mock) -> None:  # type: ignore[no-untyped-def]
    env = Env(rt, mock, ScriptedBridge([final("just words")]))
    env.message("hi")
    _done(env)
    [sent] = _sent(env)
    assert sent["text"] == "just words" and "parse_mode" not in sent
    env.channel.close()


def test_rejected_entities_are_retried_as_plain_text(rt, mock) -> None:  # type: ignore[no-untyped-def]
    ids = itertools.count(100)

    def respond(request: Any, context: Any) -> dict[str, Any]:
        if "parse_mode" in request.json():
            context.status_code = 400
            return {
                "ok": False,
                "error_code": 400,
                "description": "Bad Request: can't parse entities: unexpected end tag",
            }
        chat = {"id": CHAT, "type": "private"}
        return {"ok": True, "result": {"message_id": next(ids), "date": 0, "chat": chat}}

    mock.post(url("sendMessage"), json=respond)
    env = Env(rt, mock, ScriptedBridge([final("**hello**")]))
    env.message("hi")
    _done(env)
    assert [(m["text"], m.get("parse_mode")) for m in _sent(env)] == [
        ("<b>hello</b>", "HTML"),
        ("hello", None),  # plain retry: the person still gets the answer, without markers
    ]
    assert env.channel.events[-1].type is LifecycleType.COMPLETED
    env.channel.close()


def test_cancel_sends_the_partial_text_with_a_cancelled_marker(rt, mock) -> None:  # type: ignore[no-untyped-def]
    never = threading.Event()
    env = Env(rt, mock, ScriptedBridge([chunk("Half of **the** "), gate(never, timeout=10)]))
    env.message("go")
    rt.wait_for(lambda: any(e.type is LifecycleType.TEXT_CHUNK for e in env.channel.events))
    env.message("/cancel")
    _done(env)
    texts = [m["text"] for m in _sent(env)]
    assert f"Half of <b>the</b>\n\n{CANCELLED_MARKER}" in texts
    assert MSG_CANCELLED in texts
    assert env.channel.events[-1].type is LifecycleType.CANCELLED
    env.channel.close()


def test_cancel_before_any_text_sends_no_marker(rt, mock) -> None:  # type: ignore[no-untyped-def]
    never = threading.Event()
    env = Env(rt, mock, ScriptedBridge([gate(never, timeout=10)]))
    env.message("go")
    rt.wait_for(lambda: any(e.type is LifecycleType.STARTED for e in env.channel.events))
    env.message("/cancel")
    _done(env)
    assert [m["text"] for m in _sent(env)] == [MSG_CANCELLED]
    env.channel.close()


@pytest.mark.parametrize(
    ("markdown", "expected"),
    [
        ("**bold** and __bold__", "<b>bold</b> and <b>bold</b>"),
        ("*it* but 2 * 3 * 4", "<i>it</i> but 2 * 3 * 4"),
        ("`a<b` and **x**", "<code>a&lt;b</code> and <b>x</b>"),
        ("```\nif a < b: **no**\n```", "<pre>if a &lt; b: **no**</pre>"),
        ("```py\nx = 1\n```", '<pre><code class="language-py">x = 1</code></pre>'),
        ("[docs](https://e.x/?a=1&b=2)", '<a href="https://e.x/?a=1&amp;b=2">docs</a>'),
        ("# Title\nsnake_case_name", "<b>Title</b>\n\nsnake_case_name"),
        ("~~old~~ new", "<s>old</s> new"),
    ],
)
def test_markdown_to_telegram_html(markdown: str, expected: str) -> None:
    assert render(markdown, Dialect.TELEGRAM) == [expected]

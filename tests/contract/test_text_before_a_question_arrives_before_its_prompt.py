"""Contract: the text the agent wrote before a question reaches the chat before the
question's prompt (a native form or the text prompt), once, and the text after it is a
part of its own, never glued to the earlier text; on every chat platform through its
emulator (Telegram flushes a segment at ``input_requested``; a text-only platform sends
the segment's text when it ends)."""

from __future__ import annotations

import json
from typing import Any

from channelkit.agents import Turn
from channelkit.errors import QuestionError
from contract_drivers import BOUND_S, Driver, wait_for
from contract_harness import COLOR, Context, new_token


def _shown(d: Driver) -> list[str]:
    """Every bot message and card of the chat, in timeline order, as text."""
    state = d.state()
    out = []
    for entry in state["timeline"]:
        if entry.get("from") != "bot" and entry["kind"] != "card":
            continue
        view: Any = state["views"].get(entry["card"]) if entry["kind"] == "card" else entry
        out.append(json.dumps(view or {}, ensure_ascii=False))
    return out


def _first(shown: list[str], text: str) -> int:
    return next((i for i, s in enumerate(shown) if text in s), -1)


def _prompt_at(shown: list[str]) -> int:
    """Where the question shows: its form / keyboard, or the text prompt (/approve)."""
    return next((i for i, s in enumerate(shown) if COLOR.question in s or "/approve" in s), -1)


def test_text_before_a_question_is_shown_before_its_prompt_and_kept_apart(
    ctx: Context,
) -> None:
    d = ctx.driver
    token = new_token()
    before = f"I will ask you in a form card {token}."
    after = f"Thanks {token}!"

    def fn(turn: Turn) -> str:
        turn.say(before)
        try:
            turn.ask([COLOR])
        except QuestionError:
            pass
        ctx.script.outcomes.put("asked")
        return after

    ctx.script.fn = fn
    d.send("ask")
    wait_for(lambda: d.pg.channel.pending_request_ids(), "the question to wait", tick=d.tick)
    at_prompt = wait_for(
        lambda: (shown := _shown(d)) and _prompt_at(shown) >= 0 and shown,
        "the prompt",
        tick=d.tick,
    )
    d.settle()
    at_prompt = _shown(d)
    said, asked = _first(at_prompt, before), _prompt_at(at_prompt)
    assert 0 <= said < asked, at_prompt  # the text before the question came first
    d.send("/deny")
    assert ctx.script.outcome() == "asked"
    wait_for(lambda: _first(_shown(d), after) >= 0, "the text after the question", tick=d.tick)
    assert d.pg.channel.wait_idle(BOUND_S)
    d.settle()
    shown = _shown(d)
    assert sum(s.count(before) for s in shown) == 1, shown  # shown once
    glued = [s for s in shown if f"{token}.{after}" in s or f"{token}. {after}" in s]
    assert not glued, glued  # never joined to the text after the question

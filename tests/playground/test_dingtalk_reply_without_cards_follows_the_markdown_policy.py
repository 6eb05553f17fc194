"""A DingTalk reply sent without a card (interactive cards off: a robot Markdown
message) goes through the one Markdown pipeline like a card: bold stays DingTalk bold,
a table follows DingTalk's table policy (an aligned monospace block when it fits), and
no GFM table syntax reaches the person (issue 27). Over the DingTalk emulator."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from channelkit.markdown import Dialect, render
from channelkit.playground import Playground
from channelkit.playground.demo import DEMO_MARKDOWN
from playground_helpers import send, state, wait


@pytest.fixture(scope="module")
def playground() -> Iterator[Playground]:
    with Playground(platform="dingtalk", demo_delay=0.01, dingtalk_cards=False) as pg:
        yield pg


def _bot_messages(pg: Playground) -> list[dict[str, Any]]:
    return [e for e in state(pg)["timeline"] if e.get("from") == "bot" and e["kind"] == "message"]


def test_a_reply_without_a_card_renders_bold_and_the_table_by_the_policy(
    playground: Playground,
) -> None:
    send(playground, "markdown")
    messages = wait(
        lambda: [m for m in _bot_messages(playground) if "Release notes" in m["text"]] or None,
        "the demo's Markdown sample as a robot message",
    )
    assert not state(playground)["cards"]  # no card was created: cards are off
    (message,) = messages
    text = message["text"]
    assert message["format"] == "markdown"
    assert text == "\n\n".join(render(DEMO_MARKDOWN, Dialect.DINGTALK, limit=3_800))
    assert "This build is **ready**" in text
    assert "```\nService | Region   | Status   | Latency\n--------+" in text
    assert "|---|" not in text and "| api |" not in text

"""The demo agent's ``markdown`` answer (`DEMO_MARKDOWN`) over each playground's
emulator: every platform shows the same sample in its own dialect, with the table
following that platform's policy. Telegram: HTML (bold, italic, link, code and the
table as a monospace block, no raw ``**``); DingTalk's status card: its Markdown subset
(no tables: an aligned block in a fence); Feishu's card: Markdown with a native table;
Weixin: plain text (no Markdown syntax left). Slack streams the text as
``markdown_text``, which Slack renders itself (tested with Slack's stream)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from channelkit.playground import Playground
from channelkit.playground.demo import DEMO_MARKDOWN
from playground_helpers import send, state, wait

ALIGNED_HEADER = "Service | Region   | Status   | Latency"


@pytest.fixture
def playground(request: pytest.FixtureRequest) -> Iterator[Playground]:
    with Playground(platform=request.param, demo_delay=0.0) as pg:
        yield pg


def _final_bot_text(pg: Playground) -> str:
    """What the bot finally shows for the sample: the terminal status card's content,
    or the message that carries the sample's last words."""

    def find() -> str | None:
        current = state(pg)
        for entry in reversed(current["timeline"]):
            if entry.get("from") == "user":
                continue
            view: dict[str, Any] = current["views"].get(entry.get("card"), entry)
            text = view.get("content") or view.get("text") or ""
            if "never cut inside a code block" in text and view.get("state") not in (
                "running",
                "streaming",
            ):
                return str(text)
        return None

    return str(wait(find, "the sample's final rendering", 15.0))


@pytest.mark.parametrize("playground", ["telegram"], indirect=True)
def test_telegram_shows_the_sample_as_html(playground: Playground) -> None:
    send(playground, "markdown")
    text = _final_bot_text(playground)
    assert "<b>Release notes</b>" in text and "<b>ready</b>" in text and "<i>mostly</i>" in text
    assert '<a href="https://example.com/channelkit/status">status page</a>' in text
    assert '<pre><code class="language-python">def greet(name: str) -&gt; str:' in text
    assert f"<pre>{ALIGNED_HEADER}" in text  # the table: an aligned monospace block
    assert "**" not in text and "```" not in text and "](" not in text
    views = state(playground)["views"].values()
    assert any(v.get("parseMode") == "HTML" and v.get("text") == text for v in views)


@pytest.mark.parametrize("playground", ["dingtalk"], indirect=True)
def test_dingtalk_shows_the_table_as_an_aligned_block(playground: Playground) -> None:
    send(playground, "markdown")
    text = _final_bot_text(playground)
    assert "**ready**" in text and "[status page](https://example.com/channelkit/status)" in text
    assert f"```\n{ALIGNED_HEADER}\n" in text  # DingTalk has no tables
    assert "| --- |" not in text and "|---|" not in text


@pytest.mark.parametrize("playground", ["feishu"], indirect=True)
def test_feishu_keeps_a_native_table(playground: Playground) -> None:
    send(playground, "markdown")
    text = _final_bot_text(playground)
    assert "| Service | Region | Status | Latency |" in text
    assert "| search | ap-south | degraded | 310 ms |" in text
    assert "```python\ndef greet" in text and "**ready**" in text


@pytest.mark.parametrize("playground", ["weixin"], indirect=True)
def test_weixin_shows_plain_text(playground: Playground) -> None:
    send(playground, "markdown")
    text = _final_bot_text(playground)
    assert text.startswith("Release notes\n")
    assert "status page (https://example.com/channelkit/status)" in text
    assert ALIGNED_HEADER in text and 'return f"Hello, {name}!"' in text
    for syntax in ("**", "```", "](", "## ", "|---|"):
        assert syntax not in text, (syntax, json.dumps(text))


def test_the_sample_has_every_construct_the_dialects_differ_on() -> None:
    for construct in ("## ", "**", "*mostly*", "](https://", "\n- ", "```python", "|---|"):
        assert construct in DEMO_MARKDOWN, construct
    table = [line for line in DEMO_MARKDOWN.splitlines() if line.startswith("|")]
    assert len(table) == 5 and all(line.count("|") == 5 for line in table)  # 3 rows x 4
    assert max(len(p) for p in DEMO_MARKDOWN.split("\n\n")) > 200  # a long paragraph

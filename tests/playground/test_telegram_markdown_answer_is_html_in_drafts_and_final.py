"""Over HTTP against the Telegram emulator: a Markdown answer streams as HTML drafts and
ends as an HTML message - ``parse_mode`` HTML with ``<b>`` and ``<pre>``, never a raw
``**``, in the drafts (even while a bold span or a code fence is still open) and in
the final message."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from channelkit.agents import FunctionAgent
from channelkit.agents.function import Turn
from channelkit.playground import Playground
from playground_helpers import calls, send, wait

# the first chunk leaves a bold span open: the draft closes it
FIRST = "# Result\n\n```python\nprint('ok')\n```\n\nThe build is **green and"
REST = " passing**.\n\n| step | time |\n|---|---|\n| test | 3 s |\n\nSee **above**."


class GatedAgent:
    def __init__(self) -> None:
        self.said_first = threading.Event()
        self.release = threading.Event()

    def __call__(self, turn: Turn) -> str | None:
        turn.say(FIRST)
        self.said_first.set()
        self.release.wait(10.0)
        turn.say(REST)
        return None


@pytest.fixture
def setup() -> Iterator[tuple[Playground, GatedAgent]]:
    agent = GatedAgent()
    with Playground(platform="telegram", agent=FunctionAgent(agent), ingress="webhook") as pg:
        yield pg, agent
        agent.release.set()


def _bodies(pg: Playground, since: int, method: str) -> list[dict[str, Any]]:
    return [c["body"] for c in calls(pg, since) if c["path"].endswith("/" + method)]


def test_drafts_and_the_final_message_are_html_without_raw_markdown(setup) -> None:  # type: ignore[no-untyped-def]
    pg, agent = setup
    since = calls(pg)[-1]["seq"]
    send(pg, "build status?")
    assert agent.said_first.wait(10.0)
    wait(lambda: any(d["text"] for d in _bodies(pg, since, "sendMessageDraft")), "a draft")
    agent.release.set()
    wait(lambda: _bodies(pg, since, "sendMessage"), "the final message")

    drafts = [d for d in _bodies(pg, since, "sendMessageDraft") if d["text"]]
    assert drafts
    for draft in drafts:
        assert draft.get("parse_mode") == "HTML", draft
        assert "**" not in draft["text"] and "```" not in draft["text"], draft
    first = drafts[0]["text"]
    assert "<b>Result</b>" in first and "<b>green and</b>" in first and "<pre>" in first

    [final] = _bodies(pg, since, "sendMessage")
    assert final.get("parse_mode") == "HTML"
    text = final["text"]
    assert "<b>Result</b>" in text and "<b>above</b>" in text
    assert "<pre><code class=\"language-python\">print('ok')</code></pre>" in text
    assert "<b>green and passing</b>" in text
    assert "<pre>step | time" in text  # the table: an aligned monospace block
    assert "**" not in text and "```" not in text

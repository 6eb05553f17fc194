"""A function agent calls ``turn.present`` mid-run on Telegram and DingTalk (the
playground emulators): the text before it is shown first (its segment ended), the
presentation is delivered next through the platform renderer, and the text after it
opens a new segment (a new message / status card)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from channelkit.agents import FunctionAgent, Turn
from channelkit.playground import Playground
from channelkit.testing import wait_until

CARD = {
    "title": "Deploy finished",
    "blocks": [
        {"type": "text", "text": "All 3 services are up."},
        {"type": "buttons", "buttons": [{"label": "Dashboard", "url": "https://example.test/d"}]},
    ],
}


def _agent(turn: Turn) -> str:
    turn.say("Deploying now.")
    turn.present(CARD)
    turn.say("Anything else?")
    return ""


@pytest.fixture
def playground(request: pytest.FixtureRequest) -> Iterator[Playground]:
    with Playground(platform=request.param, agent=FunctionAgent(_agent)) as pg:
        yield pg


@pytest.mark.parametrize("playground", ["telegram"], indirect=True)
def test_telegram_text_then_presentation_then_new_text(playground: Playground) -> None:
    playground.send("deploy")
    emulator: Any = playground.emulator

    def messages() -> list[dict[str, Any]]:
        state = emulator.state()
        keys = [e["card"] for e in state["timeline"] if e.get("kind") == "card"]
        return [state["views"][k] for k in keys]

    shown = wait_until(lambda: len(messages()) >= 3 and messages(), what="three bot messages")
    texts = [m["text"] for m in shown]
    assert texts[0] == "Deploying now."
    assert texts[1].startswith("Deploy finished") and "All 3 services are up." in texts[1]
    assert shown[1]["keyboard"] == [
        [{"text": "Dashboard", "data": None, "url": "https://example.test/d"}]
    ]
    assert texts[2] == "Anything else?"
    assert playground.channel.wait_idle(10)
    assert len(messages()) == 3  # nothing repeated at the end of the run


@pytest.mark.parametrize("playground", ["dingtalk"], indirect=True)
def test_dingtalk_card_then_presentation_then_new_card(playground: Playground) -> None:
    playground.send("deploy")
    emulator: Any = playground.emulator

    def bot_entries() -> list[dict[str, Any]]:
        return [e for e in emulator.state()["timeline"] if e.get("from") == "bot"]

    def done() -> list[dict[str, Any]] | None:
        entries = bot_entries()
        cards = [e for e in entries if e.get("kind") == "card"]
        if len(cards) < 2:
            return None
        views = emulator.state()["views"]
        if any(views[c["card"]]["state"] == "running" for c in cards):
            return None
        return entries

    entries = wait_until(done, what="two finished status cards")
    assert playground.channel.wait_idle(10)
    kinds = [e["kind"] for e in entries]
    assert kinds == ["card", "message", "card"], entries
    views = emulator.state()["views"]
    assert views[entries[0]["card"]]["content"] == "Deploying now."
    presentation = entries[1]
    assert presentation["format"] == "markdown" and presentation["title"] == "Deploy finished"
    assert "### Deploy finished" in presentation["text"]
    assert "- [Dashboard](https://example.test/d)" in presentation["text"]
    assert views[entries[2]["card"]]["content"] == "Anything else?"
    sends = emulator.calls("/v1.0/robot/oToMessages/batchSend") + emulator.calls(
        "/v1.0/robot/groupMessages/send"
    )
    assert [json.loads(c["body"]["msgParam"])["title"] for c in sends] == ["Deploy finished"]


@pytest.mark.parametrize("platform", ["dingtalk", "feishu", "telegram"])
def test_the_demo_agent_answers_present_with_a_rendered_presentation(platform: str) -> None:
    with Playground(platform=platform, demo_delay=0) as pg:
        pg.send("present")
        emulator: Any = pg.emulator

        def shown() -> str:
            calls = [c["body"] for c in emulator.calls() if c["method"] in ("POST", "PUT")]
            return json.dumps(calls, ensure_ascii=False)

        wait_until(
            lambda: "Deployment finished" in shown() and "new segment after it" in shown(),
            what="the demo presentation and the text after it",
        )
        assert pg.channel.wait_idle(10)
        assert "https://example.com/channelkit/docs" in shown()

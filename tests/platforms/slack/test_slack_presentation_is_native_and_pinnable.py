"""Slack presentations are Block Kit messages whose ``ts`` is the message id, and they
can be pinned, unpinned and listed (``pins.add`` / ``pins.remove`` / ``pins.list``),
like on the other platforms: through ``send_presentation`` and ``Turn.present``, on the
real ``SlackChannel`` against the Slack emulator over real HTTP."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from channelkit.agents.function import FunctionAgent, Turn

from tests.platforms.slack.slack_emulator import LONG, SlackRig

CARD = {
    "title": "Deploy finished",
    "blocks": [
        {"type": "text", "text": "All 3 services are up."},
        {"type": "buttons", "buttons": [{"label": "Dashboard", "url": "https://example.test/d"}]},
    ],
}


def _block_types(message: dict[str, Any]) -> list[str]:
    return [b["type"] for b in message["blocks"]]


@pytest.fixture
def rig() -> Iterator[SlackRig]:
    agent = FunctionAgent(lambda turn: "ok", name="idle")
    try:
        with SlackRig.start(agent) as started:
            yield started
    finally:
        agent.close()


def test_send_presentation_posts_block_kit_and_returns_its_ts(rig: SlackRig) -> None:
    ts = rig.channel.send_presentation(rig.chat, CARD)
    assert isinstance(ts, str) and ts
    message = rig.message(ts)
    assert _block_types(message) == ["header", "section", "actions"]
    assert message["blocks"][0]["text"]["text"] == "Deploy finished"
    (button,) = message["blocks"][2]["elements"]
    assert button["url"] == "https://example.test/d"
    assert "All 3 services are up." in message["text"]  # the notification fallback
    (post,) = rig.calls("/chat.postMessage")
    assert post["body"]["channel"] == rig.chat and post["response"]["ts"] == ts


def test_a_presentation_asking_for_a_pin_is_pinned_and_listed(rig: SlackRig) -> None:
    ts = rig.channel.send_presentation(rig.chat, {"presentation": CARD, "delivery": {"pin": True}})
    assert rig.message(ts)["pinned"] is True
    assert rig.view(ts)["pinned"] is True  # the page marks it
    assert rig.channel.pinned_messages(rig.chat) == [ts]
    (pin,) = rig.calls("/pins.add")
    assert pin["body"] == {"channel": rig.chat, "timestamp": ts}


def test_pin_unpin_and_list_use_the_slack_pins_methods(rig: SlackRig) -> None:
    first = rig.channel.send_presentation(rig.chat, CARD)
    second = rig.channel.send_presentation(rig.chat, {"title": "Second"})
    assert rig.channel.pinned_messages(rig.chat) == []
    rig.channel.pin_message(rig.chat, first)
    rig.channel.pin_message(rig.chat, second)
    rig.channel.pin_message(rig.chat, second)  # already pinned: nothing to do
    assert rig.channel.pinned_messages(rig.chat) == [second, first]  # latest pin first
    rig.channel.unpin_message(rig.chat, second)
    rig.channel.unpin_message(rig.chat, second)  # not pinned any more: nothing to do
    assert rig.channel.pinned_messages(rig.chat) == [first]
    assert rig.message(second)["pinned"] is False and rig.message(first)["pinned"] is True
    assert [c["body"]["timestamp"] for c in rig.calls("/pins.remove")] == [second, second]
    assert len(rig.calls("/pins.list")) == 3


def test_turn_present_is_block_kit_between_the_texts_and_pinned_when_asked() -> None:
    presented = threading.Event()

    def agent_fn(turn: Turn) -> str:
        turn.say("Deploying now.")
        turn.present({"presentation": CARD, "delivery": {"pin": True}})
        turn.say("Anything else?")
        presented.set()
        return ""

    agent = FunctionAgent(agent_fn, name="presenter")
    try:
        with SlackRig.start(agent) as rig:
            start = rig.send("deploy")
            assert presented.wait(LONG)
            card = rig.wait(
                lambda: next((v for v in rig.views()[start:] if v.get("pinned")), None),
                "the pinned presentation",
            )
            message = rig.message(card["id"])
            assert _block_types(message) == ["header", "section", "actions"]
            assert rig.channel.pinned_messages(rig.chat) == [card["id"]]

            def text_of(words: str) -> str | None:
                return next(
                    (v["id"] for v in rig.views()[start:] if words in v.get("text", "")), None
                )

            before = rig.wait(lambda: text_of("Deploying now."), "the text before it")
            after = rig.wait(lambda: text_of("Anything else?"), "the text after it")
            order = [v["id"] for v in rig.views()[start:]]
            assert order.index(before) < order.index(card["id"]) < order.index(after)
    finally:
        agent.close()

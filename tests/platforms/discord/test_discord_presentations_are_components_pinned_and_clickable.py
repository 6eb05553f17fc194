"""Discord presentations: the renderer's components v2 message sent in the channel and
pinned when asked; a click on a presentation's value button or select choice is the
clicking person's message in that channel."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import requests_mock as rm
from channelkit.testing import ScriptedBridge, chunk, wait_until

from tests.platforms.discord.discord_env import DM, GUILD_CHANNEL, STRANGER, Env

CARD: dict[str, Any] = {
    "title": "Deploy finished",
    "blocks": [
        {"type": "text", "text": "All 3 services are up."},
        {
            "type": "buttons",
            "buttons": [
                {"label": "Roll back", "value": "roll back please"},
                {"label": "Dashboard", "url": "https://example.test/d"},
            ],
        },
        {
            "type": "select",
            "placeholder": "Service",
            "options": [{"label": "API", "value": "restart api"}],
        },
    ],
}


@pytest.fixture
def mocker() -> Iterator[rm.Mocker]:
    with rm.Mocker() as m:
        yield m


def _components(body: dict[str, Any]) -> list[dict[str, Any]]:
    found, stack = [], list(body.get("components", []))
    while stack:
        item = stack.pop(0)
        found.append(item)
        stack.extend(item.get("components", []))
    return found


def test_a_presentation_is_sent_natively_and_pinned_when_asked(rt, mocker) -> None:  # type: ignore[no-untyped-def]
    env = Env(rt, mocker, ScriptedBridge([chunk("ok")]))
    message_id = env.channel.send_presentation(
        DM, {"presentation": CARD, "delivery": {"pin": True}}
    )
    (body,) = env.posts(DM)
    assert body["flags"] & (1 << 15)  # components v2
    assert _components(body)[0]["type"] == 17  # one container
    pins = env.calls("PUT", r"/messages/pins/\d+$")
    assert [path.rsplit("/", 1)[1] for _, path, _ in pins] == [message_id]
    env.channel.close(2.0)


def test_a_value_button_and_a_select_choice_are_the_clickers_messages(rt, mocker) -> None:  # type: ignore[no-untyped-def]
    bridge = ScriptedBridge([chunk("ok")])
    env = Env(rt, mocker, bridge)
    env.channel.send_presentation(GUILD_CHANNEL, CARD)
    (body,) = env.posts(GUILD_CHANNEL)
    parts = _components(body)
    button = next(c for c in parts if c.get("label") == "Roll back")
    select = next(c for c in parts if c.get("type") == 3)
    env.click_over_gateway(button["custom_id"], user=STRANGER, channel=GUILD_CHANNEL)
    wait_until(lambda: bridge.prompts, what="the button's message")
    assert env.callbacks()[0] == {"type": 6}
    rt.settle()
    value = select["options"][0]["value"]
    env.click_over_gateway(
        select["custom_id"], user=STRANGER, channel=GUILD_CHANNEL, values=[value]
    )
    wait_until(lambda: len(bridge.prompts) == 2, what="the choice's message")
    rt.settle()
    assert [text for _, text in bridge.prompts] == ["roll back please", "restart api"]
    started = [e for e in env.channel.events if e.type.value == "started"]
    assert {e.chat_id for e in started} == {GUILD_CHANNEL}
    assert all(e.owner is not None and e.owner.id == STRANGER for e in started)
    env.channel.close(2.0)


def test_the_endpoint_answers_a_click_before_anything_goes_to_discord(rt, mocker) -> None:  # type: ignore[no-untyped-def]
    bridge = ScriptedBridge([chunk("ok")])
    env = Env(rt, mocker, bridge, ingress="interactions")
    env.channel.send_presentation(DM, CARD)
    rt.settle()  # quiet: no run, no timer, nothing on its way to Discord
    (body,) = env.posts(DM)
    button = next(c for c in _components(body) if c.get("label") == "Roll back")
    sent_before = len(env.mock.request_history)
    response = env.routes[0].handler(env.signed(button["custom_id"]))
    assert response.status == 200 and json.loads(response.body) == {"type": 6}
    assert len(env.mock.request_history) == sent_before  # the answer came first
    assert bridge.prompts == []  # and the run starts only after it
    response.run_after()
    wait_until(lambda: bridge.prompts, what="the run after the answer")
    rt.settle()
    env.channel.close(2.0)

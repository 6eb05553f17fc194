"""Each platform's documented payload limits as checks on rendered output, and what a
person sees of a rendered payload (to assert that no label is lost).

Used by the renderer-limit tests and the property tests. Sizes are measured the
strictest way a platform could: JSON as the HTTP layer sends it (ASCII, escaped) for
LINE and Feishu, UTF-16 for MS Teams (as Microsoft documents its limit).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import Any

from channelkit.platforms.discord import renderer as discord
from channelkit.platforms.feishu import renderer as feishu
from channelkit.platforms.line import renderer as line
from channelkit.platforms.mattermost import renderer as mattermost
from channelkit.platforms.msteams import renderer as msteams
from channelkit.platforms.slack import renderer as slack
from channelkit.platforms.telegram import renderer as telegram
from channelkit.presentation import (
    ButtonsBlock,
    MessagePresentation,
    PresentationCapabilities,
    SelectBlock,
)
from channelkit.presentation.text import truncate

MATTERMOST_CALLBACK = "https://cb.test/mattermost"


def utf8(value: str) -> int:
    return len(value.encode("utf-8"))


def utf16(value: str) -> int:
    return len(value.encode("utf-16-le", "surrogatepass")) // 2


def wire(value: Any) -> int:
    """Bytes as ``requests`` sends JSON (ASCII with escapes)."""
    return len(json.dumps(value))


# --------------------------------------------------------------------------- checks


def check_slack(messages: list[dict[str, Any]]) -> None:
    for message in messages:
        assert len(message["text"]) <= 40000
        blocks = message.get("blocks", [])
        assert len(blocks) <= 50
        for block in blocks:
            kind = block["type"]
            if kind == "header":
                assert 1 <= len(block["text"]["text"]) <= 150
            elif kind == "section":
                assert 1 <= len(block["text"]["text"]) <= 3000
            elif kind == "context":
                assert len(block["elements"]) <= 10
                assert all(len(e["text"]) <= 3000 for e in block["elements"])
            elif kind == "actions":
                assert 1 <= len(block["elements"]) <= 25
                assert len(block["block_id"]) <= 255
                for element in block["elements"]:
                    assert len(element["action_id"]) <= 255
                    if element["type"] == "button":
                        assert 1 <= len(element["text"]["text"]) <= 75
                        assert len(element.get("value", "")) <= 2000
                        assert len(element.get("url", "")) <= 3000
                    else:
                        assert 1 <= len(element["options"]) <= 100
                        assert len(element["placeholder"]["text"]) <= 150
                        for option in element["options"]:
                            assert len(option["text"]["text"]) <= 75
                            assert len(option["value"]) <= 150


def _discord_count(component: dict[str, Any]) -> int:
    return 1 + sum(_discord_count(c) for c in component.get("components", []))


def check_discord(messages: list[dict[str, Any]]) -> None:
    for message in messages:
        assert message["flags"] == 1 << 15
        [container] = message["components"]
        assert container["type"] == 17
        assert _discord_count(container) <= 40
        assert sum(len(c.get("content", "")) for c in container["components"]) <= 4000
        for child in container["components"]:
            if child["type"] != 1:
                continue
            assert 1 <= len(child["components"]) <= 5
            for item in child["components"]:
                if item["type"] == 2:
                    assert 1 <= len(item["label"]) <= 80
                    assert len(item.get("custom_id", "")) <= 100
                    assert len(item.get("url", "")) <= 512
                else:
                    assert len(item["custom_id"]) <= 100
                    assert 1 <= len(item["options"]) <= 25
                    assert len(item.get("placeholder", "")) <= 150
                    for option in item["options"]:
                        assert len(option["label"]) <= 100 and len(option["value"]) <= 100


def check_telegram(messages: list[dict[str, Any]]) -> None:
    assert all("reply_markup" not in m for m in messages[:-1])
    for message in messages:
        assert 1 <= utf16(message["text"]) <= 4096
    if messages and "reply_markup" in messages[-1]:
        keyboard = messages[-1]["reply_markup"]["inline_keyboard"]
        assert sum(len(row) for row in keyboard) <= 100
        for row in keyboard:
            assert 1 <= len(row) <= 8
            for button in row:
                assert button["text"]
                if "callback_data" in button:
                    assert 1 <= utf8(button["callback_data"]) <= 64


def check_mattermost(posts: list[dict[str, Any]]) -> None:
    for post in posts:
        assert len(post["message"]) <= 16383
    assert all("props" not in p for p in posts[:-1])
    if posts and "props" in posts[-1]:
        attachments = posts[-1]["props"]["attachments"]
        actions = [a for att in attachments for a in att["actions"]]
        assert 1 <= len(actions) <= 25
        assert all(a["id"].isalnum() for a in actions)
        assert len({a["id"] for a in actions}) == len(actions)


def check_msteams(activities: list[dict[str, Any]]) -> None:
    for activity in activities:
        compact = json.dumps(activity, ensure_ascii=False, separators=(",", ":"))
        assert len(compact.encode("utf-16-le", "surrogatepass")) <= 28000
        card = activity["attachments"][0]["content"]
        for element in card["body"]:
            if element["type"] == "ActionSet":
                assert 1 <= len(element["actions"]) <= 6


def check_feishu(bodies: list[dict[str, Any]]) -> None:
    for body in bodies:
        assert body["msg_type"] == "interactive"
        request = {"receive_id": "oc_" + "0" * 32, "uuid": "0" * 36, **body}
        assert wire(request) <= 30000
        card = json.loads(body["content"])
        assert len(card["body"]["elements"]) <= 200
        for element in card["body"]["elements"]:
            if element["tag"] == "button":
                assert 1 <= len(element["text"]["content"]) <= 40
    if bodies:
        assert all("header" not in json.loads(b["content"]) for b in bodies[1:])


def check_line(bodies: list[dict[str, Any]]) -> None:
    messages = [m for b in bodies for m in b["messages"]]
    for body in bodies:
        assert 1 <= len(body["messages"]) <= 5
    flexes = [m for m in messages if m["type"] == "flex"]
    assert len(flexes) <= 1
    if flexes:
        assert messages[-1] is flexes[0]  # the bubble (and its quick reply) comes last
    for message in messages:
        if message["type"] == "text":
            assert 1 <= utf16(message["text"]) <= 5000
            continue
        assert 1 <= utf16(message["altText"]) <= 1500
        bubble = message["contents"]
        assert bubble["type"] == "bubble"
        assert wire(bubble) <= 30000
        footer = bubble.get("footer", {}).get("contents", [])
        assert len(footer) <= 4
        for button in footer:
            action = button["action"]
            assert 1 <= len(action["label"]) <= 40
            assert len(action.get("data", "")) <= 300
            assert len(action.get("displayText", "")) <= 300
            assert len(action.get("text", "")) <= 300
            assert len(action.get("uri", "")) <= 1000
        items = message.get("quickReply", {}).get("items", [])
        assert len(items) <= 13
        for item in items:
            assert 1 <= len(item["action"]["label"]) <= 20
            assert len(item["action"]["data"]) <= 300


# --------------------------------------------------------------------------- visible text

_HIDDEN_KEYS = frozenset(
    {
        "action_id",
        "altText",
        "behaviors",
        "block_id",
        "callback_data",
        "color",
        "contentType",
        "custom_id",
        "data",
        "displayText",
        "height",
        "id",
        "integration",
        "layout",
        "margin",
        "schema",
        "size",
        "spacing",
        "style",
        "tag",
        "template",
        "type",
        "uri",
        "url",
        "value",
        "version",
        "weight",
        "width_mode",
        "$schema",
    }
)


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            if key not in _HIDDEN_KEYS:
                yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def visible_text(platform: str, messages: list[dict[str, Any]]) -> str:
    """Everything a person reads in the rendered messages (labels and text, not ids,
    callback values or the notification fallback), whitespace removed."""
    if platform == "slack":
        parts = [s for m in messages for s in _strings(m.get("blocks", []))]
    elif platform == "feishu":
        parts = [s for m in messages for s in _strings(json.loads(m["content"]))]
        parts = [re.sub(r"</?font[^>]*>", "", s) for s in parts]
    elif platform == "discord":
        parts = [s.replace("-# ", "") for s in _strings(messages)]
    else:
        parts = list(_strings(messages))
    return "".join("".join(parts).split())


def shown_labels(
    presentation: MessagePresentation, capabilities: PresentationCapabilities
) -> list[str]:
    """Every button and option label as the channel may cut it (at a grapheme
    boundary), whitespace removed."""
    labels: list[str] = []
    actions, selects = capabilities.limits.actions, capabilities.limits.selects
    for block in presentation.blocks:
        if isinstance(block, ButtonsBlock):
            labels += [truncate(b.label, actions.max_label_length) for b in block.buttons]
        elif isinstance(block, SelectBlock):
            labels += [truncate(o.label, selects.max_label_length) for o in block.options]
    return ["".join(label.split()) for label in labels]


# --------------------------------------------------------------------------- platforms

Render = Callable[..., list[dict[str, Any]]]


def _mattermost(p: MessagePresentation, text: str | None = None) -> list[dict[str, Any]]:
    return mattermost.render(p, text=text, callback_url=MATTERMOST_CALLBACK)


PLATFORMS: dict[
    str, tuple[PresentationCapabilities, Render, Callable[[list[dict[str, Any]]], None]]
] = {
    "discord": (discord.CAPABILITIES, discord.render, check_discord),
    "slack": (slack.CAPABILITIES, slack.render, check_slack),
    "telegram": (telegram.CAPABILITIES, telegram.render, check_telegram),
    "mattermost": (mattermost.CAPABILITIES, _mattermost, check_mattermost),
    "msteams": (msteams.CAPABILITIES, msteams.render, check_msteams),
    "feishu": (feishu.CAPABILITIES, feishu.render, check_feishu),
    "line": (line.CAPABILITIES, line.render, check_line),
}

"""Each renderer's output checked against its platform's documented limits, on a
presentation that overflows every limit."""

from __future__ import annotations

import json
from typing import Any

import pytest
from channelkit.platforms.discord import renderer as discord
from channelkit.platforms.feishu import renderer as feishu
from channelkit.platforms.line import renderer as line
from channelkit.platforms.mattermost import renderer as mattermost
from channelkit.platforms.msteams import renderer as msteams
from channelkit.platforms.slack import renderer as slack
from channelkit.platforms.telegram import renderer as telegram
from channelkit.presentation import (
    Button,
    ButtonsBlock,
    ContextBlock,
    DividerBlock,
    MessagePresentation,
    SelectBlock,
    SelectOption,
    TextBlock,
    adapt,
    render_fallback_text,
)


def stress() -> MessagePresentation:
    blocks: list[Any] = []
    for i in range(6):
        blocks.append(TextBlock(f"Paragraph {i} " + "漢字😀 text " * 700))
        blocks.append(ContextBlock(f"ctx {i} " + "é" * 3000))
        blocks.append(DividerBlock())
        blocks.append(
            ButtonsBlock(
                (
                    *tuple(
                        Button(
                            f"Button {i}.{j} " + "L" * 100,
                            value=f"v{i}.{j}:" + "x" * (10 if j % 2 else 400),
                            style="primary" if j == 0 else None,
                            priority=j % 3,
                        )
                        for j in range(8)
                    ),
                    Button("Docs", url="https://docs.example.test/a"),
                    Button("Cmd", command="/status"),
                )
            )
        )
        blocks.append(
            SelectBlock(
                tuple(
                    SelectOption(f"Option {k} " + "o" * 120, f"opt{k}" + "z" * (k * 3))
                    for k in range(120)
                ),
                placeholder="Pick " + "p" * 200,
            )
        )
    return MessagePresentation(title="Stress " + "T" * 300, tone="danger", blocks=tuple(blocks))


STRESS = stress()


def adapted(capabilities: Any) -> MessagePresentation:
    return adapt(STRESS, capabilities)


def utf8(value: str) -> int:
    return len(value.encode("utf-8"))


def test_slack_limits() -> None:
    messages = slack.render(adapted(slack.CAPABILITIES))
    assert len(messages) >= 2  # more than 50 blocks: continued
    for message in messages:
        assert 1 <= len(message["blocks"]) <= slack.MAX_BLOCKS
        assert message["text"]
        for block in message["blocks"]:
            if block["type"] == "header":
                assert len(block["text"]["text"]) <= 150
            if block["type"] == "section":
                assert len(block["text"]["text"]) <= 3000
            if block["type"] == "context":
                assert len(block["elements"][0]["text"]) <= 3000
            if block["type"] == "actions":
                assert len(block["elements"]) <= 25
                assert len(block["block_id"]) <= 255
                for element in block["elements"]:
                    assert len(element["action_id"]) <= 255
                    if element["type"] == "button":
                        assert len(element["text"]["text"]) <= 75
                        assert len(element.get("value", "")) <= 2000
                        assert len(element.get("url", "")) <= 3000
                    else:
                        assert len(element["options"]) <= 100
                        assert len(element["placeholder"]["text"]) <= 150
                        for option in element["options"]:
                            assert len(option["text"]["text"]) <= 75
                            assert len(option["value"]) <= 150


def test_telegram_limits() -> None:
    messages = telegram.render(adapted(telegram.CAPABILITIES))
    assert len(messages) >= 2  # long text continues
    assert all("reply_markup" not in m for m in messages[:-1])
    for message in messages:
        assert 1 <= len(message["text"].encode("utf-16-le")) // 2 <= 4096
    keyboard = messages[-1]["reply_markup"]["inline_keyboard"]
    count = 0
    for row in keyboard:
        assert 1 <= len(row) <= 3
        for button in row:
            count += 1
            assert button["text"]
            if "callback_data" in button:
                assert 1 <= utf8(button["callback_data"]) <= telegram.MAX_CALLBACK_DATA_BYTES
    assert count <= 100 + 6 * 100


def test_telegram_oversized_command_is_left_out_of_the_keyboard() -> None:
    p = MessagePresentation(
        blocks=(ButtonsBlock((Button("Run", command="/" + "c" * 60), Button("Ok", value="ok"))),)
    )
    [message] = telegram.render(adapt(p, telegram.CAPABILITIES))
    assert message["reply_markup"]["inline_keyboard"] == [[{"text": "Ok", "callback_data": "ok"}]]
    assert "Run: `/ccc" in message["text"]


def test_telegram_inline_buttons_off_renders_text_only() -> None:
    caps = telegram.capabilities(inline_buttons=False)
    p = MessagePresentation(
        blocks=(TextBlock("Choose:"), ButtonsBlock((Button("Retry", value="cmd:retry"),)))
    )
    assert telegram.render(adapt(p, caps)) == [{"text": "Choose:\n\nActions:\n- Retry"}]


def _discord_count(component: dict[str, Any]) -> int:
    return 1 + sum(_discord_count(c) for c in component.get("components", []))


def test_discord_limits() -> None:
    messages = discord.render(adapted(discord.CAPABILITIES))
    rows = 0
    for message in messages:
        assert message["flags"] == 1 << 15
        [container] = message["components"]
        assert container["type"] == 17
        assert _discord_count(container) <= 40
        assert sum(len(c.get("content", "")) for c in container["components"]) <= 4000
        for child in container["components"]:
            if child["type"] != 1:
                continue
            rows += 1
            assert 1 <= len(child["components"]) <= 5
            for item in child["components"]:
                if item["type"] == 2:
                    assert len(item["label"]) <= 80
                    assert len(item.get("custom_id", "")) <= 100
                else:
                    assert len(item["custom_id"]) <= 100
                    assert 1 <= len(item["options"]) <= 25
                    assert len(item.get("placeholder", "")) <= 150
                    for option in item["options"]:
                        assert len(option["label"]) <= 100 and len(option["value"]) <= 100
    assert rows <= 5


def test_line_limits() -> None:
    bodies = line.render(adapted(line.CAPABILITIES))
    for body in bodies:
        assert 1 <= len(body["messages"]) <= 5
    [flex] = [m for b in bodies for m in b["messages"] if m["type"] == "flex"]
    assert len(flex["altText"]) <= 400
    # Six selects take the whole shared budget of 4 here; check a lighter mix as well.
    light = MessagePresentation(blocks=(STRESS.blocks[3], STRESS.blocks[4]))
    [body] = line.render(adapt(light, line.CAPABILITIES))
    footer = body["messages"][0]["contents"]["footer"]["contents"]
    assert len(footer) == 3  # one of the four actions is the select
    for button in footer + flex["contents"].get("footer", {}).get("contents", []):
        assert len(button["action"]["label"]) <= 40
        assert len(button["action"].get("data", "")) <= 300
    items = flex["quickReply"]["items"]
    assert len(items) <= 13
    for item in items:
        assert len(item["action"]["label"]) <= 20
        assert len(item["action"]["data"]) <= 300


def test_line_without_controls_sends_text_messages() -> None:
    p = MessagePresentation(title="T", blocks=(TextBlock("x" * 12000),))
    bodies = line.render(adapt(p, line.CAPABILITIES))
    texts = [m["text"] for b in bodies for m in b["messages"]]
    assert all(m["type"] == "text" for b in bodies for m in b["messages"])
    assert all(len(t) <= 5000 for t in texts)


def test_mattermost_limits() -> None:
    posts = mattermost.render(adapted(mattermost.CAPABILITIES), callback_url="https://cb.test/mm")
    assert all(len(p["message"]) <= mattermost.MAX_MESSAGE for p in posts)
    actions = [a for att in posts[-1]["props"]["attachments"] for a in att["actions"]]
    assert 1 <= len(actions) <= 25
    assert all(len(att["actions"]) <= 5 for att in posts[-1]["props"]["attachments"])
    assert all(a["id"].isalnum() and len(a["name"]) <= 40 for a in actions)
    assert len({a["id"] for a in actions}) == len(actions)


def test_msteams_limits() -> None:
    activities = msteams.render(adapted(msteams.CAPABILITIES))
    assert len(activities) >= 2
    for activity in activities:
        assert len(json.dumps(activity, ensure_ascii=False).encode("utf-8")) <= 28000
        card = activity["attachments"][0]["content"]
        for element in card["body"]:
            if element["type"] == "ActionSet":
                assert 1 <= len(element["actions"]) <= 6


def test_feishu_limits() -> None:
    bodies = feishu.render(adapted(feishu.CAPABILITIES))
    buttons = 0
    for body in bodies:
        assert body["msg_type"] == "interactive"
        assert len(body["content"].encode("utf-8")) <= 30 * 1024
        card = json.loads(body["content"])
        assert len(card["body"]["elements"]) <= 200
        for element in card["body"]["elements"]:
            if element["tag"] == "button":
                buttons += 1
                assert len(element["text"]["content"]) <= 40
            if element["tag"] == "markdown":
                assert "<script" not in element["content"]
    assert buttons <= 20
    assert "header" in json.loads(bodies[0]["content"])
    assert all("header" not in json.loads(b["content"]) for b in bodies[1:])


def test_feishu_escapes_text_and_keeps_non_http_links_readable() -> None:
    p = MessagePresentation(
        title="T",
        blocks=(TextBlock("a <b> & c"), ButtonsBlock((Button("Local", url="file:///etc/passwd"),))),
    )
    [card] = feishu.render_cards(p)
    assert card["body"]["elements"][0] == {"tag": "markdown", "content": "a &lt;b&gt; &amp; c"}
    assert card["body"]["elements"][1]["tag"] == "markdown"
    assert "Local" in card["body"]["elements"][1]["content"]


def test_feishu_title_only_card() -> None:
    [card] = feishu.render_cards(MessagePresentation(title="Only", tone="success"))
    assert card["header"]["template"] == "green"
    assert card["body"]["elements"] == [{"tag": "markdown", "content": ""}]


@pytest.mark.parametrize(
    "render",
    [
        discord.render,
        slack.render,
        telegram.render,
        msteams.render,
        feishu.render,
        line.render,
        lambda p, text=None: mattermost.render(p, text=text, callback_url="https://cb.test"),
    ],
)
def test_text_only_payload_renders(render: Any) -> None:
    messages = render(MessagePresentation(), text="Hello there")
    assert messages
    assert "Hello there" in json.dumps(messages)


def test_every_label_survives_somewhere_on_every_platform() -> None:
    """After adapt + render, every button label is either a native control or in text."""
    platforms = {
        "discord": discord.CAPABILITIES,
        "slack": slack.CAPABILITIES,
        "telegram": telegram.CAPABILITIES,
        "mattermost": mattermost.CAPABILITIES,
        "msteams": msteams.CAPABILITIES,
        "feishu": feishu.CAPABILITIES,
        "line": line.CAPABILITIES,
    }
    for name, capabilities in platforms.items():
        out = adapt(STRESS, capabilities)
        text = render_fallback_text(out)
        for block in STRESS.blocks:
            if isinstance(block, ButtonsBlock):
                for button in block.buttons:
                    limit = capabilities.limits.actions.max_label_length
                    assert button.label[:limit] in text, (name, button.label)

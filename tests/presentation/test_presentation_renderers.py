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

from .limits import (
    PLATFORMS,
    check_discord,
    check_feishu,
    check_line,
    check_mattermost,
    check_msteams,
    check_slack,
    check_telegram,
    shown_labels,
    visible_text,
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


def test_slack_limits() -> None:
    messages = slack.render(adapted(slack.CAPABILITIES))
    assert len(messages) >= 2  # more than 50 blocks: continued
    check_slack(messages)
    assert all(m["text"] and 1 <= len(m["blocks"]) <= slack.MAX_BLOCKS for m in messages)


def test_telegram_limits() -> None:
    messages = telegram.render(adapted(telegram.CAPABILITIES))
    assert len(messages) >= 2  # long text continues
    check_telegram(messages)
    assert "reply_markup" in messages[-1]


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


def test_discord_limits() -> None:
    messages = discord.render(adapted(discord.CAPABILITIES))
    check_discord(messages)
    rows = sum(1 for m in messages for c in m["components"][0]["components"] if c["type"] == 1)
    assert rows <= 5


def test_line_limits() -> None:
    bodies = line.render(adapted(line.CAPABILITIES))
    check_line(bodies)
    [flex] = [m for b in bodies for m in b["messages"] if m["type"] == "flex"]
    # Six selects take the whole shared budget of 4 here; check a lighter mix as well.
    light = MessagePresentation(blocks=(STRESS.blocks[3], STRESS.blocks[4]))
    [body] = line.render(adapt(light, line.CAPABILITIES))
    check_line([body])
    footer = body["messages"][0]["contents"]["footer"]["contents"]
    assert len(footer) == 3  # one of the four actions is the select
    assert len(flex["quickReply"]["items"]) <= 13


def test_line_without_controls_sends_text_messages() -> None:
    p = MessagePresentation(title="T", blocks=(TextBlock("x" * 12000),))
    bodies = line.render(adapt(p, line.CAPABILITIES))
    texts = [m["text"] for b in bodies for m in b["messages"]]
    assert all(m["type"] == "text" for b in bodies for m in b["messages"])
    assert all(len(t) <= 5000 for t in texts)


def test_mattermost_limits() -> None:
    posts = mattermost.render(adapted(mattermost.CAPABILITIES), callback_url="https://cb.test/mm")
    check_mattermost(posts)
    assert "props" in posts[-1]


def test_msteams_limits() -> None:
    activities = msteams.render(adapted(msteams.CAPABILITIES))
    assert len(activities) >= 2
    check_msteams(activities)


def test_feishu_limits() -> None:
    bodies = feishu.render(adapted(feishu.CAPABILITIES))
    check_feishu(bodies)
    buttons = sum(
        1
        for b in bodies
        for e in json.loads(b["content"])["body"]["elements"]
        if e["tag"] == "button"
    )
    assert buttons <= 20
    assert "header" in json.loads(bodies[0]["content"])


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


# --------------------------------------------------------------------------- size limits

LONG_URL = "https://links.example.test/" + "u" * 5000


def oversized() -> MessagePresentation:
    """Over every size limit at once: long, escape-heavy and astral text, many blocks,
    huge link and callback values, a huge title."""
    blocks: list[Any] = []
    for i in range(8):
        blocks.append(TextBlock(f"Para {i} " + '漢😀"\\<&>\x01 ' * 2500))
        blocks.append(ContextBlock(f"ctx {i} " + "ü" * 9000))
        blocks.append(
            ButtonsBlock(
                (
                    Button(f"Go {i}", value="v" * 6000),
                    Button(f"Link {i}", url=LONG_URL),
                    Button(f"Docs {i}", url="https://docs.example.test"),
                    Button(f"Cmd {i}", command="/" + "c" * 300),
                )
            )
        )
        blocks.extend(DividerBlock() for _ in range(30))
    blocks.append(SelectBlock(tuple(SelectOption(f"Opt {k}", f"o{k}") for k in range(30))))
    return MessagePresentation(title="Big title " + "標😀" * 5000, blocks=tuple(blocks))


OVERSIZED = oversized()


@pytest.mark.parametrize("platform", sorted(PLATFORMS))
def test_oversized_presentation_stays_within_limits_and_keeps_every_label(platform: str) -> None:
    capabilities, render, check = PLATFORMS[platform]
    messages = render(adapt(OVERSIZED, capabilities), text="Intro " + "😀" * 3000)
    check(messages)
    seen = visible_text(platform, messages)
    for label in shown_labels(OVERSIZED, capabilities):
        assert label in seen, (platform, label)


def test_line_bubble_over_30_kb_moves_leading_text_out_and_keeps_the_controls() -> None:
    blocks = tuple(TextBlock(f"Section {i}. " + "字😀" * 900) for i in range(12))
    p = MessagePresentation(
        title="Report",
        blocks=(*blocks, ButtonsBlock((Button("Ack", value="ack"), Button("Run", command="/run")))),
    )
    bodies = line.render(adapt(p, line.CAPABILITIES), text="Hello")
    check_line(bodies)
    assert len(bodies) >= 2  # more than 5 messages: further push requests
    messages = [m for b in bodies for m in b["messages"]]
    flex = messages[-1]
    footer = flex["contents"]["footer"]["contents"]
    assert [b["action"]["label"] for b in footer] == ["Ack", "Run"]
    assert messages[0] == {"type": "text", "text": "Hello"}
    texts = "".join(m["text"] for m in messages[1:-1])
    body = [c["text"] for c in flex["contents"]["body"]["contents"]]
    assert texts.startswith("Report\n\nSection 0.")
    # Authored order is kept: what left the bubble comes before what stayed in it.
    assert body[0].startswith("Section ") and not texts.endswith(body[0])
    joined = texts + "".join(body)
    assert all(f"Section {i}." in joined for i in range(12))
    assert flex["altText"] == "Report"


def test_line_small_bubble_is_unchanged() -> None:
    p = MessagePresentation(title="T", blocks=(ButtonsBlock((Button("Ok", value="ok"),)),))
    [body] = line.render(adapt(p, line.CAPABILITIES))
    [flex] = body["messages"]
    assert flex["contents"]["body"]["contents"][0]["text"] == "T"


def test_line_link_over_1000_characters_reads_as_text() -> None:
    p = MessagePresentation(
        blocks=(ButtonsBlock((Button("Ok", value="ok"), Button("Spec", url=LONG_URL))),)
    )
    [body] = line.render(adapt(p, line.CAPABILITIES))
    check_line([body])
    [flex] = body["messages"]
    assert [b["action"]["label"] for b in flex["contents"]["footer"]["contents"]] == ["Ok"]
    assert flex["contents"]["body"]["contents"][0]["text"] == f"- Spec: {LONG_URL}"


def test_line_alt_text_is_cut_to_1500() -> None:
    p = MessagePresentation(
        blocks=(TextBlock("a" * 1999), ButtonsBlock((Button("Ok", value="ok"),)))
    )
    [body] = line.render(adapt(p, line.CAPABILITIES))
    assert body["messages"][-1]["altText"] == "a" * 1500


def test_discord_link_over_512_characters_reads_as_text() -> None:
    url = LONG_URL[:600]
    p = MessagePresentation(
        blocks=(ButtonsBlock((Button("Ok", value="ok"), Button("L", url=url))),)
    )
    [message] = discord.render(adapt(p, discord.CAPABILITIES))
    check_discord([message])
    children = message["components"][0]["components"]
    assert [b["label"] for b in children[0]["components"]] == ["Ok"]
    assert children[1]["content"] == f"- L: {url}"


def test_slack_link_over_3000_characters_reads_as_text() -> None:
    p = MessagePresentation(
        blocks=(ButtonsBlock((Button("Ok", value="ok"), Button("L", url=LONG_URL))),)
    )
    [message] = slack.render(adapt(p, slack.CAPABILITIES))
    check_slack([message])
    actions, *sections = message["blocks"]
    assert [e["text"]["text"] for e in actions["elements"]] == ["Ok"]
    assert sections[0]["text"]["text"].startswith("- L: https://links.example.test/")


def test_telegram_keyboard_holds_at_most_100_buttons() -> None:
    options = tuple(SelectOption(f"o{k}", f"v{k}") for k in range(100))
    p = MessagePresentation(blocks=(SelectBlock(options), SelectBlock(options)))
    messages = telegram.render(adapt(p, telegram.CAPABILITIES))
    check_telegram(messages)
    keyboard = messages[-1]["reply_markup"]["inline_keyboard"]
    assert sum(len(row) for row in keyboard) == 100
    assert messages[-1]["text"].count("- o99") == 2  # every label stays in the text


def test_msteams_huge_callback_value_reads_as_text() -> None:
    p = MessagePresentation(
        blocks=(ButtonsBlock((Button("Ok", value="ok"), Button("Big", value="x" * 5000))),)
    )
    [activity] = msteams.render(adapt(p, msteams.CAPABILITIES))
    check_msteams([activity])
    body = activity["attachments"][0]["content"]["body"]
    assert [a["title"] for a in body[0]["actions"]] == ["Ok"]
    assert body[1]["text"] == "- Big"  # the callback value is never shown


def test_feishu_huge_title_keeps_a_header_prefix_and_reads_in_full() -> None:
    title = "標" * 3000
    bodies = feishu.render(adapt(MessagePresentation(title=title), feishu.CAPABILITIES))
    check_feishu(bodies)
    cards = [json.loads(b["content"]) for b in bodies]
    assert cards[0]["header"]["title"]["content"].endswith("…")
    assert "".join(e["content"] for c in cards for e in c["body"]["elements"]) == title


def test_feishu_splits_at_200_elements() -> None:
    p = MessagePresentation(blocks=tuple(DividerBlock() for _ in range(450)))
    bodies = feishu.render(adapt(p, feishu.CAPABILITIES))
    check_feishu(bodies)
    assert [len(json.loads(b["content"])["body"]["elements"]) for b in bodies] == [200, 200, 50]

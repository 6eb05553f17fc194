"""A text block longer than one section's limit is split across several sections /
components up to the platform's message limit instead of being cut at one section's."""

from __future__ import annotations

from channelkit.platforms.discord import renderer as discord
from channelkit.platforms.line import renderer as line
from channelkit.platforms.slack import renderer as slack
from channelkit.presentation import (
    Button,
    ButtonsBlock,
    ContextBlock,
    MessagePresentation,
    PresentationCapabilities,
    PresentationLimits,
    TextBlock,
    TextLimits,
    adapt,
    render_fallback_text,
)

from .limits import check_discord, check_line, check_slack

LONG = "".join(f"line {n:04d} of the report\n" for n in range(240))  # 5,760 characters


def test_slack_keeps_all_5000_characters_across_sections() -> None:
    text = LONG[:5000]
    adapted = adapt(MessagePresentation(blocks=(TextBlock(text),)), slack.CAPABILITIES)
    messages = slack.render(adapted)
    check_slack(messages)
    sections = [b["text"]["text"] for b in messages[0]["blocks"] if b["type"] == "section"]
    assert len(sections) == 2
    assert "".join(sections) == text
    assert render_fallback_text(adapted) == text  # continuation fragments join back


def test_line_keeps_a_long_text_block_in_the_bubble_up_to_5000() -> None:
    presentation = MessagePresentation(
        blocks=(TextBlock(LONG), ButtonsBlock((Button("OK", value="ok"),)))
    )
    adapted = adapt(presentation, line.CAPABILITIES)
    bodies = line.render(adapted)
    check_line(bodies)
    [flex] = [m for b in bodies for m in b["messages"] if m["type"] == "flex"]
    texts = [c["text"] for c in flex["contents"]["body"]["contents"] if c["type"] == "text"]
    assert "".join(texts) == LONG[:5000]
    assert len(texts) == 3


def test_discord_splits_context_up_to_4000() -> None:
    adapted = adapt(MessagePresentation(blocks=(ContextBlock(LONG),)), discord.CAPABILITIES)
    assert [len(b.text) for b in adapted.blocks] == [1992, 1992, 16]  # type: ignore[union-attr]
    assert all(b.continuation for b in adapted.blocks[1:])  # type: ignore[union-attr]
    check_discord(discord.render(adapted))


def test_without_a_message_limit_text_is_cut_at_one_block() -> None:
    capabilities = PresentationCapabilities(
        limits=PresentationLimits(text=TextLimits(max_length=10))
    )
    out = adapt(MessagePresentation(blocks=(TextBlock("0123456789abc"),)), capabilities)
    assert out.blocks == (TextBlock("0123456789"),)
    wider = PresentationCapabilities(
        limits=PresentationLimits(text=TextLimits(max_length=10, max_message_length=12))
    )
    out = adapt(MessagePresentation(blocks=(TextBlock("0123456789abc"),)), wider)
    assert out.blocks == (TextBlock("0123456789"), TextBlock("ab", continuation=True))
    assert adapt(out, wider) == out

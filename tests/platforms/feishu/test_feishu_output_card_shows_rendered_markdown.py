"""The Feishu output card shows the agent's Markdown as Feishu card Markdown: tables are
native, literal Markdown characters are character references (an underscore inside a word
stays as written), and while the card runs its content is a preview (an open bold span
closed, never a raw ``**``)."""

from __future__ import annotations

from typing import Any

from channelkit.platforms.feishu import cards

ANSWER = "## Result\n\n| step | time |\n|---|--:|\n| test | 3 s |\n\nsnake_case is **green and"


def _content(card: dict[str, Any]) -> str:
    [element] = [e for e in card["body"]["elements"] if e.get("element_id") == "ck_content"]
    return str(element["content"])


def test_a_running_card_shows_a_preview_with_a_native_table() -> None:
    content = _content(cards.output_card(ANSWER, "running", "en"))
    assert content == (
        "## Result\n\n| step | time |\n| --- | --: |\n| test | 3 s |\n\n"
        "snake_case is **green and**"
    )


def test_a_finished_card_shows_the_final_rendering() -> None:
    content = _content(cards.output_card(ANSWER + " passing**.", "completed", "en"))
    assert content.endswith("snake_case is **green and passing**.")
    # a bold span the answer never closed is literal text in the final card
    unclosed = _content(cards.output_card(ANSWER, "completed", "en"))
    assert unclosed.endswith("snake_case is &#42;&#42;green and")


def test_a_plain_text_is_shown_as_written() -> None:
    assert _content(cards.output_card("Working on it ", "running", "en")) == "Working on it "

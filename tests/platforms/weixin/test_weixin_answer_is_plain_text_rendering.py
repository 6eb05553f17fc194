"""Weixin shows Markdown verbatim, so the agent's answer is sent as its plain rendering:
no ``**`` or fences, links as ``text (url)``, tables aligned, and a long answer split at
block boundaries within 4,000 characters (a code block split between lines)."""

from __future__ import annotations

from channelkit.platforms.weixin.adapter import MAX_TEXT_CHARS, plain_parts


def test_markdown_becomes_plain_text() -> None:
    answer = (
        "## Status\n\n**All** services are *up*, see [the board](https://ex.test/b).\n\n"
        "| svc | ok |\n|---|---|\n| api | yes |\n\n```sh\nmake deploy\n```"
    )
    assert plain_parts(answer) == [
        "Status\n\nAll services are up, see the board (https://ex.test/b).\n\n"
        "svc | ok\n----+----\napi | yes\n\nmake deploy"
    ]


def test_a_plain_text_is_sent_as_written() -> None:
    assert plain_parts("Queued, 2 ahead.  ") == ["Queued, 2 ahead.  "]
    assert plain_parts("") == [" "]


def test_a_long_answer_is_split_at_block_boundaries_within_the_limit() -> None:
    paragraphs = [f"Paragraph {i}: " + "words " * 150 for i in range(12)]
    code = "```\n" + "\n".join(f"line {i}" for i in range(900)) + "\n```"
    parts = plain_parts("\n\n".join(paragraphs) + "\n\n" + code)
    assert len(parts) > 3 and all(len(p) <= MAX_TEXT_CHARS for p in parts)
    assert all(p.startswith(("Paragraph ", "line ")) for p in parts)
    assert "\n".join(parts).count("line ") == 900

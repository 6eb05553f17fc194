"""A preview of a text cut anywhere shows formatting, never raw Markdown markers: every
prefix of each golden answer renders for Telegram without ``**`` or a fence."""

from __future__ import annotations

import pytest
from channelkit.markdown import Dialect, close_open_markdown, parse, render

from tests.markdown.golden_vectors import GOLDEN, cases
from tests.markdown.markdown_checks import telegram_errors


@pytest.mark.parametrize(
    ("text", "closed"),
    [
        ("some **bold", "some **bold**"),
        ("some **bold *and it", "some **bold *and it***"),
        ("a `code sp", "a `code sp`"),
        ("```py\nx = 1", "```py\nx = 1\n```"),
        ("~~old", "~~old~~"),
        ("[docs](https://e.x/pa", "[docs](https://e.x/pa)"),
        ("done **", "done"),
        ("snake_case_na", "snake_case_na"),
        ("2 * 3", "2 * 3"),
        ("para one\n\nsee **this", "para one\n\nsee **this**"),
        ("**closed** fine", "**closed** fine"),
    ],
)
def test_open_constructs_are_closed(text: str, closed: str) -> None:
    assert close_open_markdown(text) == closed


def _prefixes(case: str) -> list[str]:
    text = (GOLDEN / case / "input.md").read_text(encoding="utf-8")
    return [text[:end] for end in range(1, len(text) + 1)]


@pytest.mark.parametrize("case", [c for c in cases() if "stream" not in c])
def test_no_prefix_of_an_answer_shows_raw_bold_or_fence_markers(case: str) -> None:
    final = render((GOLDEN / case / "input.md").read_text(encoding="utf-8"), Dialect.TELEGRAM)
    markers = [m for m in ("**", "```") if not any(m in part for part in final)]
    for prefix in _prefixes(case):
        for part in render(prefix, Dialect.TELEGRAM, preview=True):
            assert telegram_errors(part) == [], (prefix, part)
            for marker in markers:  # (a marker the final message shows is content)
                assert marker not in part, (prefix, part)


def test_a_long_streams_preview_parses_as_a_whole_preview_would() -> None:
    # the settled head of a long stream is parsed once and kept: the result is the same
    texts = [(GOLDEN / c / "input.md").read_text(encoding="utf-8") for c in cases()]
    corpus = "\n\n".join(t.rstrip("\n") for t in texts) * 3
    assert len(corpus) > 5_000
    for end in range(1, len(corpus) + 1, 37):
        prefix = corpus[:end]
        assert parse(prefix, preview=True) == parse(close_open_markdown(prefix)), prefix[-60:]

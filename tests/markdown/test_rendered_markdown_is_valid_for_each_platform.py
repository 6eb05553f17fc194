"""For any text an agent may write (hypothesis), each platform's rendering is valid:
Telegram HTML has only Telegram's tags, balanced, with ``&<>`` escaped; Slack mrkdwn
never has an unescaped ``<`` or ``<!``; every split part is within the limit and valid
on its own; no cut splits a grapheme cluster."""

from __future__ import annotations

import itertools

import pytest
from channelkit.markdown import Dialect, looks_plain, render
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.markdown.markdown_checks import (
    cut_is_clean,
    fences_balanced,
    slack_errors,
    telegram_errors,
    telegram_text,
)

_PIECES = [
    "**",
    "*",
    "_",
    "__",
    "~~",
    "`",
    "```",
    "```py\n",
    "~~~\n",
    "\n",
    "\n\n",
    "# ",
    "### ",
    "- ",
    "  - ",
    "1. ",
    "> ",
    "> > ",
    "|",
    "---\n",
    "| a | b |\n|---|--:|\n| 1 | **2** |\n",
    "[x](https://e.x/?a=1&b=2)",
    "<https://e.x>",
    "](",
    "[",
    "<",
    ">",
    "&",
    "<!here>",
    "<!channel>",
    "&amp;",
    "e\u0301",
    "\u200d",
    "\ufe0f",
    "👩‍💻",
    "🇩🇪🇨🇳",
    "👍🏽",
    "中文字符",
    "word ",
    "snake_case",
    "\\*",
    "x" * 70,
    "y " * 40,
]
_TEXT = st.lists(st.one_of(st.sampled_from(_PIECES), st.text(max_size=8)), max_size=40).map("".join)
_CLUSTERS = ["e\u0301", "👩‍💻", "🇩🇪", "👍🏽", "❤\ufe0f", "字", "a"]
_SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_SETTINGS
@given(text=_TEXT, preview=st.booleans())
def test_telegram_output_is_balanced_html_with_only_allowed_tags(text: str, preview: bool) -> None:
    for part in render(text, Dialect.TELEGRAM, preview=preview):
        assert telegram_errors(part) == [], part


@_SETTINGS
@given(text=_TEXT, preview=st.booleans())
def test_slack_output_never_has_an_unescaped_angle_bracket_or_mass_mention(
    text: str, preview: bool
) -> None:
    for part in render(text, Dialect.SLACK, preview=preview):
        assert slack_errors(part) == [], part


@_SETTINGS
@given(
    text=_TEXT,
    limit=st.integers(min_value=64, max_value=400),
    dialect=st.sampled_from(list(Dialect)),
)
# found by random search: literal triple backticks in text (Slack would open a code
# block at them) and a code block opened right after a list bullet
@example(text="**```py\n- ```", limit=64, dialect=Dialect.SLACK)
def test_every_split_part_is_within_the_limit_and_valid_on_its_own(
    text: str, limit: int, dialect: Dialect
) -> None:
    parts = render(text, dialect, limit=limit)
    for part in parts:
        assert len(part) <= limit
        if dialect is Dialect.TELEGRAM:
            assert telegram_errors(part) == [], part
        elif dialect is Dialect.SLACK:
            assert slack_errors(part) == [], part
        if dialect not in (Dialect.PLAIN, Dialect.TELEGRAM):  # (HTML: backticks are text)
            assert fences_balanced(part), part


@_SETTINGS
@given(
    text=st.lists(st.sampled_from(_CLUSTERS), max_size=300).map("".join),
    limit=st.integers(min_value=64, max_value=120),
    dialect=st.sampled_from([Dialect.PLAIN, Dialect.TELEGRAM]),
)
def test_no_cut_splits_a_grapheme_cluster(text: str, limit: int, dialect: Dialect) -> None:
    parts = render(text, dialect, limit=limit)
    texts = [telegram_text(p) if dialect is Dialect.TELEGRAM else p for p in parts]
    for before, after in itertools.pairwise(texts):
        assert cut_is_clean(before, after), (before[-3:], after[:3])
    assert "".join(texts) == text  # one paragraph of one word: nothing lost, nothing added


def test_a_long_code_block_is_split_between_lines_and_every_part_reopens_the_fence() -> None:
    code = "\n".join(f"print({i})  # <{i}>" for i in range(200))
    parts = render(f"```python\n{code}\n```", Dialect.TELEGRAM, limit=500)
    assert len(parts) > 5
    shown = []
    for part in parts:
        assert len(part) <= 500 and telegram_errors(part) == []
        assert part.startswith('<pre><code class="language-python">')
        assert part.endswith("</code></pre>")
        shown.append(telegram_text(part))
    assert "\n".join(shown) == code
    md_parts = render(f"```python\n{code}\n```", Dialect.DISCORD, limit=500)
    assert all(p.startswith("```python\n") and p.endswith("\n```") for p in md_parts)


def test_a_long_paragraph_is_split_at_words_and_keeps_every_word_and_its_format() -> None:
    words = [f"**w{i}**" if i % 7 == 0 else f"w{i}" for i in range(600)]
    parts = render(" ".join(words), Dialect.TELEGRAM, limit=300)
    assert len(parts) > 3
    assert all(len(p) <= 300 and telegram_errors(p) == [] for p in parts)
    assert " ".join(telegram_text(p) for p in parts).split() == [f"w{i}" for i in range(600)]
    assert "<b>w7</b>" in "".join(parts)


def test_splitting_prefers_block_boundaries() -> None:
    text = "\n\n".join(f"Paragraph {i} " + "word " * 30 for i in range(10))
    for part in render(text, Dialect.SLACK, limit=400):
        assert part.startswith("Paragraph ") and part.rstrip().endswith("word")


@pytest.mark.parametrize(
    ("argument", "value", "message"),
    [
        ("dialect", {"dialect": "myspace"}, "dialect: expected one of telegram"),
        ("limit", {"limit": 10}, "limit: expected an int of at least 64"),
        ("table", {"table": "html"}, "table: expected one of auto"),
        ("table_width", {"table_width": 0}, "table_width: expected an int of at least 8"),
    ],
)
def test_a_bad_argument_is_named(argument: str, value: dict[str, object], message: str) -> None:
    kwargs: dict[str, object] = {"dialect": "telegram", **value}
    dialect = kwargs.pop("dialect")
    with pytest.raises(ValueError, match=message):
        render("**x**", dialect, **kwargs)  # type: ignore[arg-type]


@_SETTINGS
@given(text=st.text(alphabet="ab 1.-+*_#>|[]<&=\n\t:()😀中", max_size=40))
@example(text=" \t1")  # found by random search: a tab after spaces is indented code
def test_a_text_that_looks_plain_renders_as_itself_in_every_dialect(text: str) -> None:
    if not looks_plain(text):
        return
    for dialect in Dialect:
        shown = "\n".join(render(text, dialect))
        assert shown.split() == text.split(), dialect  # (only whitespace may differ)


def test_literal_triple_backticks_in_slack_text_open_no_code_block() -> None:
    # an unclosed run of backticks is literal text in Markdown
    shown = "\n".join(render("start a block with ```py and go on", Dialect.SLACK))
    assert "```" not in shown
    assert shown.replace("\u200b", "") == "start a block with ```py and go on"

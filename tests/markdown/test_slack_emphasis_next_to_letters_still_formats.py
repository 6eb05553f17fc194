"""Slack formats ``*bold*``, ``_italic_`` and ``~strike~`` only at a word boundary: markers
that touch a letter (Chinese text has no spaces; ``foo**bar**baz``) would show as literal
asterisks. The renderer puts a zero-width space between such a marker and the letter."""

from __future__ import annotations

import pytest
from channelkit.markdown import Dialect, render

ZWSP = "\u200b"


@pytest.mark.parametrize(
    ("markdown", "slack"),
    [
        ("发布到**测试环境**，然后", f"发布到{ZWSP}*测试环境*{ZWSP}，然后"),
        ("foo**bar**baz", f"foo{ZWSP}*bar*{ZWSP}baz"),
        ("x ~~gone~~y", f"x ~gone~{ZWSP}y"),
        ("是*斜体*吗", f"是{ZWSP}_斜体_{ZWSP}吗"),
    ],
)
def test_a_marker_touching_a_letter_gets_a_zero_width_boundary(markdown: str, slack: str) -> None:
    assert render(markdown, Dialect.SLACK) == [slack]


@pytest.mark.parametrize(
    "markdown", ["a **b** c", "**x**", "(**x**)", "**x**, y", "- **item** one"]
)
def test_a_marker_at_a_space_or_ascii_punctuation_is_left_alone(markdown: str) -> None:
    (out,) = render(markdown, Dialect.SLACK)
    assert ZWSP not in out and "*" in out


def test_other_dialects_never_get_the_boundary() -> None:
    for dialect in Dialect:
        if dialect is not Dialect.SLACK:
            assert ZWSP not in "".join(render("发布到**测试环境**，然后", dialect))

"""Text limits in characters, UTF-8 bytes and UTF-16 units."""

from __future__ import annotations

import pytest
from channelkit.presentation.text import measure, split_text, truncate

EMOJI = "😀"  # 1 code point, 4 UTF-8 bytes, 2 UTF-16 units
CJK = "漢"  # 1 code point, 3 UTF-8 bytes, 1 UTF-16 unit


def test_measure() -> None:
    text = f"a{EMOJI}{CJK}"
    assert measure(text, "characters") == 3
    assert measure(text, "utf8-bytes") == 1 + 4 + 3
    assert measure(text, "utf16-units") == 1 + 2 + 1


@pytest.mark.parametrize(
    ("text", "limit", "encoding", "expected"),
    [
        ("abc😀def", 6, "utf8-bytes", "abc"),
        ("abc😀def", 7, "utf8-bytes", "abc😀"),
        ("abc😀def", 4, "utf16-units", "abc"),
        ("abc😀def", 5, "utf16-units", "abc😀"),
        ("😀", 1, "utf16-units", ""),
        ("😀😀", 3, "utf16-units", "😀"),
        ("漢字かな", 2, "characters", "漢字"),
        ("漢字かな", 7, "utf8-bytes", "漢字"),
        ("漢字かな", 3, "utf16-units", "漢字か"),
        ("😀😀😀", 2, "characters", "😀😀"),
        ("short", 5, "characters", "short"),
        ("short", None, "utf8-bytes", "short"),
    ],
)
def test_truncate_never_splits_a_code_point_or_pair(
    text: str, limit: int | None, encoding: str, expected: str
) -> None:
    out = truncate(text, limit, encoding)  # type: ignore[arg-type]
    assert out == expected
    out.encode("utf-8")  # raises on a lone surrogate


@pytest.mark.parametrize("encoding", ["characters", "utf8-bytes", "utf16-units"])
def test_split_round_trips_and_respects_limit(encoding: str) -> None:
    text = "Actions:\n- 😀 Deploy 漢字\n- Roll back\n- " + "x" * 30
    parts = split_text(text, 12, encoding)  # type: ignore[arg-type]
    assert "".join(parts) == text
    assert all(measure(p, encoding) <= 12 for p in parts)  # type: ignore[arg-type]
    assert parts[0] == "Actions:\n"  # cut right after a newline when possible


def test_split_drops_only_a_code_point_wider_than_the_limit() -> None:
    assert split_text("a😀b", 1, "utf16-units") == ["a", "b"]

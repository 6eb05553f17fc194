"""Character helpers: display width (East Asian wide characters take two columns) and
grapheme-cluster boundaries (approximate: never between a base and a combining mark,
a joiner, a variation selector, a skin-tone modifier or inside a regional-indicator
pair)."""

from __future__ import annotations

import unicodedata

__all__ = ["display_width", "is_boundary", "safe_cut"]

_ZWJ = "\u200d"


def _extends(char: str) -> bool:
    """True for a character that belongs to the cluster before it."""
    code = ord(char)
    if char == _ZWJ or 0xFE00 <= code <= 0xFE0F or 0xE0100 <= code <= 0xE01EF:
        return True
    if 0x1F3FB <= code <= 0x1F3FF or 0xE0020 <= code <= 0xE007F:
        return True
    return unicodedata.category(char) in ("Mn", "Me", "Mc")


def _regional(char: str) -> bool:
    return 0x1F1E6 <= ord(char) <= 0x1F1FF


def is_boundary(text: str, index: int) -> bool:
    """True when ``text`` may be cut before ``text[index]`` without splitting a
    grapheme cluster (0 and ``len(text)`` always may)."""
    if index <= 0 or index >= len(text):
        return True
    before, char = text[index - 1], text[index]
    if before == "\r" and char == "\n":
        return False
    if _extends(char) or before == _ZWJ:
        return False
    if _regional(before) and _regional(char):
        count = 0
        j = index - 1
        while j >= 0 and _regional(text[j]):
            count += 1
            j -= 1
        return count % 2 == 0
    return True


def safe_cut(text: str, index: int) -> int:
    """The largest grapheme boundary of ``text`` at or before ``index`` (above 0 when
    one exists; a first cluster longer than ``index`` is cut after it)."""
    index = max(0, min(index, len(text)))
    cut = index
    while cut > 0 and not is_boundary(text, cut):
        cut -= 1
    if cut == 0 and index > 0:
        cut = index
        while cut < len(text) and not is_boundary(text, cut):
            cut += 1
    return cut


def display_width(text: str) -> int:
    """Columns ``text`` takes in a monospace font (wide and full-width characters: 2,
    combining marks and joiners: 0)."""
    width = 0
    for char in text:
        if _extends(char):
            continue
        width += 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1
    return width

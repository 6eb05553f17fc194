"""Text measuring, truncating and splitting in characters, UTF-8 bytes or UTF-16 units.

"characters" means Unicode code points. Cuts fall on grapheme-cluster boundaries
(`channelkit.presentation.graphemes`): an emoji with its modifier, a ZWJ sequence,
a flag, a keycap or a letter with its combining marks is kept whole or left out whole.
Only a single cluster wider than the whole limit (possible only with limits smaller
than one cluster) is cut, at a code point, so that something fits; a code point and a
UTF-16 surrogate pair are never split.
"""

from __future__ import annotations

from channelkit.presentation.capabilities import TextEncoding
from channelkit.presentation.graphemes import boundary_at_or_before

__all__ = ["measure", "split_text", "truncate", "truncate_chars"]


def measure(text: str, encoding: TextEncoding = "characters") -> int:
    """Length of ``text`` in ``encoding`` units."""
    if encoding == "utf8-bytes":
        if text.isascii():
            return len(text)
        return len(text.encode("utf-8", "surrogatepass"))
    if encoding == "utf16-units":
        if text.isascii():
            return len(text)
        return len(text.encode("utf-16-le", "surrogatepass")) // 2
    return len(text)


def truncate_chars(text: str, limit: int | None) -> str:
    """Keep at most ``limit`` code points, cut at a grapheme boundary (None = unlimited)."""
    return truncate(text, limit, "characters")


def _code_point_prefix(text: str, limit: int, encoding: TextEncoding) -> int:
    """How many leading code points fit in ``limit`` units (never half a pair)."""
    if encoding == "characters":
        return min(limit, len(text))
    if len(text) * (4 if encoding == "utf8-bytes" else 2) <= limit:
        return len(text)  # fast path: cannot exceed
    # Every code point takes at least one unit, so the answer lies within the first
    # ``limit`` code points; one more keeps the cut (and a surrogate pair at the edge)
    # exactly as on the whole text, while splitting long text stays linear.
    head = text[: limit + 1]
    if encoding == "utf8-bytes":
        data = head.encode("utf-8", "surrogatepass")
        if len(data) <= limit:
            return len(head)
        # Drop an incomplete trailing sequence: back off over continuation bytes.
        end = limit
        while end > 0 and (data[end] & 0xC0) == 0x80:
            end -= 1
        return len(data[:end].decode("utf-8", "surrogatepass"))
    data = head.encode("utf-16-le", "surrogatepass")
    if len(data) <= 2 * limit:
        return len(head)
    end = 2 * limit
    last = int.from_bytes(data[end - 2 : end], "little")
    if 0xD800 <= last <= 0xDBFF:  # a high surrogate whose partner was cut off
        end -= 2
    return len(data[:end].decode("utf-16-le", "surrogatepass"))


def truncate(text: str, limit: int | None, encoding: TextEncoding = "characters") -> str:
    """Longest prefix of whole grapheme clusters whose length in ``encoding`` is <= limit.

    When not even the first cluster fits, its longest code-point prefix that fits.
    """
    if limit is None:
        return text
    if encoding == "characters" and len(text) <= limit:
        return text
    count = _code_point_prefix(text, limit, encoding)
    if count >= len(text):
        return text
    cut = boundary_at_or_before(text, count)
    return text[: cut or count]


def split_text(text: str, limit: int | None, encoding: TextEncoding = "characters") -> list[str]:
    """Split ``text`` into fragments each within ``limit``; joined they give ``text``
    back, except that a single code point wider than the limit is dropped.

    A cut prefers the position right after the last newline of a fragment, and
    otherwise falls on a grapheme-cluster boundary (see `truncate()`).
    """
    if limit is None or measure(text, encoding) <= limit:
        return [text]
    parts: list[str] = []
    rest = text
    while rest:
        head = truncate(rest, limit, encoding)
        if not head:  # one code point wider than the whole limit: drop it
            rest = rest[1:]
            continue
        if len(head) < len(rest):
            newline = head.rfind("\n")
            if newline > 0:
                head = head[: newline + 1]
        parts.append(head)
        rest = rest[len(head) :]
    return parts

"""Text measuring, truncating and splitting in characters, UTF-8 bytes or UTF-16 units.

"characters" means Unicode code points. Nothing here ever splits a code point, and
the UTF-16 functions never split a surrogate pair.
"""

from __future__ import annotations

from channelkit.presentation.capabilities import TextEncoding

__all__ = ["measure", "split_text", "truncate", "truncate_chars"]


def measure(text: str, encoding: TextEncoding = "characters") -> int:
    """Length of ``text`` in ``encoding`` units."""
    if encoding == "utf8-bytes":
        return len(text.encode("utf-8", "surrogatepass"))
    if encoding == "utf16-units":
        return len(text.encode("utf-16-le", "surrogatepass")) // 2
    return len(text)


def truncate_chars(text: str, limit: int | None) -> str:
    """Keep the first ``limit`` code points (None = unlimited)."""
    if limit is None or len(text) <= limit:
        return text
    return text[:limit]


def truncate(text: str, limit: int | None, encoding: TextEncoding = "characters") -> str:
    """Longest prefix of whole code points whose length in ``encoding`` is <= limit."""
    if limit is None:
        return text
    if encoding == "characters":
        return text[:limit] if len(text) > limit else text
    if len(text) * (4 if encoding == "utf8-bytes" else 2) <= limit:
        return text  # fast path: cannot exceed
    # Every code point takes at least one unit, so the answer lies within the first
    # ``limit`` code points; one more keeps the cut (and a surrogate pair at the edge)
    # exactly as on the whole text, while splitting long text stays linear.
    text = text[: limit + 1]
    if encoding == "utf8-bytes":
        data = text.encode("utf-8", "surrogatepass")
        if len(data) <= limit:
            return text
        # Drop an incomplete trailing sequence: back off over continuation bytes.
        end = limit
        while end > 0 and (data[end] & 0xC0) == 0x80:
            end -= 1
        return data[:end].decode("utf-8", "surrogatepass")
    data = text.encode("utf-16-le", "surrogatepass")
    if len(data) <= 2 * limit:
        return text
    end = 2 * limit
    last = int.from_bytes(data[end - 2 : end], "little")
    if 0xD800 <= last <= 0xDBFF:  # a high surrogate whose partner was cut off
        end -= 2
    return data[:end].decode("utf-16-le", "surrogatepass")


def split_text(text: str, limit: int | None, encoding: TextEncoding = "characters") -> list[str]:
    """Split ``text`` into fragments each within ``limit``; joined they give ``text``
    back, except that a single code point wider than the limit is dropped.

    A cut prefers the position right after the last newline of a fragment.
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

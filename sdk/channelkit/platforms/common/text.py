"""Bounding of visible output text."""

from __future__ import annotations

__all__ = ["MAX_VISIBLE_CHARS", "TRUNCATION_MARKER", "bound_text"]

#: Visible output kept per output segment.
MAX_VISIBLE_CHARS = 20_000
#: Put in front of the kept tail when older output was dropped.
TRUNCATION_MARKER = "[Earlier output truncated]\n"


def bound_text(
    text: str, max_chars: int = MAX_VISIBLE_CHARS, marker: str = TRUNCATION_MARKER
) -> str:
    """Return ``text`` if it fits in ``max_chars``; otherwise ``marker`` + the newest tail.

    The result never exceeds ``max_chars`` characters (marker included). If the text
    already starts with the marker (it was bounded before), the marker is not repeated.
    """
    if len(text) <= max_chars:
        return text
    if len(marker) >= max_chars:
        return text[-max_chars:]
    body = text[len(marker) :] if text.startswith(marker) else text
    keep = max_chars - len(marker)
    return marker + body[-keep:]

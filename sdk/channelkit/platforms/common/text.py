"""Bounding of visible output text."""

from __future__ import annotations

from channelkit.core.catalog import Messages, en

__all__ = [
    "MAX_VISIBLE_CHARS",
    "TRUNCATED_TEXT",
    "TRUNCATION_MARKER",
    "bound_text",
    "truncation_marker",
]

#: Visible output kept per output segment.
MAX_VISIBLE_CHARS = 20_000
#: The catalog text of the truncation marker (English).
TRUNCATED_TEXT = en("marker.truncated")
#: Put in front of the kept tail when older output was dropped (English).
TRUNCATION_MARKER = TRUNCATED_TEXT + "\n"


def truncation_marker(texts: Messages) -> str:
    """The truncation marker in the language of ``texts`` (`TRUNCATION_MARKER` in
    English)."""
    return texts.text(TRUNCATED_TEXT) + "\n"


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

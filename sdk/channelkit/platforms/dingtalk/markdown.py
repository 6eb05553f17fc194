"""Small text helpers for DingTalk cards and Markdown messages."""

from __future__ import annotations

import re

__all__ = ["IMAGE_PENDING", "sanitize_image_markers"]

#: What an unresolved local image marker becomes in visible text.
IMAGE_PENDING = "[Image pending]"

_COMPLETE = re.compile(r"\[IMAGE:[^\]\n]*\]")
_PARTIAL = re.compile(r"\[IMAGE:[^\]\n]*$")


def sanitize_image_markers(text: str) -> str:
    """Replace local image markers (``[IMAGE: /path]``, also a trailing partial one).

    The adapter does not upload images, so a marker would only expose a local path.
    """
    if "[IMAGE:" not in text:
        return text
    return _PARTIAL.sub(IMAGE_PENDING, _COMPLETE.sub(IMAGE_PENDING, text))

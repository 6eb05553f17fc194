"""Helpers shared by the platform renderers (``channelkit.platforms.<name>.renderer``).

They hold the logic that is the same on every platform: the callback payload a card
button carries, the wire size of a JSON payload, greedy packing of elements under a
size limit, splitting text into non-blank message fragments, and setting aside the
buttons a platform cannot render natively so their labels move to text.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from channelkit.presentation.capabilities import TextEncoding
from channelkit.presentation.links import is_safe_link
from channelkit.presentation.model import Button
from channelkit.presentation.text import split_text

__all__ = [
    "callback_payload",
    "json_utf16_size",
    "json_wire_size",
    "pack_by_size",
    "partition_buttons",
    "partition_link_buttons",
    "split_nonblank",
]

T = TypeVar("T")


def callback_payload(button: Button) -> dict[str, str] | None:
    """What a card button posts back: ``{"command": ...}`` for a command button,
    ``{"value": ...}`` for a callback value, None for a link-only button."""
    if button.command is not None:
        return {"command": button.command}
    if button.value is not None:
        return {"value": button.value}
    return None


def json_wire_size(value: Any) -> int:
    """Bytes of ``value`` serialized as the HTTP layer sends it (``json.dumps`` defaults:
    ASCII with ``\\uXXXX`` escapes, ``", "`` separators).

    This is an upper bound of every other serialization a platform could measure
    (compact, UTF-8): escaped non-ASCII costs 6 bytes per UTF-16 unit, more than UTF-8.
    """
    return len(json.dumps(value))


def json_utf16_size(value: Any) -> int:
    """Bytes of ``value`` serialized as compact JSON and encoded as UTF-16 (the measure
    MS Teams documents for its message size limit)."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    if text.isascii():
        return 2 * len(text)
    return len(text.encode("utf-16-le", "surrogatepass"))


def pack_by_size(
    items: Sequence[T],
    sizes: Sequence[int],
    limit: int,
    overhead: int,
    *,
    max_items: int | None = None,
) -> list[list[T]]:
    """Group ``items`` in order so that ``overhead`` plus the ``sizes`` of each group
    stays within ``limit`` (and a group holds at most ``max_items``). An item larger
    than the room on its own gets a group of its own (callers keep items small enough).
    Returns at least one (maybe empty) group."""
    groups: list[list[T]] = [[]]
    used = overhead
    for item, size in zip(items, sizes, strict=True):
        full = max_items is not None and len(groups[-1]) >= max_items
        if groups[-1] and (full or used + size > limit):
            groups.append([])
            used = overhead
        groups[-1].append(item)
        used += size
    return groups


def split_nonblank(
    text: str, limit: int | None, encoding: TextEncoding = "characters"
) -> list[str]:
    """``split_text`` without the blank fragments (each fragment is one message)."""
    return [part for part in split_text(text, limit, encoding) if part.strip()]


def partition_buttons(
    buttons: Iterable[Button], native: Callable[[Button], bool]
) -> tuple[list[Button], list[Button]]:
    """(buttons the platform renders natively, buttons whose label must move to text),
    both in authored order. ``native`` says whether one button fits the platform."""
    kept: list[Button] = []
    moved: list[Button] = []
    for button in buttons:
        (kept if native(button) else moved).append(button)
    return kept, moved


def partition_link_buttons(
    buttons: Iterable[Button], max_url_length: int
) -> tuple[list[Button], list[Button]]:
    """`partition_buttons()` where a link button renders natively only when its URL
    is a safe link (`is_safe_link()`) of at most
    ``max_url_length`` characters; every other button is native."""

    def native(button: Button) -> bool:
        url = button.url
        return url is None or (len(url) <= max_url_length and is_safe_link(url))

    return partition_buttons(buttons, native)

"""Telegram renderer: presentation -> ``sendMessage`` bodies (text + inline keyboard).

The text is the full plain-text rendering (title, text, context, button and option
labels), sent without ``parse_mode``. Buttons and select options become an
``inline_keyboard``: one keyboard row per adapted buttons block (3 per row), select
options in rows of 3. ``callback_data`` is the callback value, or ``tgcmd:<command>`` for
a command; the prefix counts in the 64-byte budget (commands may take 58 bytes:
``max_command_bytes``), so ``adapt`` moves a longer command to the text
(``- label: `command` ``) instead of the keyboard silently losing it. Link buttons may
use ``https:``, ``http:`` and Telegram's own ``tg:`` links; any other link reads as its
label. Telegram has no mention that notifies a whole group, so ``allow_mass_mentions``
changes nothing here. Text longer than 4,096 UTF-16 units continues in further
messages; the keyboard rides on the last one. The keyboard holds at most 100 buttons
(Telegram rejects larger reply markups); any beyond are left out, their labels being in
the text like every other label.

When inline buttons are off for the target surface, use
``capabilities(inline_buttons=False)``: every control then degrades to text.
"""

from __future__ import annotations

from typing import Any

from channelkit.presentation.capabilities import (
    ActionLimits,
    DeliveryCapabilities,
    PresentationCapabilities,
    PresentationLimits,
    SelectLimits,
    TextLimits,
)
from channelkit.presentation.fallback import render_fallback_text
from channelkit.presentation.links import is_safe_link
from channelkit.presentation.model import Button, ButtonsBlock, MessagePresentation, SelectBlock
from channelkit.presentation.rendering import split_nonblank
from channelkit.presentation.text import measure

__all__ = [
    "CAPABILITIES",
    "DELIVERY_CAPABILITIES",
    "MAX_CALLBACK_DATA_BYTES",
    "PLATFORM",
    "capabilities",
    "render",
]

PLATFORM = "telegram"
MAX_CALLBACK_DATA_BYTES = 64
MAX_TEXT_UTF16 = 4096
ROW_SIZE = 3
COMMAND_PREFIX = "tgcmd:"
MAX_KEYBOARD_BUTTONS = 100
LINK_SCHEMES = ("https", "http", "tg")


def capabilities(*, inline_buttons: bool = True) -> PresentationCapabilities:
    """Telegram's capabilities; ``inline_buttons=False`` degrades all controls to text."""
    return PresentationCapabilities(
        buttons=inline_buttons,
        selects=inline_buttons,
        context=True,
        divider=False,
        limits=PresentationLimits(
            actions=ActionLimits(
                max_actions=100,
                max_actions_per_row=ROW_SIZE,
                max_label_length=64,
                max_value_bytes=MAX_CALLBACK_DATA_BYTES,
                max_command_bytes=MAX_CALLBACK_DATA_BYTES - len(COMMAND_PREFIX),
                supports_styles=False,
                link_schemes=LINK_SCHEMES,
            ),
            selects=SelectLimits(
                max_options=100, max_label_length=64, max_value_bytes=MAX_CALLBACK_DATA_BYTES
            ),
            text=TextLimits(encoding="utf16-units", markdown_dialect="plain"),
        ),
    )


CAPABILITIES = capabilities()
DELIVERY_CAPABILITIES = DeliveryCapabilities(pin=True, pin_notify=True)


def _fits(data: str) -> bool:
    return measure(data, "utf8-bytes") <= MAX_CALLBACK_DATA_BYTES


def _button(button: Button) -> dict[str, Any] | None:
    if button.url is not None and is_safe_link(button.url, LINK_SCHEMES):
        return {"text": button.label, "url": button.url}
    data = f"{COMMAND_PREFIX}{button.command}" if button.command is not None else button.value
    if data is None or not _fits(data):
        return None
    return {"text": button.label, "callback_data": data}


def inline_keyboard(presentation: MessagePresentation) -> list[list[dict[str, Any]]]:
    """The inline keyboard rows for the presentation's buttons and selects (at most
    100 buttons in all; the rest are left out, their labels being in the text)."""
    rows: list[list[dict[str, Any]]] = []
    room = MAX_KEYBOARD_BUTTONS
    for block in presentation.blocks:
        if isinstance(block, ButtonsBlock):
            keys = [b for b in (_button(x) for x in block.buttons) if b is not None]
        elif isinstance(block, SelectBlock):
            keys = [
                {"text": o.label, "callback_data": o.value}
                for o in block.options
                if o.value is not None and _fits(o.value)
            ]
        else:
            continue
        keys = keys[:room]
        room -= len(keys)
        for start in range(0, len(keys), ROW_SIZE):
            rows.append(keys[start : start + ROW_SIZE])
        if room <= 0:
            break
    return rows


def render(
    presentation: MessagePresentation,
    *,
    text: str | None = None,
    allow_mass_mentions: bool = False,
) -> list[dict[str, Any]]:
    """Render an adapted presentation to ``sendMessage`` bodies (without ``chat_id``)."""
    body = render_fallback_text(presentation, text)
    if not body.strip():
        return []
    messages: list[dict[str, Any]] = [
        {"text": part} for part in split_nonblank(body, MAX_TEXT_UTF16, "utf16-units")
    ]
    keyboard = inline_keyboard(presentation)
    if keyboard and messages:
        messages[-1]["reply_markup"] = {"inline_keyboard": keyboard}
    return messages

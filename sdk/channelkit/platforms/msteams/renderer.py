"""MS Teams renderer: presentation -> Bot Connector activities with an Adaptive Card.

Card (version 1.4) body in authored order: title (bold, medium; coloured by tone),
text, context (subtle, small), divider (``separator`` on the next element), buttons as
an ``ActionSet`` per adapted row (``Action.OpenUrl`` for links, ``Action.Submit`` with
``data: {"value": ...}`` or ``{"command": ...}``). Selects read as text.

Size: Teams documents its bot message limit as the payload encoded as UTF-16 (40 KB,
later 100 KB; connectors report ~28 KB). Every activity here is kept within 28,000 bytes
of UTF-16-encoded JSON, the strictest of those; longer presentations continue in further
cards. Text is cut into TextBlocks of at most 2,000 characters so any one element fits,
and a button whose action alone is over 3,000 bytes (a huge callback value or URL) is
not rendered as a button: its label reads as text (``- label`` / ``- label: url``);
so does a link that is not http(s) (`channelkit.presentation.links`). Teams only
notifies for mentions declared in an activity's ``entities``, so text cannot
mass-notify and ``allow_mass_mentions`` changes nothing here.
"""

from __future__ import annotations

from typing import Any

from channelkit.presentation.capabilities import (
    ActionLimits,
    DeliveryCapabilities,
    PresentationCapabilities,
    PresentationLimits,
    TextLimits,
)
from channelkit.presentation.fallback import buttons_fallback_text, select_fallback_text
from channelkit.presentation.links import is_safe_link
from channelkit.presentation.model import (
    Button,
    ButtonsBlock,
    ContextBlock,
    DividerBlock,
    MessagePresentation,
    SelectBlock,
    TextBlock,
)
from channelkit.presentation.rendering import (
    callback_payload,
    json_utf16_size,
    pack_by_size,
    partition_buttons,
    split_nonblank,
)

__all__ = ["CAPABILITIES", "DELIVERY_CAPABILITIES", "PLATFORM", "render"]

PLATFORM = "msteams"
CARD_CONTENT_TYPE = "application/vnd.microsoft.card.adaptive"
CARD_SCHEMA = "http://adaptivecards.io/schemas/adaptive-card.json"
MAX_ACTIVITY_BYTES = 28_000  # UTF-16 bytes of the activity JSON
MAX_ACTION_BYTES = 3_000  # a larger action (a huge value or URL) reads as text instead
TEXT_PIECE = 2_000  # characters per TextBlock: at most 24,000 bytes escaped

CAPABILITIES = PresentationCapabilities(
    buttons=True,
    selects=False,
    context=True,
    divider=True,
    limits=PresentationLimits(
        actions=ActionLimits(max_actions_per_row=6, supports_styles=False, supports_disabled=False),
        text=TextLimits(markdown_dialect="markdown"),
    ),
)
DELIVERY_CAPABILITIES = DeliveryCapabilities(pin=False)

_TITLE_COLORS = {"danger": "Attention", "warning": "Warning", "success": "Good", "info": "Accent"}


def _action(button: Button) -> dict[str, Any]:
    if button.url is not None:
        return {"type": "Action.OpenUrl", "title": button.label, "url": button.url}
    return {"type": "Action.Submit", "title": button.label, "data": callback_payload(button)}


def _native(button: Button) -> bool:
    """A safe link, small enough to render as an action (a huge callback value or URL
    is not)."""
    if button.url is not None and not is_safe_link(button.url):
        return False
    chars = len(button.label) + len(button.url or button.value or button.command or "")
    return 12 * chars + 200 <= MAX_ACTION_BYTES or (
        json_utf16_size(_action(button)) <= MAX_ACTION_BYTES
    )


def _text(text: str, **extra: Any) -> dict[str, Any]:
    return {"type": "TextBlock", "text": text, "wrap": True, **extra}


def _texts(text: str, **extra: Any) -> list[dict[str, Any]]:
    """One TextBlock per piece of at most ``TEXT_PIECE`` characters."""
    return [_text(part, **extra) for part in split_nonblank(text, TEXT_PIECE)]


def _elements(presentation: MessagePresentation, text: str | None) -> list[dict[str, Any]]:
    body: list[dict[str, Any]] = []
    separator = False

    def add(elements: list[dict[str, Any]]) -> None:
        nonlocal separator
        if elements and separator:
            elements[0]["separator"] = True
            separator = False
        body.extend(elements)

    if text is not None and text.strip():
        add(_texts(text.strip()))
    if presentation.title:
        color = _TITLE_COLORS.get(presentation.tone or "")
        extra = {"color": color} if color else {}
        add(_texts(presentation.title, weight="Bolder", size="Medium", **extra))
    for block in presentation.blocks:
        if isinstance(block, TextBlock):
            add(_texts(block.text))
        elif isinstance(block, ContextBlock):
            add(_texts(block.text, isSubtle=True, size="Small"))
        elif isinstance(block, DividerBlock):
            separator = bool(body)
        elif isinstance(block, ButtonsBlock):
            native, moved = partition_buttons(block.buttons, _native)
            if native:
                add([{"type": "ActionSet", "actions": [_action(b) for b in native]}])
            if moved:
                add(_texts(buttons_fallback_text(moved)))
        elif isinstance(block, SelectBlock):
            add(_texts(select_fallback_text(block)))
    return body


def _activity(body: list[dict[str, Any]]) -> dict[str, Any]:
    card = {"$schema": CARD_SCHEMA, "type": "AdaptiveCard", "version": "1.4", "body": body}
    return {"type": "message", "attachments": [{"contentType": CARD_CONTENT_TYPE, "content": card}]}


def render(
    presentation: MessagePresentation,
    *,
    text: str | None = None,
    allow_mass_mentions: bool = False,
) -> list[dict[str, Any]]:
    """Render an adapted presentation to activities for
    ``POST {serviceUrl}/v3/conversations/{conversationId}/activities``."""
    elements = _elements(presentation, text)
    if not elements:
        return []
    whole = _activity(elements)
    if _upper_bound(elements) <= MAX_ACTIVITY_BYTES or json_utf16_size(whole) <= MAX_ACTIVITY_BYTES:
        return [whole]  # the common case: small enough without splitting
    sizes = [json_utf16_size(e) + 2 for e in elements]  # + the "," between elements
    overhead = json_utf16_size(_activity([]))
    groups = pack_by_size(elements, sizes, MAX_ACTIVITY_BYTES, overhead)
    return [_activity(group) for group in groups]


def _upper_bound(elements: list[dict[str, Any]]) -> int:
    """A cheap upper bound of the activity's UTF-16 JSON size: 12 bytes per character of
    text (an escaped control character), 400 bytes of structure per element/action."""
    chars = 0
    parts = 1
    for element in elements:
        parts += 1
        if "text" in element:
            chars += len(element["text"])
        for action in element.get("actions", ()):
            parts += 1
            chars += len(action["title"]) + len(action.get("url", ""))
            chars += sum(len(v) for v in action.get("data", {}).values())
    return 12 * chars + 400 * parts

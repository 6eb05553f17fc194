"""MS Teams renderer: presentation -> Bot Connector activities with an Adaptive Card.

Card (version 1.4) body in authored order: title (bold, medium; coloured by tone),
text, context (subtle, small), divider (``separator`` on the next element), buttons as
an ``ActionSet`` per adapted row (``Action.OpenUrl`` for links, ``Action.Submit`` with
``data: {"value": ...}`` or ``{"command": ...}``). Selects read as text. An activity is
kept under Teams' ~28 KB message size; longer presentations continue in further cards.
"""

from __future__ import annotations

import json
from typing import Any

from channelkit.presentation.capabilities import (
    ActionLimits,
    DeliveryCapabilities,
    PresentationCapabilities,
    PresentationLimits,
    TextLimits,
)
from channelkit.presentation.model import (
    Button,
    ButtonsBlock,
    ContextBlock,
    DividerBlock,
    MessagePresentation,
    SelectBlock,
    TextBlock,
)

__all__ = ["CAPABILITIES", "DELIVERY_CAPABILITIES", "PLATFORM", "render"]

PLATFORM = "msteams"
CARD_CONTENT_TYPE = "application/vnd.microsoft.card.adaptive"
CARD_SCHEMA = "http://adaptivecards.io/schemas/adaptive-card.json"
MAX_ACTIVITY_BYTES = 26000  # Teams rejects messages over ~28 KB; keep headroom

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
    data = {"command": button.command} if button.command is not None else {"value": button.value}
    return {"type": "Action.Submit", "title": button.label, "data": data}


def _text(text: str, **extra: Any) -> dict[str, Any]:
    return {"type": "TextBlock", "text": text, "wrap": True, **extra}


def _elements(presentation: MessagePresentation, text: str | None) -> list[dict[str, Any]]:
    body: list[dict[str, Any]] = []
    separator = False

    def add(element: dict[str, Any]) -> None:
        nonlocal separator
        if separator:
            element["separator"] = True
            separator = False
        body.append(element)

    if text is not None and text.strip():
        add(_text(text.strip()))
    if presentation.title:
        title = _text(presentation.title, weight="Bolder", size="Medium")
        color = _TITLE_COLORS.get(presentation.tone or "")
        if color:
            title["color"] = color
        add(title)
    for block in presentation.blocks:
        if isinstance(block, TextBlock):
            add(_text(block.text))
        elif isinstance(block, ContextBlock):
            add(_text(block.text, isSubtle=True, size="Small"))
        elif isinstance(block, DividerBlock):
            separator = bool(body)
        elif isinstance(block, ButtonsBlock):
            add({"type": "ActionSet", "actions": [_action(b) for b in block.buttons]})
        elif isinstance(block, SelectBlock):
            heading = f"{block.placeholder}:" if block.placeholder else "Options:"
            add(_text(heading + "".join(f"\n- {o.label}" for o in block.options)))
    return body


def _upper_bound(presentation: MessagePresentation, text: str | None, elements: int) -> int:
    """A cheap upper bound of the activity's JSON size in bytes (6 bytes per character
    covers escapes and UTF-8; 400 bytes of structure per element and button)."""
    chars = len(text or "") + len(presentation.title or "")
    parts = 1 + elements
    for block in presentation.blocks:
        if isinstance(block, TextBlock | ContextBlock):
            chars += len(block.text)
        elif isinstance(block, ButtonsBlock):
            parts += len(block.buttons)
            for b in block.buttons:
                chars += len(b.label) + len(b.value or b.command or "") + len(b.url or "")
        elif isinstance(block, SelectBlock):
            chars += len(block.placeholder or "") + sum(len(o.label) + 4 for o in block.options)
    return 6 * chars + 400 * parts


def _activity(body: list[dict[str, Any]]) -> dict[str, Any]:
    card = {"$schema": CARD_SCHEMA, "type": "AdaptiveCard", "version": "1.4", "body": body}
    return {"type": "message", "attachments": [{"contentType": CARD_CONTENT_TYPE, "content": card}]}


def render(presentation: MessagePresentation, *, text: str | None = None) -> list[dict[str, Any]]:
    """Render an adapted presentation to activities for
    ``POST {serviceUrl}/v3/conversations/{conversationId}/activities``."""
    elements = _elements(presentation, text)
    if not elements:
        return []
    if _upper_bound(presentation, text, len(elements)) <= MAX_ACTIVITY_BYTES:
        return [_activity(elements)]  # cannot be too large: skip measuring
    activities: list[dict[str, Any]] = []
    current: list[dict[str, Any]] = []
    size = len(json.dumps(_activity([])))
    for element in elements:
        element_size = len(json.dumps(element, ensure_ascii=False).encode("utf-8")) + 1
        if current and size + element_size > MAX_ACTIVITY_BYTES:
            activities.append(_activity(current))
            current, size = [], len(json.dumps(_activity([])))
        current.append(element)
        size += element_size
    activities.append(_activity(current))
    return activities

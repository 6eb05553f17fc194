"""Feishu/Lark renderer: presentation -> ``im/v1/messages`` interactive-card bodies.

Card JSON 2.0: the title goes to the header (template colour by tone: danger red,
warning orange, success green, else blue), body elements in authored order: text ->
``markdown``, context -> grey ``markdown``, divider -> ``hr``, buttons -> ``button``
elements (``open_url`` for http(s) links, ``callback`` with ``{"value": ...}`` or
``{"command": ...}``). Selects read as a grey list. ``& < >`` in text are escaped.
A card is kept under Feishu's 30 KB limit; longer presentations continue in further
cards. ``render`` returns the wire body (``content`` is the serialized card);
``render_cards`` returns the card objects.
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
from channelkit.presentation.fallback import render_fallback_text
from channelkit.presentation.model import (
    Button,
    ButtonsBlock,
    ContextBlock,
    DividerBlock,
    MessagePresentation,
    SelectBlock,
    TextBlock,
)

__all__ = ["CAPABILITIES", "DELIVERY_CAPABILITIES", "PLATFORM", "render", "render_cards"]

PLATFORM = "feishu"
MAX_CARD_BYTES = 28000  # Feishu limit is 30 KB; keep headroom

CAPABILITIES = PresentationCapabilities(
    buttons=True,
    selects=False,
    context=True,
    divider=True,
    limits=PresentationLimits(
        actions=ActionLimits(
            max_actions=20, max_actions_per_row=5, max_label_length=40, max_value_bytes=1024
        ),
        text=TextLimits(max_length=4000, encoding="characters", markdown_dialect="markdown"),
    ),
)
DELIVERY_CAPABILITIES = DeliveryCapabilities(pin=True)

_TEMPLATES = {"danger": "red", "warning": "orange", "success": "green"}
_BUTTON_TYPES = {"primary": "primary", "success": "primary", "danger": "danger"}


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _grey(text: str) -> dict[str, Any]:
    return {"tag": "markdown", "content": f"<font color='grey'>{_escape(text)}</font>"}


def _button(button: Button) -> dict[str, Any]:
    behaviors: list[dict[str, Any]] = []
    if button.url is not None and button.url.lower().startswith(("https://", "http://")):
        behaviors.append({"type": "open_url", "default_url": button.url})
    if button.command is not None:
        behaviors.append({"type": "callback", "value": {"command": button.command}})
    elif button.value is not None:
        behaviors.append({"type": "callback", "value": {"value": button.value}})
    if not behaviors:  # a non-http link: keep it readable
        return {"tag": "markdown", "content": _escape(f"- {button.label}: {button.url}")}
    return {
        "tag": "button",
        "text": {"tag": "plain_text", "content": button.label},
        "type": _BUTTON_TYPES.get(button.style or "", "default"),
        "behaviors": behaviors,
    }


def _elements(presentation: MessagePresentation, text: str | None) -> list[dict[str, Any]]:
    elements: list[dict[str, Any]] = []
    if text is not None and text.strip():
        elements.append({"tag": "markdown", "content": _escape(text.strip())})
    for block in presentation.blocks:
        if isinstance(block, TextBlock):
            elements.append({"tag": "markdown", "content": _escape(block.text)})
        elif isinstance(block, ContextBlock):
            elements.append(_grey(block.text))
        elif isinstance(block, DividerBlock):
            elements.append({"tag": "hr"})
        elif isinstance(block, ButtonsBlock):
            elements.extend(_button(b) for b in block.buttons)
        elif isinstance(block, SelectBlock):
            heading = f"{block.placeholder}:" if block.placeholder else "Options:"
            elements.append(_grey(heading + "".join(f"\n- {o.label}" for o in block.options)))
    return elements


def _card(
    presentation: MessagePresentation, elements: list[dict[str, Any]], first: bool
) -> dict[str, Any]:
    card: dict[str, Any] = {"schema": "2.0", "config": {"width_mode": "fill"}}
    if presentation.title and first:
        card["header"] = {
            "title": {"tag": "plain_text", "content": presentation.title},
            "template": _TEMPLATES.get(presentation.tone or "", "blue"),
        }
    card["body"] = {"elements": elements}
    return card


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _render(
    presentation: MessagePresentation, text: str | None
) -> list[tuple[dict[str, Any], str]]:
    """(card, serialized card) pairs."""
    elements = _elements(presentation, text)
    if not elements:
        if not presentation.title:
            return []
        elements = [{"tag": "markdown", "content": _escape(render_fallback_text(None, text))}]
    card = _card(presentation, elements, True)
    serialized = _dumps(card)
    if len(serialized) * 3 <= MAX_CARD_BYTES or len(serialized.encode("utf-8")) <= MAX_CARD_BYTES:
        return [(card, serialized)]
    cards: list[dict[str, Any]] = []
    current: list[dict[str, Any]] = []
    size = len(_dumps(_card(presentation, [], True)).encode("utf-8"))
    for element in elements:
        element_size = len(_dumps(element).encode("utf-8")) + 1
        if current and size + element_size > MAX_CARD_BYTES:
            cards.append(_card(presentation, current, not cards))
            current, size = [], len(_dumps(_card(presentation, [], False)).encode("utf-8"))
        current.append(element)
        size += element_size
    cards.append(_card(presentation, current, not cards))
    return [(c, _dumps(c)) for c in cards]


def render_cards(
    presentation: MessagePresentation, *, text: str | None = None
) -> list[dict[str, Any]]:
    """The card objects (one unless the 30 KB limit forces a split)."""
    return [card for card, _ in _render(presentation, text)]


def render(presentation: MessagePresentation, *, text: str | None = None) -> list[dict[str, Any]]:
    """Render an adapted presentation to ``POST /open-apis/im/v1/messages`` bodies
    (without ``receive_id``)."""
    return [
        {"msg_type": "interactive", "content": serialized}
        for _, serialized in _render(presentation, text)
    ]

"""Feishu/Lark renderer: presentation -> ``im/v1/messages`` interactive-card bodies.

Card JSON 2.0: the title goes to the header (template colour by tone: danger red,
warning orange, success green, else blue), body elements in authored order: text ->
``markdown``, context -> grey ``markdown``, divider -> ``hr``, buttons -> ``button``
elements (``open_url`` for http(s) links, ``callback`` with ``{"value": ...}`` or
``{"command": ...}``). Selects read as a grey list. ``& < >`` in text are escaped, which
also keeps ``<at id=all></at>`` (Feishu's notify-everyone) from being sent by text;
``allow_mass_mentions`` does not lift that escaping.

Size: Feishu limits a card message's request body to 30 KB (error 230025). Each card
is kept within 28,000 bytes as its serialized ``content`` appears on the wire (escaped
again inside the body JSON: ASCII with ``\\uXXXX`` escapes), leaving 2,000 bytes for
``receive_id`` and the rest, and holds at most 200 elements; longer presentations
continue in further cards (the header only on the first). Text is cut into markdown
elements of at most 1,500 characters so any one element fits beside the largest header.
A button that cannot be one (a non-http link, or a link so long that the button alone is
over 6,000 bytes) reads as ``- label: url`` text. A title over 6,000 bytes shows a
prefix in the header and reads in full at the top of the body.

``render`` returns the wire body (``content`` is the serialized card); ``render_cards``
returns the card objects.
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
from channelkit.presentation.fallback import (
    buttons_fallback_text,
    render_fallback_text,
    select_fallback_text,
)
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
    json_wire_size,
    pack_by_size,
    split_nonblank,
)
from channelkit.presentation.text import truncate

__all__ = ["CAPABILITIES", "DELIVERY_CAPABILITIES", "PLATFORM", "render", "render_cards"]

PLATFORM = "feishu"
MAX_CONTENT_BYTES = 28_000  # the escaped ``content``; the rest of the body fits in 2,000
MAX_BUTTON_BYTES = 6_000  # a larger button (a huge link) reads as text instead
MAX_TITLE_BYTES = 6_000  # a larger title: a prefix in the header, in full in the body
MAX_ELEMENTS = 200  # components per card (card JSON 2.0)
# Characters per markdown element. The worst character (outside the BMP) takes 12 bytes
# on the wire, so a piece is at most 18,000 bytes: with the largest header (a 6,000-byte
# title prefix) and the card's own keys it still fits in MAX_CONTENT_BYTES, which is what
# lets the packer below treat every element as fitting on its own.
TEXT_PIECE = 1_500

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


def _markdown(text: str) -> list[dict[str, Any]]:
    """Markdown elements of at most ``TEXT_PIECE`` characters each."""
    return [
        {"tag": "markdown", "content": _escape(part)} for part in split_nonblank(text, TEXT_PIECE)
    ]


def _grey(text: str) -> list[dict[str, Any]]:
    return [
        {"tag": "markdown", "content": f"<font color='grey'>{_escape(part)}</font>"}
        for part in split_nonblank(text, TEXT_PIECE)
    ]


def _button(button: Button) -> dict[str, Any] | None:
    """The button element, or None when it cannot be a button (its label moves to text)."""
    behaviors: list[dict[str, Any]] = []
    if button.url is not None and is_safe_link(button.url):
        behaviors.append({"type": "open_url", "default_url": button.url})
    payload = callback_payload(button)
    if payload is not None:
        behaviors.append({"type": "callback", "value": payload})
    if not behaviors:  # a non-http link
        return None
    element = {
        "tag": "button",
        "text": {"tag": "plain_text", "content": button.label},
        "type": _BUTTON_TYPES.get(button.style or "", "default"),
        "behaviors": behaviors,
    }
    chars = len(button.label) + len(button.url or "") + len(button.value or button.command or "")
    if 12 * chars + 400 > MAX_BUTTON_BYTES and _wire_size(element) > MAX_BUTTON_BYTES:
        return None  # a huge link: keep it readable instead
    return element


def _elements(presentation: MessagePresentation, text: str | None) -> list[dict[str, Any]]:
    elements: list[dict[str, Any]] = []
    if text is not None and text.strip():
        elements.extend(_markdown(text.strip()))
    if presentation.title and _title_too_large(presentation.title):
        elements.extend(_markdown(presentation.title))  # in full; the header has a prefix
    for block in presentation.blocks:
        if isinstance(block, TextBlock):
            elements.extend(_markdown(block.text))
        elif isinstance(block, ContextBlock):
            elements.extend(_grey(block.text))
        elif isinstance(block, DividerBlock):
            elements.append({"tag": "hr"})
        elif isinstance(block, ButtonsBlock):
            moved: list[Button] = []
            for button in block.buttons:
                element = _button(button)
                if element is None:
                    moved.append(button)
                else:
                    elements.append(element)
            if moved:
                elements.extend(_markdown(buttons_fallback_text(moved)))
        elif isinstance(block, SelectBlock):
            elements.extend(_grey(select_fallback_text(block)))
    return elements


def _title_too_large(title: str) -> bool:
    return 12 * len(title) > MAX_TITLE_BYTES and json_wire_size(title) > MAX_TITLE_BYTES


def _card(
    presentation: MessagePresentation, elements: list[dict[str, Any]], first: bool
) -> dict[str, Any]:
    card: dict[str, Any] = {"schema": "2.0", "config": {"width_mode": "fill"}}
    if presentation.title and first:
        title = presentation.title
        if _title_too_large(title):
            title = truncate(title, MAX_TITLE_BYTES // 12) + "…"
        card["header"] = {
            "title": {"tag": "plain_text", "content": title},
            "template": _TEMPLATES.get(presentation.tone or "", "blue"),
        }
    card["body"] = {"elements": elements}
    return card


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _wire_size(value: Any) -> int:
    """Bytes ``value`` takes inside the request body: serialized into ``content``, then
    escaped again as that JSON string is sent (without the string's quotes)."""
    return json_wire_size(_dumps(value)) - 2


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
    if len(elements) <= MAX_ELEMENTS and (
        12 * len(serialized) <= MAX_CONTENT_BYTES or json_wire_size(serialized) <= MAX_CONTENT_BYTES
    ):
        return [(card, serialized)]
    sizes = [_wire_size(e) + 1 for e in elements]  # + the "," between elements
    overhead = _wire_size(_card(presentation, [], True)) + 2
    groups = pack_by_size(elements, sizes, MAX_CONTENT_BYTES, overhead, max_items=MAX_ELEMENTS)
    cards = [_card(presentation, group, index == 0) for index, group in enumerate(groups)]
    return [(c, _dumps(c)) for c in cards]


def render_cards(
    presentation: MessagePresentation, *, text: str | None = None
) -> list[dict[str, Any]]:
    """The card objects (one unless the 30 KB limit forces a split)."""
    return [card for card, _ in _render(presentation, text)]


def render(
    presentation: MessagePresentation,
    *,
    text: str | None = None,
    allow_mass_mentions: bool = False,
) -> list[dict[str, Any]]:
    """Render an adapted presentation to ``POST /open-apis/im/v1/messages`` bodies
    (without ``receive_id``)."""
    return [
        {"msg_type": "interactive", "content": serialized}
        for _, serialized in _render(presentation, text)
    ]

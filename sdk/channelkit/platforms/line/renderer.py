"""LINE renderer: presentation -> Messaging API push/reply bodies.

Without controls the presentation is sent as text messages. With controls it becomes
one Flex bubble: the title (bold), text and context blocks (small grey) and separators
in the body, the buttons in the footer (``postback`` for a callback value, ``message``
for a command, ``uri`` for a link). The first select becomes the bubble's quick reply
(up to 13 postback items); further selects read as text in the body.

LINE's documented limits, and how every payload stays within them:

- a bubble's JSON is at most 30 KB: measured here as the bytes of the bubble serialized
  as the HTTP layer sends it (ASCII with ``\\uXXXX`` escapes, an upper bound of any other
  serialization) and kept within 30,000. When the bubble would be larger, the body's
  leading components (title first) move out of the bubble into plain text messages
  sent just before it, in authored order; the bubble keeps the longest tail of its body
  that fits, and always the controls (footer and quick reply). The footer alone can
  never exceed the limit (at most 4 buttons with bounded labels, data and links).
- a text message is at most 5,000 characters; the ``altText`` at most 1,500 (both
  counted here in UTF-16 units, which is never less than characters).
- a ``uri`` action's link is at most 1,000 characters: a link button over that (by its
  escaped size) is not rendered as a button; it reads as ``- label: url`` in the body.
  A link that is not http(s) (`channelkit.presentation.links`) reads as its label.
- a text component is cut by ``adapt`` at 2,000 characters; a longer text block is
  split into several components, up to 5,000 characters (one text message's worth).
- LINE has no mention that notifies a whole group from text, so ``allow_mass_mentions``
  changes nothing here.
- a request carries at most 5 messages: each returned body is one push request of at
  most 5 messages, in order; the bubble is always the last message of the last body
  (so its quick reply shows). A sender pushes the bodies one after another; only the
  first may use a reply token.
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
from channelkit.presentation.rendering import json_wire_size, split_nonblank
from channelkit.presentation.text import truncate, truncate_chars

__all__ = ["CAPABILITIES", "DELIVERY_CAPABILITIES", "PLATFORM", "render"]

PLATFORM = "line"
MAX_MESSAGES_PER_REQUEST = 5
MAX_TEXT_MESSAGE = 5000
MAX_ALT_TEXT = 1500
MAX_BUBBLE_BYTES = 30_000
MAX_URI = 1000
MAX_QUICK_REPLY_ITEMS = 13
MAX_QUICK_REPLY_LABEL = 20
DEFAULT_PROMPT = "Choose an option"

CAPABILITIES = PresentationCapabilities(
    buttons=True,
    selects=True,
    context=True,
    divider=True,
    limits=PresentationLimits(
        actions=ActionLimits(
            max_actions=4,
            max_actions_per_row=1,
            max_rows=4,
            max_label_length=40,
            max_value_bytes=300,
            supports_styles=True,
        ),
        selects=SelectLimits(
            max_options=MAX_QUICK_REPLY_ITEMS,
            max_label_length=MAX_QUICK_REPLY_LABEL,
            max_value_bytes=300,
        ),
        text=TextLimits(
            max_length=2000,
            encoding="characters",
            markdown_dialect="plain",
            max_message_length=MAX_TEXT_MESSAGE,
        ),
    ),
)
DELIVERY_CAPABILITIES = DeliveryCapabilities(pin=False)

_BUTTON_STYLES = {"primary": "primary", "success": "primary", "danger": "primary"}
_STRUCTURE_BYTES = 160  # per component, generous: keys, types, sizes, separators


def _action(button: Button) -> dict[str, Any]:
    if button.url is not None:
        return {"type": "uri", "label": button.label, "uri": button.url}
    if button.command is not None:
        return {"type": "message", "label": button.label, "text": button.command}
    return {
        "type": "postback",
        "label": button.label,
        "data": button.value,
        "displayText": button.label,
    }


def _native(button: Button) -> bool:
    """A link button renders natively only when its link is safe and fits a ``uri``
    action."""
    url = button.url
    return url is None or (json_wire_size(url) - 2 <= MAX_URI and is_safe_link(url))


def _text(text: str, **extra: Any) -> dict[str, Any]:
    return {"type": "text", "text": text, "wrap": True, **extra}


class _Item:
    """One body component and how it reads as plain text if it leaves the bubble."""

    __slots__ = ("component", "continuation", "plain")

    def __init__(self, component: dict[str, Any], plain: str, continuation: bool = False) -> None:
        self.component = component
        self.plain = plain
        self.continuation = continuation


def _text_messages(text: str) -> list[dict[str, Any]]:
    return [
        {"type": "text", "text": part}
        for part in split_nonblank(text, MAX_TEXT_MESSAGE, "utf16-units")
    ]


def _batches(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {"messages": messages[start : start + MAX_MESSAGES_PER_REQUEST]}
        for start in range(0, len(messages), MAX_MESSAGES_PER_REQUEST)
    ]


def _bubble(contents: list[dict[str, Any]], footer: list[dict[str, Any]]) -> dict[str, Any]:
    bubble: dict[str, Any] = {
        "type": "bubble",
        "body": {
            "type": "box",
            "layout": "vertical",
            "spacing": "sm",
            "contents": contents or [_text(DEFAULT_PROMPT)],
        },
    }
    if footer:
        bubble["footer"] = {"type": "box", "layout": "vertical", "contents": footer}
    return bubble


def _plain(items: list[_Item]) -> str:
    """The moved components as text paragraphs (continuation fragments joined back)."""
    paragraphs: list[str] = []
    for item in items:
        if not item.plain:
            continue
        if item.continuation and paragraphs:
            paragraphs[-1] += item.plain
        else:
            paragraphs.append(item.plain)
    return "\n\n".join(paragraphs)


def _fit(items: list[_Item], footer: list[dict[str, Any]]) -> tuple[list[_Item], dict[str, Any]]:
    """(items that leave the bubble, the bubble) with the bubble within the limit."""
    contents = [item.component for item in items]
    bubble = _bubble(contents, footer)
    # A cheap upper bound first (12 bytes per character covers escaped astral
    # characters): most bubbles are far from the limit and are never serialized here.
    bound = _footer_bound(footer) + _STRUCTURE_BYTES
    bound += sum(12 * len(item.plain) + _STRUCTURE_BYTES for item in items)
    if bound <= MAX_BUBBLE_BYTES or json_wire_size(bubble) <= MAX_BUBBLE_BYTES:
        return [], bubble
    room = MAX_BUBBLE_BYTES - json_wire_size(_bubble([_text(DEFAULT_PROMPT)], footer))
    room += json_wire_size(_text(DEFAULT_PROMPT))
    start = len(items)
    while start > 0:
        size = json_wire_size(items[start - 1].component) + 2  # ", " between components
        if size > room:
            break
        room -= size
        start -= 1
    kept = contents[start:]
    return items[:start], _bubble(kept, footer)


def _footer_bound(footer: list[dict[str, Any]]) -> int:
    total = 0
    for element in footer:
        action = element["action"]
        total += _STRUCTURE_BYTES + 12 * sum(
            len(v) for k, v in action.items() if k != "type" and isinstance(v, str)
        )
    return total


def render(
    presentation: MessagePresentation,
    *,
    text: str | None = None,
    allow_mass_mentions: bool = False,
) -> list[dict[str, Any]]:
    """Render an adapted presentation to request bodies (add ``to`` for push or
    ``replyToken`` for reply); each body is one request of at most 5 messages."""
    has_controls = any(isinstance(b, ButtonsBlock | SelectBlock) for b in presentation.blocks)
    if not has_controls:
        return _batches(_text_messages(render_fallback_text(presentation, text)))

    items: list[_Item] = []
    if presentation.title:
        items.append(_Item(_text(presentation.title, weight="bold", size="lg"), presentation.title))
    footer: list[dict[str, Any]] = []
    quick_reply: list[dict[str, Any]] | None = None
    for block in presentation.blocks:
        if isinstance(block, TextBlock):
            items.append(_Item(_text(block.text, size="md"), block.text, block.continuation))
        elif isinstance(block, ContextBlock):
            component = _text(block.text, size="xs", color="#8C8C8C")
            items.append(_Item(component, block.text, block.continuation))
        elif isinstance(block, DividerBlock):
            items.append(_Item({"type": "separator", "margin": "md"}, ""))
        elif isinstance(block, ButtonsBlock):
            for button in block.buttons:
                if not _native(button):
                    listed = buttons_fallback_text((button,))
                    items.append(_Item(_text(listed, size="sm"), listed))
                    continue
                element: dict[str, Any] = {
                    "type": "button",
                    "action": _action(button),
                    "style": _BUTTON_STYLES.get(button.style or "", "secondary"),
                    "height": "sm",
                }
                if footer:
                    element["margin"] = "sm"
                footer.append(element)
        elif isinstance(block, SelectBlock):
            if quick_reply is None:
                if block.placeholder:
                    component = _text(block.placeholder, size="sm", weight="bold")
                    items.append(_Item(component, block.placeholder))
                quick_reply = [
                    {
                        "type": "action",
                        "action": {
                            "type": "postback",
                            "label": truncate_chars(o.label, MAX_QUICK_REPLY_LABEL),
                            "data": o.value,
                            "displayText": o.label,
                        },
                    }
                    for o in block.options[:MAX_QUICK_REPLY_ITEMS]
                ]
            else:
                listed = select_fallback_text(block)
                items.append(_Item(_text(listed), listed))

    moved, bubble = _fit(items, footer)
    lead = [text.strip()] if text is not None and text.strip() else []
    if moved:
        lead.append(_plain(moved))
    messages: list[dict[str, Any]] = []
    for paragraph in lead:
        messages.extend(_text_messages(paragraph))
    alt = presentation.title or next(
        (b.text for b in presentation.blocks if isinstance(b, TextBlock)), DEFAULT_PROMPT
    )
    flex: dict[str, Any] = {
        "type": "flex",
        "altText": truncate(alt, MAX_ALT_TEXT, "utf16-units"),
        "contents": bubble,
    }
    if quick_reply:
        flex["quickReply"] = {"items": quick_reply}
    messages.append(flex)
    return _batches(messages)

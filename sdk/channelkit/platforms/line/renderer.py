"""LINE renderer: presentation -> Messaging API push/reply bodies.

Without controls the presentation is sent as text messages (5,000 characters each).
With controls it becomes one Flex bubble: the title (bold), text and context blocks
(small grey) and separators in the body, the buttons in the footer (``postback`` for a
callback value, ``message`` for a command, ``uri`` for a link). The first select becomes
the bubble's quick reply (up to 13 postback items); further selects read as text in
the body. Each returned body holds at most 5 messages (LINE's per-request limit).
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
from channelkit.presentation.model import (
    Button,
    ButtonsBlock,
    ContextBlock,
    DividerBlock,
    MessagePresentation,
    SelectBlock,
    TextBlock,
)
from channelkit.presentation.text import split_text, truncate_chars

__all__ = ["CAPABILITIES", "DELIVERY_CAPABILITIES", "PLATFORM", "render"]

PLATFORM = "line"
MAX_MESSAGES_PER_REQUEST = 5
MAX_TEXT_MESSAGE = 5000
MAX_ALT_TEXT = 400
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
        text=TextLimits(max_length=2000, encoding="characters", markdown_dialect="plain"),
    ),
)
DELIVERY_CAPABILITIES = DeliveryCapabilities(pin=False)

_BUTTON_STYLES = {"primary": "primary", "success": "primary", "danger": "primary"}


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


def _text(text: str, **extra: Any) -> dict[str, Any]:
    return {"type": "text", "text": text, "wrap": True, **extra}


def _batches(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {"messages": messages[start : start + MAX_MESSAGES_PER_REQUEST]}
        for start in range(0, len(messages), MAX_MESSAGES_PER_REQUEST)
    ]


def render(presentation: MessagePresentation, *, text: str | None = None) -> list[dict[str, Any]]:
    """Render an adapted presentation to request bodies (add ``to`` for push or
    ``replyToken`` for reply)."""
    has_controls = any(isinstance(b, ButtonsBlock | SelectBlock) for b in presentation.blocks)
    if not has_controls:
        body = render_fallback_text(presentation, text)
        return _batches(
            [
                {"type": "text", "text": part}
                for part in split_text(body, MAX_TEXT_MESSAGE)
                if part.strip()
            ]
        )

    messages: list[dict[str, Any]] = []
    if text is not None and text.strip():
        messages.extend(
            {"type": "text", "text": part} for part in split_text(text.strip(), MAX_TEXT_MESSAGE)
        )
    contents: list[dict[str, Any]] = []
    if presentation.title:
        contents.append(_text(presentation.title, weight="bold", size="lg"))
    footer: list[dict[str, Any]] = []
    quick_reply: list[dict[str, Any]] | None = None
    for block in presentation.blocks:
        if isinstance(block, TextBlock):
            contents.append(_text(block.text, size="md"))
        elif isinstance(block, ContextBlock):
            contents.append(_text(block.text, size="xs", color="#8C8C8C"))
        elif isinstance(block, DividerBlock):
            contents.append({"type": "separator", "margin": "md"})
        elif isinstance(block, ButtonsBlock):
            for button in block.buttons:
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
                    contents.append(_text(block.placeholder, size="sm", weight="bold"))
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
                heading = f"{block.placeholder}:" if block.placeholder else "Options:"
                contents.append(_text(heading + "".join(f"\n- {o.label}" for o in block.options)))
    if not contents:
        contents.append(_text(DEFAULT_PROMPT))
    bubble: dict[str, Any] = {
        "type": "bubble",
        "body": {"type": "box", "layout": "vertical", "spacing": "sm", "contents": contents},
    }
    if footer:
        bubble["footer"] = {"type": "box", "layout": "vertical", "contents": footer}
    alt = presentation.title or next(
        (b.text for b in presentation.blocks if isinstance(b, TextBlock)), DEFAULT_PROMPT
    )
    flex: dict[str, Any] = {
        "type": "flex",
        "altText": truncate_chars(alt, MAX_ALT_TEXT),
        "contents": bubble,
    }
    if quick_reply:
        flex["quickReply"] = {"items": quick_reply}
    messages.append(flex)
    return _batches(messages)

"""Slack renderer: presentation -> Block Kit ``chat.postMessage`` bodies.

Title -> ``header`` (or a bold section when longer than 150 characters), text ->
``section`` (mrkdwn), context -> ``context``, divider -> ``divider``, buttons ->
``actions`` with ``button`` elements, select -> ``actions`` with a ``static_select``.
Blocks keep authored order. ``text`` (the notification/accessibility fallback) is the
plain-text rendering, cut to 3,000 characters. A message holds at most 50 blocks;
longer presentations continue in further messages.

Action ids: ``ck:button:<block>:<n>`` (callback ``value``), ``ck:command:<block>:<n>``
(``value`` is the command), ``ck:link:<block>:<n>`` (url buttons),
``ck:select:<block>``. A link button whose URL is over Slack's 3,000 characters is not
rendered as a button: it reads as ``- label: url`` in a section right after its row.
Documented limits kept: 50 blocks per message, 3,000 characters per section or
context text, 150 per header, 40,000 for the message ``text`` (cut to 3,000 here). A
text block longer than 3,000 characters is split by ``adapt`` into several sections, up
to 40,000 characters (``max_message_length``).

Mass mentions: unless the payload sets ``allow_mass_mentions``, every mrkdwn text (and
the ``text`` fallback) has ``<!channel>``, ``<!here>``, ``<!everyone>``, ``<!group>`` and
user-group mentions ``<!subteam^ID>`` escaped with Slack's documented entities
(``&lt;!here&gt;``): they read as written and notify nobody. Links must be http(s)
(`channelkit.presentation.links`).
"""

from __future__ import annotations

import re
from typing import Any

from channelkit.presentation.capabilities import (
    ActionLimits,
    DeliveryCapabilities,
    PresentationCapabilities,
    PresentationLimits,
    SelectLimits,
    TextLimits,
)
from channelkit.presentation.fallback import buttons_fallback_text, render_fallback_text
from channelkit.presentation.model import (
    Button,
    ButtonsBlock,
    ContextBlock,
    DividerBlock,
    MessagePresentation,
    SelectBlock,
    TextBlock,
)
from channelkit.presentation.rendering import partition_link_buttons
from channelkit.presentation.text import split_text, truncate_chars

__all__ = ["CAPABILITIES", "DELIVERY_CAPABILITIES", "MAX_BLOCKS", "PLATFORM", "render"]

PLATFORM = "slack"
MAX_BLOCKS = 50
MAX_SECTION_TEXT = 3000
MAX_HEADER_TEXT = 150
MAX_BUTTON_URL = 3000
MAX_MESSAGE_TEXT = 40_000

CAPABILITIES = PresentationCapabilities(
    buttons=True,
    selects=True,
    context=True,
    divider=True,
    limits=PresentationLimits(
        actions=ActionLimits(
            max_actions_per_row=25,
            max_label_length=75,
            max_value_bytes=2000,
            supports_styles=True,
        ),
        selects=SelectLimits(max_options=100, max_label_length=75, max_value_bytes=150),
        text=TextLimits(
            max_length=MAX_SECTION_TEXT,
            encoding="characters",
            markdown_dialect="slack-mrkdwn",
            supports_edit=True,
            max_message_length=MAX_MESSAGE_TEXT,
        ),
    ),
)
DELIVERY_CAPABILITIES = DeliveryCapabilities(pin=True)

_STYLES = {"primary": "primary", "success": "primary", "danger": "danger"}
# Special mentions that notify many people: <!channel>, <!here>, <!everyone>, the legacy
# <!group>, and user groups <!subteam^ID> / <!subteam^ID|@handle>.
MASS_MENTION = re.compile(r"<!(?:channel|here|everyone|group|subteam\^)[^<>]*>", re.IGNORECASE)
_MASS_MENTION_START = re.compile(r"<!(?=channel|here|everyone|group|subteam)", re.IGNORECASE)


def escape_mass_mentions(text: str) -> str:
    """``text`` with Slack's mass mentions escaped (``&lt;!here&gt;``): shown as
    written, notifying nobody."""
    if "<!" not in text:
        return text
    text = MASS_MENTION.sub(lambda m: f"&lt;{m.group(0)[1:-1]}&gt;", text)
    return _MASS_MENTION_START.sub("&lt;!", text)  # an unclosed one (text cut mid-way)


def _plain(text: str) -> dict[str, Any]:
    return {"type": "plain_text", "text": text, "emoji": True}


def _button(button: Button, block_index: int, number: int) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "button"}
    if button.url is not None:
        out["action_id"] = f"ck:link:{block_index}:{number}"
    elif button.command is not None:
        out["action_id"] = f"ck:command:{block_index}:{number}"
    else:
        out["action_id"] = f"ck:button:{block_index}:{number}"
    out["text"] = _plain(button.label)
    if button.url is not None:
        out["url"] = button.url
    elif button.command is not None:
        out["value"] = button.command
    else:
        out["value"] = button.value
    style = _STYLES.get(button.style or "")
    if style is not None:
        out["style"] = style
    return out


def _blocks(
    presentation: MessagePresentation, text: str | None, allow_mass_mentions: bool
) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []

    def mrkdwn(content: str) -> list[str]:
        if not allow_mass_mentions:
            content = escape_mass_mentions(content)
        return split_text(content, MAX_SECTION_TEXT)

    def section(content: str) -> None:
        for part in mrkdwn(content):
            blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": part}})

    if text is not None and text.strip():
        section(text.strip())
    if presentation.title:
        if len(presentation.title) <= MAX_HEADER_TEXT:
            blocks.append({"type": "header", "text": _plain(presentation.title)})
        else:
            section(f"*{presentation.title}*")
    for index, block in enumerate(presentation.blocks, start=1):
        if isinstance(block, TextBlock):
            section(block.text)
        elif isinstance(block, ContextBlock):
            for part in mrkdwn(block.text):
                blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": part}]})
        elif isinstance(block, DividerBlock):
            blocks.append({"type": "divider"})
        elif isinstance(block, ButtonsBlock):
            # a link over Slack's 3,000 characters (or not safe) moves to text
            native, moved = partition_link_buttons(block.buttons, MAX_BUTTON_URL)
            for start in range(0, len(native), 25):
                row = native[start : start + 25]
                blocks.append(
                    {
                        "type": "actions",
                        "block_id": f"ck_buttons_{index}_{start // 25 + 1}",
                        "elements": [
                            _button(b, index, start + n) for n, b in enumerate(row, start=1)
                        ],
                    }
                )
            if moved:
                section(buttons_fallback_text(moved))
        elif isinstance(block, SelectBlock):
            placeholder = truncate_chars(block.placeholder or "Choose an option", MAX_HEADER_TEXT)
            blocks.append(
                {
                    "type": "actions",
                    "block_id": f"ck_select_{index}",
                    "elements": [
                        {
                            "type": "static_select",
                            "action_id": f"ck:select:{index}",
                            "placeholder": _plain(placeholder),
                            "options": [
                                {"text": _plain(o.label), "value": o.value}
                                for o in block.options[:100]
                            ],
                        }
                    ],
                }
            )
    return blocks


def render(
    presentation: MessagePresentation,
    *,
    text: str | None = None,
    allow_mass_mentions: bool = False,
) -> list[dict[str, Any]]:
    """Render an adapted presentation (plus optional leading ``text``) to
    ``chat.postMessage`` bodies (without ``channel``)."""
    blocks = _blocks(presentation, text, allow_mass_mentions)
    summary = render_fallback_text(presentation, text)
    if not allow_mass_mentions:
        summary = escape_mass_mentions(summary)
    summary = truncate_chars(summary, MAX_SECTION_TEXT)
    if not blocks:
        return [{"text": summary}] if summary else []
    messages: list[dict[str, Any]] = []
    for start in range(0, len(blocks), MAX_BLOCKS):
        messages.append(
            {
                "text": summary if start == 0 else "(continued)",
                "blocks": blocks[start : start + MAX_BLOCKS],
            }
        )
    return messages

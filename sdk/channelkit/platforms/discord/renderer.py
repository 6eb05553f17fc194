"""Discord renderer: presentation -> components v2 message bodies.

Output: bodies for ``POST /channels/{channel_id}/messages``. Each body is one
Container (``type 17``) with ``flags = 32768`` (IS_COMPONENTS_V2). Blocks render in
authored order: text -> TextDisplay (10), context -> ``-# `` small text, divider ->
Separator (14), buttons -> ActionRow (1) of Buttons (2), select -> ActionRow with a
string select (3). A message holds at most 40 components and 4,000 characters of text;
longer presentations continue in further messages.

``custom_id`` carries the callback: ``v:<value>`` for a callback value, ``c:<command>``
for a command. Discord rejects a message whose custom_ids (or a select's option values)
repeat, so a repeat of the same callback within one render gets a counter:
``v2:<value>``, ``v3:<value>``... (`encode_custom_id()`); `decode_custom_id()`
turns any of them back into ``("value", value)`` or ``("command", command)``. Hence
``max_value_bytes`` 96: custom_id is at most 100 characters. Selects use
``ck:select:<n>``; their option values are encoded the same way (``v:<value>``), and the
chosen one decodes with `decode_custom_id()` too. A link button whose URL is over
Discord's 512 characters, or is not a safe link, is not rendered as a button: it reads
as text right after its row.

Every body carries ``allowed_mentions``: ``{"parse": []}`` (nobody is pinged, whatever
the text says) unless the payload sets ``allow_mass_mentions``, which allows
``everyone`` (``@everyone``/``@here``), ``roles`` and ``users``.
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
from channelkit.presentation.fallback import buttons_fallback_text
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

__all__ = [
    "CAPABILITIES",
    "DELIVERY_CAPABILITIES",
    "PLATFORM",
    "decode_custom_id",
    "encode_custom_id",
    "render",
]

PLATFORM = "discord"
IS_COMPONENTS_V2 = 1 << 15
MAX_COMPONENTS = 40
MAX_TEXT = 4000
MAX_CUSTOM_ID = 100
MAX_URL = 512
MAX_CALLBACK = MAX_CUSTOM_ID - 4  # room for "v99:"
NO_MENTIONS: dict[str, list[str]] = {"parse": []}
MASS_MENTIONS: dict[str, list[str]] = {"parse": ["everyone", "roles", "users"]}

CAPABILITIES = PresentationCapabilities(
    buttons=True,
    selects=True,
    context=True,
    divider=True,
    limits=PresentationLimits(
        actions=ActionLimits(
            max_actions=25,
            max_actions_per_row=5,
            max_rows=5,
            max_label_length=80,
            max_value_bytes=MAX_CALLBACK,
            supports_disabled=True,
        ),
        selects=SelectLimits(max_options=25, max_label_length=100, max_value_bytes=MAX_CALLBACK),
        text=TextLimits(
            max_length=2000,
            encoding="characters",
            markdown_dialect="discord-markdown",
            max_message_length=MAX_TEXT,
        ),
    ),
)
DELIVERY_CAPABILITIES = DeliveryCapabilities(pin=True)

_STYLES = {"primary": 1, "secondary": 2, "success": 3, "danger": 4}
_LINK_STYLE = 5
_ACCENTS = {"info": 0x5865F2, "success": 0x57F287, "warning": 0xFEE75C, "danger": 0xED4245}


def encode_custom_id(kind: str, payload: str, occurrence: int = 1) -> str:
    """``v:<payload>`` (kind ``value``) or ``c:<payload>`` (kind ``command``); the n-th
    repeat of the same callback within a message is ``v<n>:<payload>``."""
    prefix = "c" if kind == "command" else "v"
    return f"{prefix}{occurrence if occurrence > 1 else ''}:{payload}"


def decode_custom_id(custom_id: str) -> tuple[str, str] | None:
    """``("value", value)`` or ``("command", command)`` from a button ``custom_id`` or a
    select option value this renderer produced; None for anything else (e.g. the
    select's own ``ck:select:<n>``)."""
    head, sep, payload = custom_id.partition(":")
    if not sep or not head or head[0] not in "vc" or not (head[1:] == "" or head[1:].isdigit()):
        return None
    return ("command" if head[0] == "c" else "value"), payload


class _Ids:
    """Hands out unique custom_ids (and option values) within one render."""

    def __init__(self) -> None:
        self.seen: dict[tuple[str, str], int] = {}

    def __call__(self, kind: str, payload: str) -> str:
        count = self.seen.get((kind, payload), 0) + 1
        self.seen[(kind, payload)] = count
        return encode_custom_id(kind, payload, count)


def _button(button: Button, ids: _Ids) -> dict[str, Any]:
    if button.url is not None:
        out: dict[str, Any] = {
            "type": 2,
            "style": _LINK_STYLE,
            "label": button.label,
            "url": button.url,
        }
    else:
        if button.command is not None:
            custom_id = ids("command", button.command)
        else:
            custom_id = ids("value", button.value or "")
        out = {
            "type": 2,
            "style": _STYLES[button.style or "secondary"],
            "label": button.label,
            "custom_id": custom_id,
        }
    if button.disabled:
        out["disabled"] = True
    return out


def _small(text: str) -> str:
    return "\n".join(f"-# {line}" if line.strip() else line for line in text.split("\n"))


def _items(
    presentation: MessagePresentation, text: str | None
) -> list[tuple[dict[str, Any], int, int]]:
    """(component, component count, text characters) in order."""
    items: list[tuple[dict[str, Any], int, int]] = []

    def add_text(content: str) -> None:
        for part in split_text(content, MAX_TEXT):
            items.append(({"type": 10, "content": part}, 1, len(part)))

    if text is not None and text.strip():
        add_text(text.strip())
    if presentation.title:
        add_text(f"## {presentation.title}")
    select_index = 0
    ids = _Ids()
    for block in presentation.blocks:
        if isinstance(block, TextBlock):
            add_text(block.text)
        elif isinstance(block, ContextBlock):
            add_text(_small(block.text))
        elif isinstance(block, DividerBlock):
            items.append(({"type": 14, "divider": True, "spacing": 1}, 1, 0))
        elif isinstance(block, ButtonsBlock):
            # a link over Discord's 512 characters (or not safe) moves to text
            native, moved = partition_link_buttons(block.buttons, MAX_URL)
            for start in range(0, len(native), 5):
                row = [_button(b, ids) for b in native[start : start + 5]]
                items.append(({"type": 1, "components": row}, 1 + len(row), 0))
            if moved:
                add_text(buttons_fallback_text(moved))
        elif isinstance(block, SelectBlock):
            select_index += 1
            select: dict[str, Any] = {"type": 3, "custom_id": f"ck:select:{select_index}"}
            if block.placeholder:
                select["placeholder"] = truncate_chars(block.placeholder, 150)
            option_ids = _Ids()  # option values are unique per select
            select["options"] = [
                {"label": o.label, "value": option_ids("value", o.option_value)}
                for o in block.options[:25]
            ]
            items.append(({"type": 1, "components": [select]}, 2, 0))
    return items


def render(
    presentation: MessagePresentation,
    *,
    text: str | None = None,
    allow_mass_mentions: bool = False,
) -> list[dict[str, Any]]:
    """Render an adapted presentation (plus optional leading ``text``) to message bodies."""
    mentions = MASS_MENTIONS if allow_mass_mentions else NO_MENTIONS
    accent = _ACCENTS.get(presentation.tone or "")
    messages: list[dict[str, Any]] = []
    children: list[dict[str, Any]] = []
    components = 1  # the container itself
    chars = 0

    def flush() -> None:
        container: dict[str, Any] = {"type": 17, "components": list(children)}
        if accent is not None:
            container["accent_color"] = accent
        messages.append(
            {
                "flags": IS_COMPONENTS_V2,
                "components": [container],
                "allowed_mentions": {"parse": list(mentions["parse"])},
            }
        )

    for item, count, length in _items(presentation, text):
        if children and (components + count > MAX_COMPONENTS or chars + length > MAX_TEXT):
            flush()
            children, components, chars = [], 1, 0
        children.append(item)
        components += count
        chars += length
    if children:
        flush()
    return messages

"""DingTalk renderer: presentation -> robot ``sampleMarkdown`` message bodies.

The robot send APIs channelkit uses (``/v1.0/robot/groupMessages/send`` and
``/v1.0/robot/oToMessages/batchSend``, see openapi/dingtalk.json) take a template key
and its JSON parameters. The presentation is one ``sampleMarkdown`` message
(``{"title", "text"}``), chosen over the ActionCard templates because robot buttons can
only open URLs (no callback reaches the bot) and the ActionCard keys hold one to five
buttons of one block, while Markdown links keep every block and button in authored
order:

* the title is a ``###`` heading (and the notification ``title``, cut to 64 characters);
* text blocks are Markdown as written (local ``[IMAGE: ...]`` markers hidden);
* context is a ``>`` quote; a divider is ``---``;
* buttons are a list, one per line: an http(s) link is a Markdown link
  ``- [label](url)``; a command reads ``- label: `/command` `` (the person sends it);
  a callback value cannot reach the bot, so it reads as its label; selects (not
  rendered natively) arrive as readable lists from ``adapt``. Tones are not shown.

Limits: each message text holds at most 3,800 characters and its ``msgParam`` (the
JSON text) at most 15,000 UTF-8 bytes; a longer presentation continues in further
messages (same title). The platform has no pinning for robot messages.
"""

from __future__ import annotations

import json
from typing import Any

from channelkit.platforms.dingtalk.markdown import escape_markdown, sanitize_image_markers
from channelkit.presentation.capabilities import (
    ActionLimits,
    DeliveryCapabilities,
    PresentationCapabilities,
    PresentationLimits,
    TextLimits,
)
from channelkit.presentation.fallback import select_fallback_text
from channelkit.presentation.model import (
    Button,
    ButtonsBlock,
    ContextBlock,
    DividerBlock,
    MessagePresentation,
    TextBlock,
)
from channelkit.presentation.rendering import split_nonblank
from channelkit.presentation.text import truncate

__all__ = [
    "CAPABILITIES",
    "DELIVERY_CAPABILITIES",
    "MAX_MESSAGE_CHARS",
    "MAX_PARAM_BYTES",
    "MSG_KEY",
    "PLATFORM",
    "markdown",
    "render",
]

PLATFORM = "dingtalk"
MSG_KEY = "sampleMarkdown"
#: Characters of one Markdown message (the adapter's own Markdown replies use the same).
MAX_MESSAGE_CHARS = 3_800
#: UTF-8 bytes of one ``msgParam`` (the robot API's documented bound).
MAX_PARAM_BYTES = 15_000
#: Characters of the notification title.
MAX_TITLE_CHARS = 64
MAX_BLOCK_CHARS = 3_000

CAPABILITIES = PresentationCapabilities(
    buttons=True,
    selects=False,
    context=True,
    divider=True,
    tones=(),
    limits=PresentationLimits(
        actions=ActionLimits(max_label_length=64, supports_styles=False),
        text=TextLimits(
            max_length=MAX_BLOCK_CHARS, encoding="characters", markdown_dialect="markdown"
        ),
    ),
)
DELIVERY_CAPABILITIES = DeliveryCapabilities(pin=False)


def _link_url(url: str) -> str | None:
    """``url`` safe inside ``[label](...)``, or None when it is not an http(s) link."""
    lowered = url.strip().lower()
    if not lowered.startswith(("https://", "http://")) or any(c.isspace() for c in url.strip()):
        return None
    return url.strip().replace("(", "%28").replace(")", "%29").replace("<", "%3C")


def _button_line(button: Button) -> str:
    label = escape_markdown(button.label)
    if button.disabled:
        return f"- {label}"
    if button.url is not None:
        link = _link_url(button.url)
        if link is not None:
            return f"- [{label}]({link})"
        return f"- {label}: {escape_markdown(button.url)}"
    if button.command is not None:
        return f"- {label}: `{button.command.replace('`', '')}`"
    return f"- {label}"


def _quote(text: str) -> str:
    return "\n".join(f"> {line}" if line.strip() else ">" for line in text.splitlines())


def markdown(presentation: MessagePresentation, text: str | None = None) -> str:
    """The whole presentation (after ``text``) as one DingTalk Markdown document."""
    parts: list[str] = []
    if text is not None and text.strip():
        parts.append(sanitize_image_markers(text.strip()))
    if presentation.title:
        parts.append("### " + escape_markdown(presentation.title))
    for block in presentation.blocks:
        if isinstance(block, TextBlock):
            rendered = sanitize_image_markers(block.text)
        elif isinstance(block, ContextBlock):
            rendered = _quote(sanitize_image_markers(block.text))
        elif isinstance(block, DividerBlock):
            rendered = "---"
        elif isinstance(block, ButtonsBlock):
            rendered = "\n".join(_button_line(b) for b in block.buttons)
        else:
            rendered = select_fallback_text(block)
        if block_continues(block) and parts:
            parts[-1] += rendered
        else:
            parts.append(rendered)
    return "\n\n".join(parts)


def block_continues(block: object) -> bool:
    """True for a continuation fragment of a split fallback list."""
    return bool(getattr(block, "continuation", False))


def _title(presentation: MessagePresentation, body: str) -> str:
    if presentation.title:
        source = presentation.title
    else:
        source = next((ln.strip(" #>*-`") for ln in body.splitlines() if ln.strip()), "")
    return truncate(" ".join(source.split()), MAX_TITLE_CHARS) or "Message"


def _param(title: str, text: str) -> str:
    return json.dumps({"title": title, "text": text}, ensure_ascii=False)


def _fits(title: str, text: str) -> bool:
    return len(_param(title, text).encode("utf-8")) <= MAX_PARAM_BYTES


def _pieces(title: str, body: str) -> list[str]:
    """``body`` cut into message texts within both limits (no text is lost)."""
    out: list[str] = []
    pending = split_nonblank(body, MAX_MESSAGE_CHARS, "characters")
    while pending:
        piece = pending.pop(0)
        if _fits(title, piece):
            out.append(piece)
            continue
        size = len(piece.encode("utf-8"))
        smaller = split_nonblank(piece, max(64, size // 2), "utf8-bytes")
        pending[:0] = smaller
    return out


def render(presentation: MessagePresentation, *, text: str | None = None) -> list[dict[str, Any]]:
    """Robot message bodies (``msgKey`` + ``msgParam``), in send order."""
    body = markdown(presentation, text)
    if not body.strip():
        return []
    title = _title(presentation, body)
    return [{"msgKey": MSG_KEY, "msgParam": _param(title, piece)} for piece in _pieces(title, body)]

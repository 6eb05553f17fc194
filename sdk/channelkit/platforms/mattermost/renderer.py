"""Mattermost renderer: presentation -> ``POST /api/v4/posts`` bodies.

``message`` is the full plain-text rendering (selects, dividers and link buttons read
as text). Callback and command buttons become interactive message actions, one
attachment per adapted buttons row; a click POSTs the action's ``context``
(``{"value": ...}`` or ``{"command": ...}``) to ``callback_url``. A message longer than
16,383 characters continues in further posts; the actions ride on the last one.

Mass mentions: unless the payload sets ``allow_mass_mentions``, ``@channel``, ``@all``
and ``@here`` (any case) get a WORD JOINER (U+2060) right after the ``@``
(`neutralise_mass_mentions()`). Mattermost finds mentions by splitting the message
into words at every character that is not a letter, digit or one of ``. - _ @ :``
(its documented username alphabet), so ``@\u2060here`` is the word ``@`` followed by
the word ``here``: no mention, no notification. The joiner is invisible, so the text
reads exactly as written (unlike a backslash or a code span, which Markdown would show
or restyle). E-mail-like text (``ops@here.example``) is left alone: Mattermost only
treats a word *starting* with ``@`` as a mention.
"""

from __future__ import annotations

import re
from typing import Any

from channelkit.presentation.capabilities import (
    ActionLimits,
    DeliveryCapabilities,
    PresentationCapabilities,
    PresentationLimits,
    TextLimits,
)
from channelkit.presentation.fallback import render_fallback_text
from channelkit.presentation.model import Button, ButtonsBlock, MessagePresentation
from channelkit.presentation.rendering import callback_payload, split_nonblank

__all__ = ["CAPABILITIES", "DELIVERY_CAPABILITIES", "PLATFORM", "render"]

PLATFORM = "mattermost"
MAX_MESSAGE = 16383
WORD_JOINER = "\u2060"
MASS_MENTION = re.compile(r"(?<![\w.@\-])@(?=(?:channel|all|here)(?![\w\-]))", re.IGNORECASE)


def neutralise_mass_mentions(text: str) -> str:
    """``text`` with ``@channel``/``@all``/``@here`` made inert (a WORD JOINER after the
    ``@``): it reads the same and notifies nobody."""
    if "@" not in text:
        return text
    return MASS_MENTION.sub("@" + WORD_JOINER, text)


CAPABILITIES = PresentationCapabilities(
    buttons=True,
    selects=False,
    context=True,
    divider=False,
    limits=PresentationLimits(
        actions=ActionLimits(
            max_actions=25,
            max_actions_per_row=5,
            max_rows=5,
            max_label_length=40,
            supports_styles=True,
        ),
        text=TextLimits(markdown_dialect="markdown"),
    ),
)
DELIVERY_CAPABILITIES = DeliveryCapabilities(pin=True)


def _action(button: Button, action_id: str, callback_url: str) -> dict[str, Any] | None:
    context = callback_payload(button)
    if context is None:
        return None  # link-only: Mattermost actions cannot open a URL; it stays in the text
    return {
        "id": action_id,
        "type": "button",
        "name": button.label,
        "style": button.style or "default",
        "integration": {"url": callback_url, "context": context},
    }


def render(
    presentation: MessagePresentation,
    *,
    text: str | None = None,
    callback_url: str,
    allow_mass_mentions: bool = False,
) -> list[dict[str, Any]]:
    """Render an adapted presentation to post bodies (without ``channel_id``).

    ``callback_url`` is the integration URL Mattermost calls on a click.
    """
    body = render_fallback_text(presentation, text)
    if not allow_mass_mentions:
        body = neutralise_mass_mentions(body)
    posts: list[dict[str, Any]] = [{"message": part} for part in split_nonblank(body, MAX_MESSAGE)]
    attachments: list[dict[str, Any]] = []
    for block_index, block in enumerate(presentation.blocks):
        if not isinstance(block, ButtonsBlock):
            continue
        actions = [
            a
            for a in (
                _action(b, f"ck{block_index}x{i}", callback_url)
                for i, b in enumerate(block.buttons)
            )
            if a is not None
        ]
        if actions:
            attachments.append({"text": "", "actions": actions})
    if attachments:
        if not posts:
            posts.append({"message": ""})
        posts[-1]["props"] = {"attachments": attachments}
    return posts

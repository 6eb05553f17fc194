"""``render_fallback_text``: the plain-text form of a presentation."""

from __future__ import annotations

from collections.abc import Iterable

from channelkit.presentation.adapt import button_fallback_label
from channelkit.presentation.model import (
    Button,
    ButtonsBlock,
    ContextBlock,
    MessagePresentation,
    SelectBlock,
    TextBlock,
)

__all__ = ["buttons_fallback_text", "render_fallback_text", "select_fallback_text"]


def buttons_fallback_text(buttons: Iterable[Button]) -> str:
    """Buttons as ``- label`` lines (``- label: url``, ``- label: `command` ``)."""
    return "\n".join(f"- {button_fallback_label(b)}" for b in buttons)


def select_fallback_text(block: SelectBlock) -> str:
    """A select as ``Placeholder:`` (or ``Options:``) followed by ``- label`` lines."""
    heading = f"{block.placeholder}:" if block.placeholder else "Options:"
    return heading + "".join(f"\n- {o.label}" for o in block.options)


def render_fallback_text(
    presentation: MessagePresentation | None,
    text: str | None = None,
    *,
    empty_fallback: str = "",
) -> str:
    """Render ``presentation`` (after ``text``, trimmed) as plain paragraphs.

    The title is a plain line; text and context read the same; dividers add nothing;
    buttons are ``- label`` lines (``- label: url`` for links, ``- label: `command` ``
    for commands; callback values are never shown); a select is ``placeholder:`` (or
    ``Options:``) followed by ``- label`` lines. Tone is never shown. Paragraphs are
    separated by a blank line; a ``continuation`` fragment is joined to the previous
    paragraph directly. Returns ``empty_fallback`` when nothing is left.
    """
    lines: list[str] = []
    if text is not None and text.strip():
        lines.append(text.strip())
    if presentation is not None:
        if presentation.title:
            lines.append(presentation.title)
        for block in presentation.blocks:
            if isinstance(block, TextBlock | ContextBlock):
                if block.continuation and lines:
                    lines[-1] += block.text
                else:
                    lines.append(block.text)
            elif isinstance(block, ButtonsBlock):
                lines.append(buttons_fallback_text(block.buttons))
            elif isinstance(block, SelectBlock):
                lines.append(select_fallback_text(block))
    return "\n\n".join(lines) or empty_fallback

"""The regular-expression Markdown -> Telegram HTML converter the Telegram adapter used
before `channelkit.markdown` (it was ``channelkit/platforms/telegram/markdown.py``), kept
unchanged here only so ``bench_markdown.py`` can time it beside the pipeline in the
same run. Nothing in the package imports it.
"""

from __future__ import annotations

import html
import re

__all__ = ["PARSE_MODE", "is_entity_error", "to_html"]

#: The parse mode `to_html()` output is sent with.
PARSE_MODE = "HTML"

_FENCE = re.compile(r"```[^\n`]*\n(.*?)(?:\n)?```", re.DOTALL)
_INLINE_CODE = re.compile(r"`([^`\n]+)`")
_BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*|__(?=\S)(.+?)(?<=\S)__", re.DOTALL)
_ITALIC = re.compile(r"(?<![\w*])\*(?=[^\s*])([^*\n]+?)(?<=[^\s*])\*(?![\w*])")
_STRIKE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~", re.DOTALL)
_LINK = re.compile(r"\[([^\]\n]+)\]\((https?://[^\s)]+)\)")
_HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$", re.MULTILINE)
_SLOT = "\x00{}\x00"
_SLOT_RE = re.compile("\x00(\\d+)\x00")


def to_html(text: str) -> str:
    """Telegram HTML for the Markdown ``text`` (plain text comes back escaped only)."""
    slots: list[str] = []

    def keep(fragment: str) -> str:
        slots.append(fragment)
        return _SLOT.format(len(slots) - 1)

    text = text.replace("\x00", "")
    text = _FENCE.sub(
        lambda m: keep(f"<pre><code>{html.escape(m.group(1), False)}</code></pre>"), text
    )
    text = _INLINE_CODE.sub(lambda m: keep(f"<code>{html.escape(m.group(1), False)}</code>"), text)
    text = _LINK.sub(
        lambda m: keep(
            f'<a href="{html.escape(m.group(2), True)}">{html.escape(m.group(1), False)}</a>'
        ),
        text,
    )
    text = html.escape(text, False)
    text = _HEADING.sub(r"<b>\1</b>", text)
    text = _BOLD.sub(lambda m: f"<b>{m.group(1) or m.group(2)}</b>", text)
    text = _STRIKE.sub(r"<s>\1</s>", text)
    text = _ITALIC.sub(r"<i>\1</i>", text)
    return _SLOT_RE.sub(lambda m: slots[int(m.group(1))], text)


def is_entity_error(exc: BaseException) -> bool:
    """True for Telegram's 400 answer to text whose entities it cannot parse."""
    status = getattr(exc, "status", None)
    return status == 400 and "can't parse entities" in str(exc).lower()

"""Validity checks of rendered output, shared by the Markdown tests."""

from __future__ import annotations

import re
from html.parser import HTMLParser

from channelkit.markdown import is_boundary

#: The tags Telegram's HTML parse mode accepts that the renderer writes.
TELEGRAM_TAGS = frozenset({"b", "i", "s", "code", "pre", "a", "blockquote"})
_RAW_AMP = re.compile(r"&(?!(?:amp|lt|gt|quot|#\d+);)")
_QUOTE_MARKERS = re.compile(r"^(?:> ?)+", re.MULTILINE)
_SLACK_LINK = re.compile(r"<(?:https?://|mailto:)[^<>|\s]*(?:\|[^<>]*)?>")


class _TagChecker(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in TELEGRAM_TAGS:
            self.errors.append(f"tag <{tag}> not allowed")
        allowed = {"a": {"href"}, "code": {"class"}}.get(tag, set())
        for name, _ in attrs:
            if name not in allowed:
                self.errors.append(f"attribute {name} on <{tag}>")
        if tag in ("code", "pre") and any(t in ("code",) for t in self.stack):
            self.errors.append(f"<{tag}> inside <code>")
        if tag == "blockquote" and "blockquote" in self.stack:
            self.errors.append("nested <blockquote>")
        self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> does not close {self.stack[-1:] or 'anything'}")
        else:
            self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def telegram_errors(html: str) -> list[str]:
    """What makes ``html`` invalid for Telegram (``[]``: valid, balanced, escaped)."""
    checker = _TagChecker()
    checker.feed(html)
    checker.close()
    errors = list(checker.errors)
    if checker.stack:
        errors.append(f"unclosed {checker.stack}")
    if _RAW_AMP.search(html):
        errors.append("an unescaped &")
    return errors


def telegram_text(html: str) -> str:
    """The text Telegram shows for ``html`` (tags dropped, entities decoded)."""
    checker = _TagChecker()
    checker.feed(html)
    checker.close()
    return "".join(checker.text)


def slack_errors(mrkdwn: str) -> list[str]:
    """What makes ``mrkdwn`` unsafe for Slack: a ``<`` or ``>`` outside a link, ``<!``,
    a raw ``&``."""
    errors = []
    if "<!" in mrkdwn:
        errors.append("a <! mass mention")
    rest = _SLACK_LINK.sub("", _QUOTE_MARKERS.sub("", mrkdwn))  # ">" opens a quote line
    if "<" in rest or ">" in rest:
        errors.append("an unescaped < or >")
    if _RAW_AMP.search(mrkdwn):
        errors.append("an unescaped &")
    return errors


def fences_balanced(markdown: str) -> bool:
    """True when every code fence opened in ``markdown`` is closed (a fence may open
    right after a list item's bullet or number: a code block inside the item)."""
    fence: str | None = None
    for line in markdown.split("\n"):
        match = re.match(r"^ *(?:(?:[-*+•]|\d+[.)]) +)?(`{3,})(.*)$", line)
        if not match:
            continue
        if fence is None:
            fence = match.group(1)
        elif match.group(1) == fence and not match.group(2).strip():
            fence = None
    return fence is None


def cut_is_clean(before: str, after: str) -> bool:
    """True when the cut between two parts' texts splits no grapheme cluster."""
    if not before or not after:
        return True
    return is_boundary(before + after, len(before))

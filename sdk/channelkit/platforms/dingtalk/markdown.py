"""Small text helpers for DingTalk cards and Markdown messages: the agent's Markdown as
DingTalk Markdown (`card_markdown()`), image markers, literal Markdown, and the bounded
summary of submitted answers a question card shows."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from channelkit.core.catalog import Messages, en, messages
from channelkit.markdown import Dialect, looks_plain, render

__all__ = [
    "DELIVERY_FAILED_TEXT",
    "IMAGE_PENDING",
    "MAX_SHOWN_ANSWERS_CHARS",
    "MAX_SHOWN_ANSWER_CHARS",
    "answers_summary",
    "card_markdown",
    "cut_text",
    "delivery_failure_text",
    "escape_markdown",
    "message_markdown",
    "option_label",
    "sanitize_image_markers",
]

#: Characters of one submitted answer shown on the card (longer ones are cut with "…").
MAX_SHOWN_ANSWER_CHARS = 200
#: Characters of the whole submitted-answers summary shown on the card.
MAX_SHOWN_ANSWERS_CHARS = 1_000


#: What an unresolved local image marker becomes in visible text.
IMAGE_PENDING = en("marker.image_pending")
#: The first line of the Markdown sent when a question card could not be delivered.
DELIVERY_FAILED_TEXT = en("dingtalk.delivery_failed")

_COMPLETE = re.compile(r"\[IMAGE:[^\]\n]*\]")
_PARTIAL = re.compile(r"\[IMAGE:[^\]\n]*$")


def sanitize_image_markers(text: str, texts: Messages | None = None) -> str:
    """Replace local image markers (``[IMAGE: /path]``, also a trailing partial one)
    by `IMAGE_PENDING` in the language of ``texts`` (default English).

    The adapter does not upload images, so a marker would only expose a local path.
    """
    if "[IMAGE:" not in text:
        return text
    pending = (texts or messages()).text(IMAGE_PENDING)
    return _PARTIAL.sub(lambda _: pending, _COMPLETE.sub(lambda _: pending, text))


def card_markdown(text: str, *, preview: bool = False, texts: Messages | None = None) -> str:
    """The agent's Markdown ``text`` as DingTalk Markdown (`channelkit.markdown`,
    ``Dialect.DINGTALK``: no strikethrough, tables by the table policy), image markers
    replaced first; ``preview``: the text so far, its open constructs closed. A text the
    rendering would not change (no Markdown) comes back as written. ``texts``: the
    language of the image marker (default English)."""
    text = sanitize_image_markers(text, texts)
    if looks_plain(text):
        return text
    rendered = "\n\n".join(render(text, Dialect.DINGTALK, preview=preview))
    return text if rendered == text.strip() else rendered


def message_markdown(text: str, limit: int, texts: Messages | None = None) -> list[str]:
    """The agent's Markdown ``text`` as the texts of DingTalk Markdown messages (robot
    ``sampleMarkdown`` or session-webhook ``markdown``), each at most ``limit``
    characters: the same rendering as a card (`card_markdown()`: ``Dialect.DINGTALK``,
    tables by the table policy, image markers replaced), split at block boundaries.
    A text the rendering would not change is cut by characters as written; an empty
    text gives one empty part. ``texts``: the language of the image marker."""
    text = sanitize_image_markers(text, texts)
    as_written = [text[i : i + limit] for i in range(0, len(text), limit)] or [""]
    if looks_plain(text):
        return as_written
    parts = render(text, Dialect.DINGTALK, limit=limit)
    if not parts or (len(parts) == 1 and parts[0] == text.strip()):
        return as_written
    return parts


_MARKDOWN_SPECIAL = frozenset("\\`*_{}[]()#+-.!|~>")
_HTML_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}


def escape_markdown(text: str) -> str:
    """``text`` as literal card Markdown: HTML characters as entities, Markdown
    punctuation backslash-escaped, line breaks as spaces."""
    out: list[str] = []
    for char in " ".join(text.split()):
        entity = _HTML_ENTITIES.get(char)
        if entity is not None:
            out.append(entity)
        elif char in _MARKDOWN_SPECIAL:
            out.append("\\" + char)
        else:
            out.append(char)
    return "".join(out)


def cut_text(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, ending in "…" when cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def answers_summary(questions: Sequence[Any], answers: Mapping[str, str]) -> str:
    """What a submitted card shows: one ``- <question>: <answer>`` line per question.

    Each answer is cut to ``MAX_SHOWN_ANSWER_CHARS`` and the whole summary to
    ``MAX_SHOWN_ANSWERS_CHARS`` (before escaping, so an escape is never split), then
    escaped with `escape_markdown()`.
    """
    lines: list[str] = []
    budget = MAX_SHOWN_ANSWERS_CHARS
    for q in questions:
        answer = answers.get(q.answer_key)
        if answer is None or budget <= 0:
            continue
        label = cut_text(" ".join(str(q.question or q.header).split()), MAX_SHOWN_ANSWER_CHARS)
        line = f"{label}: {cut_text(' '.join(answer.split()), MAX_SHOWN_ANSWER_CHARS)}"
        line = cut_text(line, budget)
        budget -= len(line)
        lines.append(line)
    return "\n".join("- " + escape_markdown(line) for line in lines)


def option_label(option: Any) -> str:
    """The label of a question option (an object with ``label`` or a (label, desc) pair)."""
    label = getattr(option, "label", None)
    if isinstance(label, str):
        return label
    if isinstance(option, Mapping) and isinstance(option.get("label"), str):
        return str(option["label"])
    if isinstance(option, tuple | list) and option and isinstance(option[0], str):
        return option[0]
    return str(option)


def delivery_failure_text(questions: Sequence[Any], texts: Messages | None = None) -> str:
    """The Markdown sent when the question card could not be delivered, its notice in
    the language of ``texts`` (default English)."""
    lines = [(texts or messages()).text(DELIVERY_FAILED_TEXT)]
    for q in questions:
        labels = ", ".join(option_label(o) for o in q.options)
        lines.append(f"- {q.question}: {labels}")
    return "\n".join(lines)

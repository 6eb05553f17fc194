"""Feishu card JSON (schema 2.0) for the streaming output card and the question form.

Pure functions: they build dicts and never call the network. The strings come from
`STRINGS` in three languages (``zh`` default, ``en``, ``de``), the ``card.*`` entries of
the message catalog (`channelkit.core.catalog`).

Output card layout (element ids are stable so CardKit can stream into them)::

    header   title, colour by state (blue running, green completed, grey cancelled/
             stopped, red failed)
    content  markdown, the segment's visible text (CardKit streams this element)
    status   markdown, "*<label>*"
    stop     danger button, callback value {"action": "ck_stop", "segment": <id>},
             only while running

Form card layout: one ``form`` container holding, per question, a markdown block,
a ``select_static`` (or ``multi_select_static``) named by the answer key whose option
values are option indexes, and optionally an ``input`` named ``<key>_other`` for custom
text; then Submit and Cancel buttons (both ``form_action_type: submit`` so the callback
names the pressed button). Terminal form cards are the same questions rendered as
read-only markdown with the terminal label.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from channelkit.core.catalog import CATALOG
from channelkit.markdown import Dialect, looks_plain, render

__all__ = [
    "CANCEL_ACTION",
    "CARD_LOCALES",
    "CONTENT_ELEMENT_ID",
    "MAX_SHOWN_ANSWERS_CHARS",
    "MAX_SHOWN_ANSWER_CHARS",
    "STATUS_ELEMENT_ID",
    "STOP_ACTION",
    "STRINGS",
    "SUBMIT_ACTION",
    "OutputState",
    "QuestionState",
    "card_markdown",
    "escape_markdown",
    "form_card",
    "form_terminal_card",
    "output_card",
    "status_label",
    "streaming_card_entity",
    "strings",
]

OutputState = Literal["running", "completed", "cancelled", "failed", "stopped"]
QuestionState = Literal["pending", "processing", "submitted", "cancelled", "expired"]

CONTENT_ELEMENT_ID = "ck_content"
STATUS_ELEMENT_ID = "ck_status"
STOP_ELEMENT_ID = "ck_stop"
FORM_NAME = "ck_form"
STOP_ACTION = "ck_stop"
SUBMIT_ACTION = "ck_submit"
CANCEL_ACTION = "ck_cancel"
#: Suffix of the optional custom-text input's name: ``<answer_key>_other``.
OTHER_SUFFIX = "_other"
#: Characters of one submitted answer shown on a terminal form card (then "…").
MAX_SHOWN_ANSWER_CHARS = 200
#: Characters of all submitted answers shown on one terminal form card.
MAX_SHOWN_ANSWERS_CHARS = 1_000

#: Feishu card language -> the catalog locale of its texts
CARD_LOCALES = {"zh": "zh-CN", "en": "en", "de": "de"}
#: The card texts per card language: the catalog's ``card.*`` entries
#: (`channelkit.core.catalog`), e.g. ``STRINGS["zh"]["failed"] == "已失败，请重试"``.
STRINGS: dict[str, dict[str, str]] = {
    language: {
        key.removeprefix("card."): text
        for key, text in CATALOG[locale].items()
        if key.startswith("card.")
    }
    for language, locale in CARD_LOCALES.items()
}

_TEMPLATES: dict[str, str] = {
    "running": "blue",
    "completed": "green",
    "cancelled": "grey",
    "stopped": "grey",
    "failed": "red",
}


def strings(language: str) -> Mapping[str, str]:
    """The string table for ``language`` (falls back to ``zh``)."""
    return STRINGS.get(language, STRINGS["zh"])


def status_label(state: OutputState, language: str = "zh") -> str:
    """The status label of an output card state, e.g. ``已完成`` / ``Completed``."""
    return strings(language)[state]


def _plain(text: str) -> dict[str, Any]:
    return {"tag": "plain_text", "content": text}


def _header(title: str, template: str) -> dict[str, Any]:
    return {"title": _plain(title), "template": template}


def _summary(text: str, fallback: str) -> dict[str, Any]:
    snippet = " ".join(text.split())[:120]
    return {"content": snippet or fallback}


def queue_notice_card(text: str) -> dict[str, Any]:
    """The queue notice as a small updatable card (its text replaced as the queue moves:
    ``update_multi`` lets the bot PATCH it). ``text`` is one of the core's own notices
    (no Markdown to escape)."""
    return {
        "schema": "2.0",
        "config": {"update_multi": True, "summary": {"content": text[:120]}},
        "body": {"elements": [{"tag": "markdown", "content": text}]},
    }


def card_markdown(text: str, *, preview: bool = False) -> str:
    """The agent's Markdown ``text`` as Feishu card Markdown (`channelkit.markdown`,
    ``Dialect.FEISHU``: native tables, literal Markdown characters as character
    references); ``preview``: the text so far, its open constructs closed. A text without
    Markdown comes back as written."""
    if looks_plain(text):
        return text
    rendered = "\n\n".join(render(text, Dialect.FEISHU, preview=preview))
    return text if rendered == text.strip() else rendered


def output_elements(
    text: str, state: OutputState, language: str, *, stop_value: Mapping[str, Any] | None
) -> list[dict[str, Any]]:
    """The body elements of an output card (content - the agent's Markdown rendered by
    `card_markdown()`, a preview while running -, status, optional Stop button)."""
    s = strings(language)
    content = card_markdown(text, preview=state == "running")
    elements: list[dict[str, Any]] = [
        {"tag": "markdown", "element_id": CONTENT_ELEMENT_ID, "content": content},
        {"tag": "markdown", "element_id": STATUS_ELEMENT_ID, "content": f"*{s[state]}*"},
    ]
    if state == "running" and stop_value is not None:
        elements.append(
            {
                "tag": "button",
                "element_id": STOP_ELEMENT_ID,
                "text": _plain(s["stop"]),
                "type": "danger",
                "behaviors": [{"type": "callback", "value": dict(stop_value)}],
            }
        )
    return elements


def output_card(
    text: str,
    state: OutputState,
    language: str = "zh",
    *,
    title: str | None = None,
    stop_value: Mapping[str, Any] | None = None,
    streaming: bool = False,
) -> dict[str, Any]:
    """A complete output card.

    ``streaming=True`` produces the CardKit entity form (``streaming_mode`` on); the IM
    PATCH fallback uses ``streaming=False``. ``stop_value`` is the Stop button's callback
    value (shown only while ``state == "running"``).
    """
    s = strings(language)
    config: dict[str, Any] = {
        "update_multi": True,
        "summary": _summary(text, s[state]),
    }
    if streaming:
        config["streaming_mode"] = True
        config["streaming_config"] = {
            "print_frequency_ms": {"default": 50},
            "print_step": {"default": 2},
            "print_strategy": "fast",
        }
    return {
        "schema": "2.0",
        "config": config,
        "header": _header(title or s["title"], _TEMPLATES[state]),
        "body": {"elements": output_elements(text, state, language, stop_value=stop_value)},
    }


def streaming_card_entity(
    text: str,
    language: str = "zh",
    *,
    title: str | None = None,
    stop_value: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The running CardKit card entity (``streaming_mode`` on) created on first text."""
    return output_card(
        text, "running", language, title=title, stop_value=stop_value, streaming=True
    )


# --- question form ------------------------------------------------------------------


def _question_markdown(question: Any) -> str:
    lines = []
    header = str(getattr(question, "header", "") or "").strip()
    text = str(getattr(question, "question", "") or "").strip()
    if header:
        lines.append(f"**{header}**")
    if text:
        lines.append(f"> {text}")
    described = []
    for label, description in _options(question):
        if description:
            described.append(f"> **{label}**: {description}")
    if described:
        lines.append("")
        lines.extend(described)
    return "\n".join(lines)


def _options(question: Any) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for option in getattr(question, "options", ()) or ():
        if isinstance(option, Mapping):
            label = option.get("label", "")
            description = option.get("description", "")
        elif isinstance(option, Sequence) and not isinstance(option, str):
            label = option[0] if len(option) > 0 else ""
            description = option[1] if len(option) > 1 else ""
        else:
            label = getattr(option, "label", option)
            description = getattr(option, "description", "")
        out.append((str(label), str(description or "")))
    return out


def option_labels(question: Any) -> list[str]:
    """The option labels of a normalized question, in order."""
    return [label for label, _ in _options(question)]


def form_card(
    request_id: str,
    questions: Sequence[Any],
    language: str = "zh",
    *,
    title: str | None = None,
    custom_text: bool = True,
) -> dict[str, Any]:
    """The pending question form bound to ``request_id``.

    ``questions`` are normalized questions (``answer_key``, ``header``, ``question``,
    ``options`` as ``(label, description)`` pairs or objects, ``multi_select``).
    """
    s = strings(language)
    inner: list[dict[str, Any]] = []
    for question in questions:
        key = str(question.answer_key)
        inner.append({"tag": "markdown", "content": _question_markdown(question)})
        inner.append(
            {
                "tag": "multi_select_static" if question.multi_select else "select_static",
                "name": key,
                "placeholder": _plain(s["select"]),
                "width": "fill",
                "options": [
                    {"text": _plain(label), "value": str(index)}
                    for index, label in enumerate(option_labels(question))
                ],
            }
        )
        if custom_text:
            inner.append(
                {
                    "tag": "input",
                    "name": key + OTHER_SUFFIX,
                    "placeholder": _plain(s["other"]),
                    "width": "fill",
                    "max_length": 500,
                }
            )
    for action, label, kind in (
        (SUBMIT_ACTION, s["submit"], "primary"),
        (CANCEL_ACTION, s["cancel"], "default"),
    ):
        inner.append(
            {
                "tag": "button",
                "name": f"{action}_{request_id}",
                "text": _plain(label),
                "type": kind,
                "form_action_type": "submit",
                "behaviors": [
                    {"type": "callback", "value": {"action": action, "request": request_id}}
                ],
            }
        )
    return {
        "schema": "2.0",
        "config": {"update_multi": True, "summary": {"content": title or s["form_title"]}},
        "header": _header(title or s["form_title"], "blue"),
        "body": {"elements": [{"tag": "form", "name": FORM_NAME, "elements": inner}]},
    }


#: Characters that would be read as Markdown or HTML, written as numeric entities.
_SPECIAL = frozenset("\\`*_{}[]()#+-.!|~<>&\"'$:")


def escape_markdown(text: str) -> str:
    """``text`` as literal card Markdown: every Markdown/HTML special character as a
    numeric character reference (``*`` -> ``&#42;``), line breaks as spaces."""
    return "".join(f"&#{ord(c)};" if c in _SPECIAL else c for c in " ".join(text.split()))


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= max(limit, 0) else text[: max(limit - 1, 0)] + "…"


def form_terminal_card(
    questions: Sequence[Any],
    state: QuestionState,
    language: str = "zh",
    *,
    title: str | None = None,
    answers: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The read-only form card in ``state`` (processing/submitted/cancelled/expired).

    Submitted answers are shown only when ``answers`` is given (the chat already holds
    them; they are never logged): each cut to ``MAX_SHOWN_ANSWER_CHARS``, all of them to
    ``MAX_SHOWN_ANSWERS_CHARS``, and escaped (`escape_markdown()`).
    """
    s = strings(language)
    label = s["q_" + state] if state != "pending" else s["form_title"]
    template = {"processing": "blue", "submitted": "green"}.get(state, "grey")
    elements: list[dict[str, Any]] = []
    budget = MAX_SHOWN_ANSWERS_CHARS
    for question in questions:
        block = _question_markdown(question)
        if answers is not None and str(question.answer_key) in answers and budget > 0:
            answer = " ".join(str(answers[str(question.answer_key)]).split())
            answer = _cut(_cut(answer, MAX_SHOWN_ANSWER_CHARS), budget)
            budget -= len(answer)
            block += f"\n\n**→** {escape_markdown(answer)}"
        elements.append({"tag": "markdown", "content": block})
    elements.append({"tag": "markdown", "content": f"*{label}*"})
    return {
        "schema": "2.0",
        "config": {"update_multi": True, "summary": {"content": label}},
        "header": _header(title or s["form_title"], template),
        "body": {"elements": elements},
    }

"""Semantic recognition of structured user questions in permission requests.

A permission request is a *user question* when

1. ``tool_call["_meta"]["qwenInteractionKind"] == "user_question"`` (canonical); the
   questions come from ``_meta["qwenQuestions"]`` and nothing else, or
2. the tool is identified as AskUserQuestion (``_meta["toolName"]`` or the tool
   ``kind`` is ``"ask_user_question"``); the questions come from
   ``rawInput["questions"]``.

A different tool that merely has a ``questions`` argument is not a question. A
semantic request must carry 1-4 questions, each with a non-blank ``header`` and
``question`` and 2-4 options (non-blank ``label``, string ``description``) and an
optional boolean ``multiSelect``; anything else makes the whole request malformed (it is
never partially rendered). Answer keys are ``str(index)``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from channelkit.agents.base import PermissionOption
from channelkit.core.types import ChannelUserQuestion, QuestionOption

__all__ = [
    "ASK_USER_QUESTION",
    "MAX_OPTIONS",
    "MAX_QUESTIONS",
    "MIN_OPTIONS",
    "QuestionNormalization",
    "always_option_id",
    "approval_option_id",
    "is_reject_option",
    "normalize_user_questions",
    "reject_option_id",
]

logger = logging.getLogger(__name__)

ASK_USER_QUESTION = "ask_user_question"
MAX_QUESTIONS = 4
MIN_OPTIONS = 2
MAX_OPTIONS = 4


@dataclass(frozen=True)
class QuestionNormalization:
    """Result of `normalize_user_questions()`.

    ``kind`` is ``"question"`` (``questions`` is set), ``"malformed"`` (semantic but
    invalid: ``problem`` names the first bad field) or ``"none"`` (not a question).
    """

    kind: Literal["question", "malformed", "none"]
    questions: tuple[ChannelUserQuestion, ...] = ()
    problem: str | None = None
    source: Literal["canonical", "legacy", ""] = ""

    @property
    def ok(self) -> bool:
        return self.kind == "question"


def _nonblank(value: object) -> bool:
    return isinstance(value, str) and value.strip() != ""


def _parse(raw: object) -> tuple[tuple[ChannelUserQuestion, ...] | None, str | None]:
    if not isinstance(raw, Sequence) or isinstance(raw, str | bytes):
        return None, "questions: not a list"
    if not 1 <= len(raw) <= MAX_QUESTIONS:
        return None, f"questions: {len(raw)} questions (1-{MAX_QUESTIONS} allowed)"
    out: list[ChannelUserQuestion] = []
    for index, item in enumerate(raw):
        where = f"questions[{index}]"
        if not isinstance(item, Mapping):
            return None, f"{where}: not an object"
        header, question = item.get("header"), item.get("question")
        if not _nonblank(header):
            return None, f"{where}.header: blank or missing"
        if not _nonblank(question):
            return None, f"{where}.question: blank or missing"
        options = item.get("options")
        if not isinstance(options, Sequence) or isinstance(options, str | bytes):
            return None, f"{where}.options: not a list"
        if not MIN_OPTIONS <= len(options) <= MAX_OPTIONS:
            return None, f"{where}.options: {len(options)} options ({MIN_OPTIONS}-{MAX_OPTIONS})"
        parsed: list[QuestionOption] = []
        for oi, option in enumerate(options):
            if not isinstance(option, Mapping):
                return None, f"{where}.options[{oi}]: not an object"
            label, description = option.get("label"), option.get("description", "")
            if not _nonblank(label):
                return None, f"{where}.options[{oi}].label: blank or missing"
            if description is None:
                description = ""
            if not isinstance(description, str):
                return None, f"{where}.options[{oi}].description: not a string"
            parsed.append(QuestionOption(str(label), description))
        multi = item.get("multiSelect")
        if multi is not None and not isinstance(multi, bool):
            return None, f"{where}.multiSelect: not a boolean"
        out.append(
            ChannelUserQuestion(
                answer_key=str(index),
                header=str(header),
                question=str(question),
                options=tuple(parsed),
                multi_select=bool(multi),
            )
        )
    return tuple(out), None


def normalize_user_questions(tool_call: Mapping[str, Any] | None) -> QuestionNormalization:
    """Recognize and normalize the structured questions of an ACP ``toolCall``."""
    if not isinstance(tool_call, Mapping):
        return QuestionNormalization("none")
    meta = tool_call.get("_meta")
    meta = meta if isinstance(meta, Mapping) else {}
    if meta.get("qwenInteractionKind") == "user_question":
        questions, problem = _parse(meta.get("qwenQuestions"))
        if questions is None:
            return QuestionNormalization("malformed", problem=problem, source="canonical")
        return QuestionNormalization("question", questions, source="canonical")
    if meta.get("toolName") == ASK_USER_QUESTION or tool_call.get("kind") == ASK_USER_QUESTION:
        raw_input = tool_call.get("rawInput")
        raw = raw_input.get("questions") if isinstance(raw_input, Mapping) else None
        questions, problem = _parse(raw)
        if questions is None:
            return QuestionNormalization("malformed", problem=problem, source="legacy")
        return QuestionNormalization("question", questions, source="legacy")
    return QuestionNormalization("none")


def approval_option_id(options: Iterable[PermissionOption]) -> str | None:
    """The submit/approve option: first ``kind == "allow_once"``, else ``proceed_once``
    without a kind. Never invented: None when neither exists."""
    opts = list(options)
    for option in opts:
        if option.kind == "allow_once":
            return option.option_id
    for option in opts:
        if option.option_id == "proceed_once" and option.kind is None:
            return option.option_id
    return None


def always_option_id(options: Iterable[PermissionOption]) -> str | None:
    """The approve-always option: ``proceed_always_project``, ``proceed_always_user``,
    else the first ``allow_always`` option."""
    opts = list(options)
    ids = {o.option_id for o in opts}
    for preferred in ("proceed_always_project", "proceed_always_user"):
        if preferred in ids:
            return preferred
    for option in opts:
        if option.kind == "allow_always":
            return option.option_id
    return None


def is_reject_option(option: PermissionOption) -> bool:
    """A ``reject_once`` option, or the legacy ``cancel`` option without a kind."""
    return option.kind == "reject_once" or (option.option_id == "cancel" and option.kind is None)


def reject_option_id(options: Iterable[PermissionOption]) -> str | None:
    """The deny option (``reject_always`` is never used)."""
    for option in options:
        if is_reject_option(option):
            return option.option_id
    return None

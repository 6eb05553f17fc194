"""Moved: the question cards live in :mod:`channelkit.platforms.dingtalk.questions`."""

from channelkit.platforms.dingtalk.questions import (
    HANDLED,
    MAX_LIVE_QUESTION_CARDS,
    NEWER_QUESTION_TEXT,
    OTHER_OPTION_VALUE,
    PRESENTED,
    UNAVAILABLE_TEXT,
    UNSUPPORTED,
    FormSpec,
    QuestionCardController,
    QuestionRecord,
    QuestionTombstone,
    build_question_card_data,
    delivery_failure_text,
    parse_answers,
    terminal_param_map,
)

__all__ = [
    "HANDLED",
    "MAX_LIVE_QUESTION_CARDS",
    "NEWER_QUESTION_TEXT",
    "OTHER_OPTION_VALUE",
    "PRESENTED",
    "UNAVAILABLE_TEXT",
    "UNSUPPORTED",
    "FormSpec",
    "QuestionCardController",
    "QuestionRecord",
    "QuestionTombstone",
    "build_question_card_data",
    "delivery_failure_text",
    "parse_answers",
    "terminal_param_map",
]

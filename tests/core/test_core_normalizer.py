from __future__ import annotations

import copy

import pytest
from channelkit.agents.base import PermissionOption
from channelkit.core import (
    ChannelUserQuestion,
    QuestionOption,
    approval_option_id,
    normalize_user_questions,
    reject_option_id,
)
from channelkit.core.questions import always_option_id
from channelkit.testing import DEFAULT_QUESTIONS, question_request


def canonical(questions):
    return {
        "kind": "other",
        "_meta": {"qwenInteractionKind": "user_question", "qwenQuestions": questions},
    }


def test_canonical_questions_get_index_keys_and_default_multiselect():
    result = normalize_user_questions(question_request("r", "s").tool_call)
    assert result.ok and result.source == "canonical"
    assert result.questions == (
        ChannelUserQuestion(
            "0",
            "Region",
            "Which region?",
            (QuestionOption("Beijing", "cn-north"), QuestionOption("Shanghai", "cn-east")),
            False,
        ),
        ChannelUserQuestion(
            "1",
            "Signals",
            "Which signals?",
            (QuestionOption("Logs", ""), QuestionOption("Metrics", "")),
            True,
        ),
    )
    assert result.questions[0].options[0] == ("Beijing", "cn-north")


def test_canonical_wins_over_stale_raw_input():
    tool_call = canonical(DEFAULT_QUESTIONS[:1])
    tool_call["rawInput"] = {"questions": DEFAULT_QUESTIONS}
    result = normalize_user_questions(tool_call)
    assert len(result.questions) == 1


def test_legacy_raw_input_only_for_identified_ask_user_question():
    legacy = question_request("r", "s", canonical=False, legacy=True).tool_call
    assert "_meta" not in legacy
    result = normalize_user_questions(legacy)
    assert result.ok and result.source == "legacy"
    assert [q.answer_key for q in result.questions] == ["0", "1"]
    by_tool_name = {
        "kind": "other",
        "_meta": {"toolName": "ask_user_question"},
        "rawInput": {"questions": DEFAULT_QUESTIONS},
    }
    assert normalize_user_questions(by_tool_name).ok


def test_other_tool_with_questions_argument_is_not_semantic():
    tool_call = {"kind": "other", "title": "Survey", "rawInput": {"questions": DEFAULT_QUESTIONS}}
    assert normalize_user_questions(tool_call).kind == "none"
    tool_call["_meta"] = {"toolName": "run_survey"}
    assert normalize_user_questions(tool_call).kind == "none"
    assert normalize_user_questions(None).kind == "none"


def _q(options=2, **over):
    if isinstance(options, int):
        options = [{"label": f"o{i}", "description": ""} for i in range(options)]
    q = {"header": "H", "question": "Q?", "options": options}
    q.update(over)
    return q


@pytest.mark.parametrize(
    "questions",
    [
        [],
        [_q() for _ in range(5)],
        [_q(options=1)],
        [_q(options=5)],
        [_q(header="  ")],
        [_q(header=None)],
        [_q(question="")],
        [_q(multiSelect="yes")],
        [_q(multiSelect=1)],
        [_q(options=[{"label": " ", "description": ""}, {"label": "b"}])],
        [_q(options=[{"label": "a", "description": 3}, {"label": "b"}])],
        "not a list",
        None,
        [["not", "an", "object"]],
    ],
)
def test_malformed_shapes_are_unsupported(questions):
    result = normalize_user_questions(canonical(questions))
    assert result.kind == "malformed" and not result.ok and result.questions == ()
    assert result.problem


def test_malformed_canonical_does_not_fall_back_to_legacy():
    tool_call = canonical([])
    tool_call["kind"] = "ask_user_question"
    tool_call["rawInput"] = {"questions": DEFAULT_QUESTIONS}
    assert normalize_user_questions(tool_call).kind == "malformed"


def test_bounds_are_inclusive():
    assert normalize_user_questions(canonical([_q()])).ok
    assert normalize_user_questions(canonical([_q(options=4) for _ in range(4)])).ok


def test_original_payload_is_not_mutated():
    questions = [_q()]
    before = copy.deepcopy(questions)
    normalize_user_questions(canonical(questions))
    assert questions == before


def test_submit_option_rules():
    assert approval_option_id([PermissionOption("x", "Submit", "allow_once")]) == "x"
    # legacy proceed_once without a kind
    assert approval_option_id([PermissionOption("proceed_once", "Submit")]) == "proceed_once"
    # proceed_once with another kind is not an approval; never invented
    assert approval_option_id([PermissionOption("proceed_once", "S", "allow_always")]) is None
    assert approval_option_id([PermissionOption("cancel", "Cancel", "reject_once")]) is None
    assert approval_option_id([]) is None
    # allow_once kind preferred over legacy id
    opts = [PermissionOption("proceed_once", "Old"), PermissionOption("ok", "New", "allow_once")]
    assert approval_option_id(opts) == "ok"


def test_reject_and_always_option_rules():
    assert reject_option_id([PermissionOption("cancel", "Cancel")]) == "cancel"
    assert reject_option_id([PermissionOption("no", "No", "reject_once")]) == "no"
    assert reject_option_id([PermissionOption("never", "Never", "reject_always")]) is None
    opts = [
        PermissionOption("proceed_always_user", "U", "allow_always"),
        PermissionOption("proceed_always_project", "P", "allow_always"),
    ]
    assert always_option_id(opts) == "proceed_always_project"
    assert always_option_id([PermissionOption("sandbox_bypass_project", "S", "x")]) is None
    assert always_option_id([PermissionOption("aa", "A", "allow_always")]) == "aa"

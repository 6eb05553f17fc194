"""Slack native questions: a Block Kit form answering the original request once."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import requests_mock as rm
from channelkit.platforms.slack.questions import (
    CANCEL_ACTION,
    SUBMIT_ACTION,
    TEXT_ANSWER_ALL,
    TEXT_NOT_OWNER,
)
from channelkit.testing import ScriptedBridge, ask, chunk, question_request, wait_until

from tests.platforms._shared import question
from tests.platforms.slack.slack_env import OWNER, STRANGER, Env, mock_web_api

QUESTIONS = [question("Env", ["Prod", "Staging"]), question("Parts", ["Logs", "Metrics"], True)]


@pytest.fixture
def env(rt) -> Iterator[Env]:  # type: ignore[no-untyped-def]
    steps = [ask(lambda s: question_request("req-1", s, QUESTIONS), timeout=30.0), chunk("thanks")]
    with rm.Mocker() as m:
        mock_web_api(m)
        e = Env(rt, m, ScriptedBridge(steps))
        yield e
        e.channel.close(2.0)


def _form(env: Env) -> tuple[dict[str, Any], str, str]:
    """The posted form, its ts and the Submit button's token."""
    wait_until(lambda: env.channel.questions.live_count() == 1, what="the form is live")
    for request in env.mock.request_history:
        if request.path.endswith("/chat.postmessage"):
            body = request.json()
            if any(b.get("block_id") == "ckq_buttons" for b in body.get("blocks", [])):
                buttons = next(b for b in body["blocks"] if b.get("block_id") == "ckq_buttons")
                token = buttons["elements"][0]["value"]
                index = env.mock.request_history.index(request)
                return body, f"1700000000.{index + 1:06d}", token
    raise AssertionError("no form posted")


def _state(env_choice: str, parts: list[str], other: str = "") -> dict[str, Any]:
    return {
        "ckq_0": {
            "ck:q:choice:0": {"type": "radio_buttons", "selected_option": {"value": env_choice}}
        },
        "ckq_other_0": {"ck:q:other:0": {"type": "plain_text_input", "value": None}},
        "ckq_1": {
            "ck:q:choice:1": {
                "type": "checkboxes",
                "selected_options": [{"value": v} for v in parts],
            }
        },
        "ckq_other_1": {"ck:q:other:1": {"type": "plain_text_input", "value": other}},
    }


def _ts_of_form(env: Env) -> str:
    ts = next(iter(env.channel.questions.live_forms())).ts
    assert isinstance(ts, str)
    return ts


def test_form_has_choices_other_inputs_submit_and_cancel(env: Env) -> None:
    env.message("deploy")
    body, _, _ = _form(env)
    kinds = [
        (b["type"], b.get("elements", [b.get("element")])[0]["type"])
        for b in body["blocks"]
        if b["type"] in ("actions", "input")
    ]
    assert kinds == [
        ("actions", "radio_buttons"),
        ("input", "plain_text_input"),
        ("actions", "checkboxes"),
        ("input", "plain_text_input"),
        ("actions", "button"),
    ]
    buttons = body["blocks"][-1]["elements"]
    assert [b["action_id"] for b in buttons] == [SUBMIT_ACTION, CANCEL_ACTION]


def test_submit_answers_the_agent_once_and_the_form_shows_submitted(env: Env) -> None:
    env.message("deploy")
    _, _, token = _form(env)
    ts = _ts_of_form(env)
    values = _state("1", ["0", "1"])
    env.click(SUBMIT_ACTION, token, message_ts=ts, values=values)
    env.click(SUBMIT_ACTION, token, message_ts=ts, values=values)  # a double tap
    env.settle()
    assert env.bridge.responses == [
        (
            "req-1",
            {
                "outcome": {"outcome": "selected", "optionId": "proceed_once"},
                "answers": {"0": "Staging", "1": "Logs, Metrics"},
            },
        )
    ]
    update = [u for u in env.bodies("chat.update") if u["ts"] == ts][-1]
    assert update["text"] == "Submitted"
    assert "Staging" in json.dumps(update["blocks"])
    assert all(b["type"] not in ("actions", "input") for b in update["blocks"])


def test_other_text_wins_and_a_missing_answer_only_gets_a_hint(env: Env) -> None:
    env.message("deploy")
    _, _, token = _form(env)
    ts = _ts_of_form(env)
    env.click(SUBMIT_ACTION, token, message_ts=ts, values=_state("0", []))  # Parts unanswered
    wait_until(lambda: env.bodies("chat.postEphemeral"), what="the hint")
    env.rt.pool.wait_idle(2.0)
    assert env.bridge.responses == []
    assert [e["text"] for e in env.bodies("chat.postEphemeral")] == [TEXT_ANSWER_ALL]
    env.click(SUBMIT_ACTION, token, message_ts=ts, values=_state("0", [], other="Traces"))
    env.settle()
    assert env.bridge.responses[0][1]["answers"] == {"0": "Prod", "1": "Traces"}


def test_a_stranger_is_told_once_and_nothing_changes(env: Env) -> None:
    env.message("deploy")
    _, _, token = _form(env)
    ts = _ts_of_form(env)
    env.click(SUBMIT_ACTION, token, user=STRANGER, message_ts=ts, values=_state("0", ["0"]))
    env.click(CANCEL_ACTION, token, user=STRANGER, message_ts=ts)
    wait_until(lambda: len(env.bodies("chat.postEphemeral")) == 1, what="one notice")
    env.rt.pool.wait_idle(2.0)
    assert [e["text"] for e in env.bodies("chat.postEphemeral")] == [TEXT_NOT_OWNER]
    assert env.bridge.responses == []
    assert env.channel.questions.state_of("req-1") == "pending"
    assert [u for u in env.bodies("chat.update") if u["ts"] == ts] == []
    env.click(CANCEL_ACTION, token, user=OWNER, message_ts=ts)
    env.settle()


def test_cancel_cancels_the_request_and_the_form_shows_cancelled(env: Env) -> None:
    env.message("deploy")
    _, _, token = _form(env)
    ts = _ts_of_form(env)
    env.click(CANCEL_ACTION, token, message_ts=ts)
    env.settle()
    assert env.bridge.responses == [("req-1", {"outcome": {"outcome": "cancelled"}})]
    assert [u for u in env.bodies("chat.update") if u["ts"] == ts][-1]["text"] == "Cancelled"


def test_an_unanswered_form_expires_on_the_fake_clock(env: Env) -> None:
    env.message("deploy")
    _, _, token = _form(env)
    ts = _ts_of_form(env)
    env.rt.clock.advance(60)  # the run waits for the answer: only the hook pool settles
    env.rt.pool.wait_idle(2.0)
    assert env.channel.questions.state_of("req-1") == "pending"
    env.rt.clock.advance(211)  # past the form's deadline (270 s), before core's (300 s)
    env.settle()
    assert env.bridge.responses == [("req-1", {"outcome": {"outcome": "cancelled"}})]
    assert [u for u in env.bodies("chat.update") if u["ts"] == ts][-1]["text"] == "Expired"
    env.click(SUBMIT_ACTION, token, message_ts=ts, values=_state("0", ["0"]))  # too late
    env.settle()
    assert len(env.bridge.responses) == 1

"""Discord questions: one message of select menus and Submit / Other... / Cancel buttons
bound to the request; only its owner answers, once; Other... opens a modal; the message
is edited in place to Submitted, Cancelled or Expired."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import requests_mock as rm
from channelkit.platforms.discord.questions import TEXT_ANSWER_ALL, TEXT_NOT_OWNER
from channelkit.testing import ScriptedBridge, ask, chunk, question_request, wait_until

from tests.platforms._shared import question
from tests.platforms.discord.discord_env import DM, OWNER, STRANGER, Env

QUESTIONS = [question("Env", ["Prod", "Staging"]), question("Parts", ["Logs", "Metrics"], True)]


@pytest.fixture(params=["gateway", "interactions"])
def env(rt, request) -> Iterator[Env]:  # type: ignore[no-untyped-def]
    steps = [ask(lambda s: question_request("req-1", s, QUESTIONS), timeout=30.0), chunk("thanks")]
    with rm.Mocker() as m:
        e = Env(rt, m, ScriptedBridge(steps), ingress=request.param)
        yield e
        e.channel.close(2.0)


def _form(env: Env) -> tuple[str, dict[str, Any]]:
    """The form's message id and body, once it is live."""
    wait_until(
        lambda: [f for f in env.channel.questions.live_forms() if f.message_id],
        what="the form is live",
    )
    (form,) = env.channel.questions.live_forms()
    body = next(p for p in env.posts(DM) if len(p.get("components", [])) == 3)
    assert form.message_id is not None
    return form.message_id, body


def _ids(body: dict[str, Any]) -> list[str]:
    return [c["custom_id"] for row in body["components"] for c in row["components"]]


def click(env: Env, custom_id: str, **kw: Any) -> dict[str, Any]:
    """A click by the ingress under test; the interaction response it got."""
    if env.channel.discord_config.ingress == "interactions":
        response = env.click_over_http(custom_id, **kw)
        assert response.status == 200
        return dict(__import__("json").loads(response.body))
    before = len(env.callbacks())
    env.click_over_gateway(custom_id, **kw)
    wait_until(lambda: len(env.callbacks()) > before, what="the interaction response")
    return env.callbacks()[before]


def _final_edit(env: Env, message_id: str) -> dict[str, Any]:
    return [body for mid, body in env.edits() if mid == message_id][-1]


def test_the_form_is_two_selects_then_submit_other_and_cancel(env: Env) -> None:
    env.message("deploy")
    message_id, body = _form(env)
    selects = [row["components"][0] for row in body["components"][:2]]
    assert [s["type"] for s in selects] == [3, 3]
    assert [s["max_values"] for s in selects] == [1, 2]  # the second is multi-select
    assert [o["label"] for o in selects[0]["options"]] == ["Prod", "Staging"]
    buttons = body["components"][2]["components"]
    assert [b["label"] for b in buttons] == ["Submit", "Other…", "Cancel"]
    assert all("req-1" not in custom_id for custom_id in _ids(body))  # opaque tokens
    click(env, _ids(body)[4], message_id=message_id)  # Cancel, to end the run
    env.rt.settle()


def test_choices_then_submit_answer_once_and_the_form_shows_submitted(env: Env) -> None:
    env.message("deploy")
    message_id, body = _form(env)
    first, second, submit = _ids(body)[:3]
    assert click(env, first, message_id=message_id, values=["1"]) == {"type": 6}
    assert click(env, second, message_id=message_id, values=["0", "1"]) == {"type": 6}
    assert click(env, submit, message_id=message_id) == {"type": 6}
    assert click(env, submit, message_id=message_id) == {"type": 6}  # a double tap
    env.rt.settle()
    assert env.bridge.responses == [
        (
            "req-1",
            {
                "outcome": {"outcome": "selected", "optionId": "proceed_once"},
                "answers": {"0": "Staging", "1": "Logs, Metrics"},
            },
        )
    ]
    final = _final_edit(env, message_id)
    assert final["components"] == [] and "Submitted" in final["content"]
    assert "Staging" in final["content"]


def test_submit_without_every_answer_only_gets_an_ephemeral_hint(env: Env) -> None:
    env.message("deploy")
    message_id, body = _form(env)
    first, _, submit, _, cancel = _ids(body)
    click(env, first, message_id=message_id, values=["0"])
    hint = click(env, submit, message_id=message_id)
    assert hint["type"] == 4 and hint["data"]["flags"] == 64
    assert hint["data"]["content"] == TEXT_ANSWER_ALL
    assert env.bridge.responses == []
    click(env, cancel, message_id=message_id)
    env.rt.settle()


def test_other_opens_a_modal_whose_text_answers(env: Env) -> None:
    env.message("deploy")
    message_id, body = _form(env)
    first, _, _, other, _ = _ids(body)
    click(env, first, message_id=message_id, values=["0"])
    opened = click(env, other, message_id=message_id)
    assert opened["type"] == 9
    modal_id = opened["data"]["custom_id"]
    inputs = [row["components"][0]["custom_id"] for row in opened["data"]["components"]]
    assert inputs == ["q0", "q1"]
    answer = click(env, modal_id, message_id=message_id, modal={"q0": "", "q1": "Traces"})
    assert answer == {"type": 6}
    env.rt.settle()
    assert env.bridge.responses[0][1]["answers"] == {"0": "Prod", "1": "Traces"}


def test_a_stranger_gets_an_ephemeral_notice_and_nothing_changes(env: Env) -> None:
    env.message("deploy")
    message_id, body = _form(env)
    first, _, submit, _, cancel = _ids(body)
    notice = click(env, first, user=STRANGER, message_id=message_id, values=["0"])
    assert notice["type"] == 4 and notice["data"] == {
        "content": TEXT_NOT_OWNER,
        "flags": 64,
        "allowed_mentions": {"parse": []},
    }
    click(env, cancel, user=STRANGER, message_id=message_id)
    env.rt.pool.wait_idle(2.0)
    assert env.bridge.responses == []
    assert env.channel.questions.state_of("req-1") == "pending"
    click(env, cancel, user=OWNER, message_id=message_id)
    env.rt.settle()
    assert env.bridge.responses == [("req-1", {"outcome": {"outcome": "cancelled"}})]
    assert "Cancelled" in _final_edit(env, message_id)["content"]


def test_an_unanswered_form_expires_on_the_fake_clock(env: Env) -> None:
    env.message("deploy")
    message_id, body = _form(env)
    env.tick(60)
    assert env.channel.questions.state_of("req-1") == "pending"
    env.tick(211)  # past the form's deadline (270 s), before core's (300 s)
    env.rt.settle()
    assert env.bridge.responses == [("req-1", {"outcome": {"outcome": "cancelled"}})]
    assert "Expired" in _final_edit(env, message_id)["content"]
    click(env, _ids(body)[2], message_id=message_id)  # too late: nothing changes
    env.rt.settle()
    assert len(env.bridge.responses) == 1

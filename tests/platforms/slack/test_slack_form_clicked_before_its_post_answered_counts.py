"""A Slack form is registered before ``chat.postMessage`` answers: the owner's Submit on
a form that Slack shows but whose post has not answered yet counts (the click names the
form's ``ts``), the agent gets the answer once, and the form is updated in place to
``Submitted``; a settlement that arrives while the form is being posted ends the
posted form in the winner's state."""

from __future__ import annotations

import itertools
import threading
from typing import Any

import requests_mock as rm
from channelkit.platforms.slack.questions import SUBMIT_ACTION
from channelkit.testing import ScriptedBridge, ask, chunk, question_request, wait_until

from tests.platforms._shared import question
from tests.platforms.slack.slack_emulator import LONG
from tests.platforms.slack.slack_env import BASE, METHODS, Env

QUESTIONS = [question("Env", ["Prod", "Staging"])]
CHOSEN = {"ckq_0": {"ck:q:choice:0": {"type": "radio_buttons", "selected_option": {"value": "1"}}}}


def _form_token(body: dict[str, Any]) -> str | None:
    for block in body.get("blocks") or ():
        if block.get("block_id") == "ckq_buttons":
            return str(block["elements"][0]["value"])
    return None


def _mock(m: rm.Mocker, on_form: Any) -> None:
    """Every method answers ok; the form's ``chat.postMessage`` first runs ``on_form``
    (the form is on Slack, its post has not answered yet)."""
    ts = itertools.count(1)
    lock = threading.Lock()

    def answer(request: Any, context: Any) -> dict[str, Any]:
        with lock:
            stamp = f"1700000000.{next(ts):06d}"
        body = request.json() if request.body else {}
        token = _form_token(body)
        if token is not None:
            on_form(token, stamp)
        return {"ok": True, "ts": stamp, "channel": "X"}

    for method in (*METHODS, "pins.add"):
        m.post(f"{BASE}/{method}", json=answer)


def test_a_submit_before_the_post_answered_counts(rt: Any) -> None:
    steps = [ask(lambda s: question_request("req-1", s, QUESTIONS), timeout=30.0), chunk("ok")]
    holder: dict[str, Env] = {}
    clicked: list[str] = []

    def click_now(token: str, stamp: str) -> None:
        env = holder["env"]
        (form,) = env.channel.questions.live_forms()
        assert form.state.state == "reserved" and form.ts is None  # still being posted
        clicked.append(stamp)
        env.click(SUBMIT_ACTION, token, message_ts=stamp, values=CHOSEN)

    with rm.Mocker() as m:
        _mock(m, click_now)
        env = holder["env"] = Env(rt, m, ScriptedBridge(steps))
        try:
            env.message("deploy")
            wait_until(lambda: env.bridge.responses, LONG, what="the answer")
            env.settle()
            assert env.bridge.responses == [
                (
                    "req-1",
                    {
                        "outcome": {"outcome": "selected", "optionId": "proceed_once"},
                        "answers": {"0": "Staging"},
                    },
                )
            ]
            (form,) = [b for b in env.bodies("chat.postMessage") if _form_token(b)]
            updates = env.bodies("chat.update")
            assert [u["text"] for u in updates if "Staging" in str(u.get("blocks"))] == [
                "Submitted"
            ]
            assert env.channel.questions.state_of("req-1") == "submitted"
            assert env.channel.questions.live_forms() == []
            assert form["channel"] == "D0DM"
            assert [u["ts"] for u in updates if u["text"] == "Submitted"] == clicked
        finally:
            env.channel.close(2.0)


def test_a_request_settled_while_its_form_is_posted_ends_that_form(rt: Any) -> None:
    steps = [ask(lambda s: question_request("req-1", s, QUESTIONS), timeout=30.0)]
    holder: dict[str, Env] = {}
    posted: list[str] = []

    def cancel_now(token: str, stamp: str) -> None:
        env = holder["env"]
        (form,) = env.channel.questions.live_forms()
        assert form.state.state == "reserved" and form.ts is None
        posted.append(stamp)
        assert env.channel.cancel_run(form.context.session_id, form.context.run_id)

    with rm.Mocker() as m:
        _mock(m, cancel_now)
        env = holder["env"] = Env(rt, m, ScriptedBridge(steps))
        try:
            env.message("deploy")
            wait_until(lambda: env.bodies("chat.update"), LONG, what="the form to end")
            env.settle()
            assert env.channel.questions.state_of("req-1") == "cancelled"
            (update,) = env.bodies("chat.update")
            assert update["ts"] == posted[0] and update["text"] == "Cancelled"
            assert env.bridge.responses == []  # nobody answered: the run was cancelled
        finally:
            env.channel.close(2.0)

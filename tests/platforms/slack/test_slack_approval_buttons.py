"""Slack approval buttons: an ordinary tool permission as owner-only Block Kit buttons."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import requests_mock as rm
from channelkit.core.text import MSG_DENIED
from channelkit.platforms.slack.approvals import TEXT_NOT_OWNER, parse_approval_value
from channelkit.testing import ScriptedBridge, ask, final, permission_request, wait_until

from tests.platforms.slack.slack_env import STRANGER, Env, mock_web_api

ALLOW = {"outcome": {"outcome": "selected", "optionId": "proceed_once"}}
REJECT = {"outcome": {"outcome": "selected", "optionId": "cancel"}}


def _steps() -> list[Any]:
    return [ask(lambda s: permission_request("req-1", s, title="Write notes.txt")), final("ok")]


@pytest.fixture
def env(rt) -> Iterator[Env]:  # type: ignore[no-untyped-def]
    with rm.Mocker() as m:
        mock_web_api(m)
        e = Env(rt, m, ScriptedBridge(_steps()))
        yield e
        e.channel.close(2.0)


def _prompt(env: Env) -> tuple[dict[str, Any], str, dict[str, tuple[str, str]]]:
    """The posted prompt, its ts and its buttons (label -> (action_id, value))."""
    wait_until(lambda: env.channel.approvals.live_count() == 1, what="the buttons are live")
    wait_until(lambda: env.channel.approvals.registry.records()[0].ts, what="the prompt's ts")
    ts = str(env.channel.approvals.registry.records()[0].ts)
    body = next(
        b
        for b in env.bodies("chat.postMessage")
        if any(x["type"] == "actions" for x in b.get("blocks", []))
    )
    actions = next(x for x in body["blocks"] if x["type"] == "actions")
    buttons = {e["text"]["text"]: (e["action_id"], e["value"]) for e in actions["elements"]}
    return body, ts, buttons


def _final_update(env: Env, ts: str) -> str:
    updates = [u for u in env.bodies("chat.update") if u["ts"] == ts]
    assert len(updates) == 1  # updated in place, once
    assert all(b["type"] != "actions" for b in updates[0]["blocks"])  # buttons removed
    return str(updates[0]["text"])


def _texts(env: Env) -> list[str]:
    return [str(b.get("text")) for b in env.bodies("chat.postMessage")]


def test_permission_prompt_carries_one_opaque_button_per_agent_option(env: Env) -> None:
    env.message("write it")
    body, ts, buttons = _prompt(env)
    assert body["text"].startswith("Permission required to run a tool")
    assert "Write notes.txt" in body["text"] and "/approve" in body["text"]
    assert list(buttons) == ["Always Allow in project", "Allow", "Reject"]
    for _, value in buttons.values():
        assert parse_approval_value(value) is not None and "req-1" not in value
    env.click(*buttons["Reject"], message_ts=ts)
    env.settle()


def test_allow_button_answers_the_agent_with_that_option_once(env: Env) -> None:
    env.message("write it")
    _, ts, buttons = _prompt(env)
    env.click(*buttons["Allow"], message_ts=ts)
    env.click(*buttons["Allow"], message_ts=ts)  # a double click
    env.settle()
    assert env.bridge.responses == [("req-1", ALLOW)]
    assert _final_update(env, ts).endswith("✅ Allow")


def test_reject_button_answers_with_the_reject_option_and_late_clicks_change_nothing(
    env: Env,
) -> None:
    env.message("write it")
    _, ts, buttons = _prompt(env)
    env.click(*buttons["Reject"], message_ts=ts)
    env.settle()
    assert env.bridge.responses == [("req-1", REJECT)]
    assert _final_update(env, ts).endswith("❌ Reject")
    env.click(*buttons["Allow"], message_ts=ts)
    env.settle()
    assert env.bridge.responses == [("req-1", REJECT)]
    assert len([u for u in env.bodies("chat.update") if u["ts"] == ts]) == 1


def test_a_foreign_users_clicks_get_one_ephemeral_notice_and_change_nothing(env: Env) -> None:
    env.message("write it")
    _, ts, buttons = _prompt(env)
    env.click(*buttons["Allow"], message_ts=ts, user=STRANGER)
    env.click(*buttons["Reject"], message_ts=ts, user=STRANGER)
    wait_until(lambda: env.bodies("chat.postEphemeral"), what="the notice")
    env.rt.pool.wait_idle(2.0)  # the run itself still waits for the answer
    notices = env.bodies("chat.postEphemeral")
    assert [(n["user"], n["text"]) for n in notices] == [(STRANGER, TEXT_NOT_OWNER)]
    assert env.bridge.responses == [] and env.bodies("chat.update") == []
    assert env.channel.pending_request_ids() == ["req-1"]
    env.message("/deny")
    env.settle()
    assert env.bridge.responses == [("req-1", REJECT)]
    assert _final_update(env, ts).endswith("❌ Reject")


def test_a_click_racing_the_owners_deny_has_one_winner_shown_on_the_message(rt) -> None:  # type: ignore[no-untyped-def]
    winners: set[str] = set()
    for round_ in range(12):
        with rm.Mocker() as m:
            mock_web_api(m)
            env = Env(rt, m, ScriptedBridge(_steps()))
            env.message("write it")
            _, ts, buttons = _prompt(env)
            mode = round_ % 3  # 0: together; 1: the click first; 2: the /deny first
            start = threading.Barrier(2)

            def press(env: Env = env, button: tuple[str, str] = buttons["Allow"]) -> None:
                start.wait(5)  # noqa: B023
                env.click(*button, message_ts=ts)  # noqa: B023

            clicker = threading.Thread(target=press)
            clicker.start()
            if mode == 1:
                start.wait(5)
                wait_until(lambda env=env: env.bridge.responses, what="the click's answer")
            elif mode == 2:
                env.message("/deny")
                start.wait(5)
            else:
                start.wait(5)
            if mode != 2:
                env.message("/deny")
            clicker.join(5)
            env.settle()
            assert len(env.bridge.responses) == 1
            (_, response), shown = env.bridge.responses[0], _final_update(env, ts)
            if response == ALLOW:
                winners.add("button")
                assert shown.endswith("✅ Allow") and MSG_DENIED not in json.dumps(_texts(env))
            else:
                winners.add("deny")
                assert response == REJECT and shown.endswith("❌ Reject")
            env.channel.close(2.0)
    assert winners == {"button", "deny"}


def test_expiry_on_the_fake_clock_ends_the_message(env: Env) -> None:
    env.message("write it")
    _, ts, buttons = _prompt(env)
    env.rt.advance(env.channel.permission_lifetime())
    env.settle()
    assert env.bridge.responses == [("req-1", {"outcome": {"outcome": "cancelled"}})]
    assert _final_update(env, ts).endswith("⌛ Expired")
    env.click(*buttons["Allow"], message_ts=ts)
    env.settle()
    assert len(env.bridge.responses) == 1


def test_native_questions_off_keeps_the_text_prompt(rt) -> None:  # type: ignore[no-untyped-def]
    with rm.Mocker() as m:
        mock_web_api(m)
        env = Env(rt, m, ScriptedBridge(_steps()), native_questions=False)
        env.message("write it")
        wait_until(lambda: any("/approve" in t for t in _texts(env)), what="the text prompt")
        assert not any(b.get("blocks") for b in env.bodies("chat.postMessage"))
        env.message("/approve")
        env.settle()
        assert env.bridge.responses == [("req-1", ALLOW)]
        env.channel.close(2.0)

"""Telegram approval buttons: an ordinary tool permission as an owner-only inline keyboard."""

from __future__ import annotations

import threading
from typing import Any

from channelkit.core.text import MSG_DENIED
from channelkit.platforms.telegram.approvals import (
    TEXT_BUSY,
    TEXT_NOT_OWNER,
    TEXT_SENT,
    TEXT_STALE,
    parse_approval_callback,
)
from channelkit.platforms.telegram.ingress import parse_update
from channelkit.testing import ScriptedBridge, ask, final, permission_request, wait_until

from tests.platforms.telegram.tg_env import CHAT, OWNER, Env, texts

ALLOW = {"outcome": {"outcome": "selected", "optionId": "proceed_once"}}
REJECT = {"outcome": {"outcome": "selected", "optionId": "cancel"}}


def _env(rt: Any, mock: Any, **cfg: Any) -> Env:
    steps = [ask(lambda s: permission_request("req-1", s, title="Write notes.txt")), final("ok")]
    return Env(rt, mock, ScriptedBridge(steps), **cfg)


def _keyboard_message(rt: Any, env: Env) -> dict[str, Any]:
    rt.wait_for(lambda: any("reply_markup" in m for m in env.calls("sendMessage")))
    return next(m for m in env.calls("sendMessage") if "reply_markup" in m)


def _buttons(message: dict[str, Any]) -> dict[str, str]:
    rows = message["reply_markup"]["inline_keyboard"]
    return {row[0]["text"]: row[0]["callback_data"] for row in rows}


def _message_id(env: Env) -> int:
    """The keyboard message's id, once the presenter stored it (just after the send)."""

    def stored() -> Any:
        records = env.channel.approvals.registry.records()
        return records[0].message_id if records else None

    return int(wait_until(stored, what="the approval message's id"))


def _final_edit(env: Env) -> str:
    edits = env.calls("editMessageText")
    assert len(edits) == 1 and "reply_markup" not in edits[0]  # keyboard removed, once
    return str(edits[0]["text"])


def test_permission_prompt_carries_one_button_per_agent_option(rt, mock) -> None:  # type: ignore[no-untyped-def]
    env = _env(rt, mock)
    env.message("write it")
    message = _keyboard_message(rt, env)
    assert message["text"].startswith("Permission required to run a tool")
    assert "Write notes.txt" in message["text"] and "/approve" in message["text"]
    buttons = _buttons(message)
    assert list(buttons) == ["Always Allow in project", "Allow", "Reject"]
    for data in buttons.values():
        assert len(data.encode()) <= 64 and parse_approval_callback(data) is not None
        assert "req-1" not in data  # opaque token, no request id
    env.tap(buttons["Reject"], _message_id(env))
    env.channel.close()


def test_allow_button_answers_the_agent_with_that_option(rt, mock) -> None:  # type: ignore[no-untyped-def]
    env = _env(rt, mock)
    env.message("write it")
    buttons = _buttons(_keyboard_message(rt, env))
    env.tap(buttons["Allow"], _message_id(env))
    env.settle()
    assert env.bridge.responses == [("req-1", ALLOW)]
    assert _final_edit(env).endswith("✅ Allow")
    assert "ok" in texts(env)
    env.channel.close()


def test_reject_button_answers_the_agent_with_its_reject_option(rt, mock) -> None:  # type: ignore[no-untyped-def]
    env = _env(rt, mock)
    env.message("write it")
    buttons = _buttons(_keyboard_message(rt, env))
    mid = _message_id(env)
    env.tap(buttons["Reject"], mid)
    env.settle()
    assert env.bridge.responses == [("req-1", REJECT)]
    assert _final_edit(env).endswith("❌ Reject")
    env.tap(buttons["Allow"], mid)  # a late tap changes nothing
    env.settle()
    assert env.bridge.responses == [("req-1", REJECT)]
    assert env.calls("answerCallbackQuery")[-1]["text"] == TEXT_STALE
    env.channel.close()


def test_a_foreign_users_tap_is_refused(rt, mock) -> None:  # type: ignore[no-untyped-def]
    env = _env(rt, mock)
    env.message("write it")
    buttons = _buttons(_keyboard_message(rt, env))
    env.tap(buttons["Allow"], _message_id(env), user=7)
    rt.wait_for(lambda: env.calls("answerCallbackQuery"))
    assert env.bridge.responses == [] and env.calls("editMessageText") == []
    assert env.calls("answerCallbackQuery")[-1]["text"] == TEXT_NOT_OWNER
    assert env.channel.pending_request_ids() == ["req-1"]
    env.message("/deny")
    env.settle()
    assert env.bridge.responses == [("req-1", REJECT)]
    env.channel.close()


def test_a_tap_racing_the_owners_deny_has_one_winner_shown_on_the_keyboard(rt, mock) -> None:  # type: ignore[no-untyped-def]
    winners: set[str] = set()
    for round_ in range(12):
        mock.reset_mock()
        env = _env(rt, mock)
        env.message("write it")
        buttons = _buttons(_keyboard_message(rt, env))
        mid = _message_id(env)
        mode = round_ % 3  # 0: together; 1: the tap first; 2: the /deny first
        start = threading.Barrier(2)

        def press(env: Env = env, data: str = buttons["Allow"], mid: int = mid) -> None:
            start.wait(5)  # noqa: B023
            env.tap(data, mid)

        tap = threading.Thread(target=press)
        tap.start()
        if mode == 1:
            start.wait(5)
            rt.wait_for(lambda env=env: env.bridge.responses)
        elif mode == 2:
            env.message("/deny")
            start.wait(5)
        else:
            start.wait(5)
        if mode != 2:
            env.message("/deny")
        tap.join(5)
        env.settle()
        assert len(env.bridge.responses) == 1
        (_, response), edited = env.bridge.responses[0], _final_edit(env)
        if response == ALLOW:
            winners.add("button")
            assert edited.endswith("✅ Allow") and MSG_DENIED not in texts(env)
        else:
            winners.add("deny")
            assert response == REJECT and edited.endswith("❌ Reject")
            assert MSG_DENIED in texts(env)
        env.channel.close()
    assert winners == {"button", "deny"}


def test_expiry_on_the_fake_clock_ends_the_keyboard(rt, mock) -> None:  # type: ignore[no-untyped-def]
    env = _env(rt, mock)
    env.message("write it")
    buttons = _buttons(_keyboard_message(rt, env))
    mid = _message_id(env)
    rt.advance(env.channel.permission_lifetime())
    env.settle()
    assert env.bridge.responses == [("req-1", {"outcome": {"outcome": "cancelled"}})]
    assert _final_edit(env).endswith("⌛ Expired")
    env.tap(buttons["Allow"], mid)
    env.settle()
    assert env.calls("answerCallbackQuery")[-1]["text"] == TEXT_STALE
    assert len(env.bridge.responses) == 1
    env.channel.close()


def test_native_questions_off_keeps_the_text_prompt(rt, mock) -> None:  # type: ignore[no-untyped-def]
    env = _env(rt, mock, native_questions=False)
    env.message("write it")
    rt.wait_for(lambda: any("/approve" in t for t in texts(env)))
    assert not any("reply_markup" in m for m in env.calls("sendMessage"))
    env.message("/approve")
    env.settle()
    assert env.bridge.responses == [("req-1", ALLOW)]
    env.channel.close()


def test_a_second_tap_while_the_first_answer_is_on_its_way_is_busy(rt, mock) -> None:  # type: ignore[no-untyped-def]
    env = _env(rt, mock)
    env.message("write it")
    buttons = _buttons(_keyboard_message(rt, env))
    mid = _message_id(env)

    def decide(label: str) -> Any:
        update = parse_update(
            {
                "update_id": 1,
                "callback_query": {
                    "id": f"cq-{label}",
                    "chat_instance": "ci",
                    "data": buttons[label],
                    "from": {"id": OWNER, "is_bot": False, "first_name": "x"},
                    "message": {
                        "message_id": mid,
                        "date": 0,
                        "chat": {"id": CHAT, "type": "private"},
                    },
                },
            }
        )
        assert update.callback_query is not None
        return env.channel.approvals.decide_callback(update.callback_query)

    first = decide("Allow")  # claimed; its answer not handed on yet
    second = decide("Reject")
    second.run_after()
    first.run_after()
    env.settle()
    answers = [c["text"] for c in env.calls("answerCallbackQuery")]
    assert TEXT_BUSY in answers and TEXT_SENT in answers
    assert env.bridge.responses == [("req-1", ALLOW)]  # the first tap's
    env.channel.close()

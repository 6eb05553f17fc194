"""The Telegram emulator's per-chat limits: off by default; on through
``POST /_emulator/limits``, each chat's token bucket refuses a write past its budget with
429 and ``parameters.retry_after``, counting it as ``rejected_429``; edits count too; a
reset turns them off (issue 28)."""

from __future__ import annotations

import json
from typing import Any

from channelkit.playground import TelegramEmulator
from channelkit.playground.emulator import Origin
from channelkit.playground.telegram import GROUP_CHAT_ID

TOKEN = "1:t"
JSON = {"content-type": "application/json"}


def _call(emulator: TelegramEmulator, method: str, **body: Any) -> Any:
    reply = emulator.handle_api(
        "POST", f"/bot{TOKEN}/{method}", {}, JSON, json.dumps(body).encode()
    )
    assert reply is not None
    return reply


def _emulator() -> TelegramEmulator:
    emulator = TelegramEmulator(bot_token=TOKEN)
    emulator.send_user_message("hi", origin=Origin(group=True))  # the bot may write there
    return emulator


def test_limits_are_off_until_asked_for() -> None:
    emulator = _emulator()
    for n in range(40):
        assert _call(emulator, "sendMessage", chat_id=GROUP_CHAT_ID, text=f"m{n}").status == 200
    assert emulator.state()["rejected_429"] == 0


def test_a_group_gets_its_burst_then_429_with_retry_after() -> None:
    emulator = _emulator()
    now = [100.0]
    emulator.limits._clock = lambda: now[0]
    reply = emulator.handle_control("POST", "/_emulator/limits", {"enabled": True})
    assert reply is not None and reply.payload["enabled"] is True
    first = _call(emulator, "sendMessage", chat_id=GROUP_CHAT_ID, text="first")
    message_id = first.payload["result"]["message_id"]
    for n in range(18):
        assert _call(emulator, "sendMessage", chat_id=GROUP_CHAT_ID, text=f"m{n}").status == 200
    edit = _call(
        emulator, "editMessageText", chat_id=GROUP_CHAT_ID, message_id=message_id, text="x"
    )
    assert edit.status == 200  # the 20th write of the minute
    refused = _call(
        emulator, "editMessageText", chat_id=GROUP_CHAT_ID, message_id=message_id, text="y"
    )
    assert refused.status == 429
    assert refused.payload["error_code"] == 429
    assert refused.payload["parameters"]["retry_after"] == 3  # 20 a minute: one per 3 s
    assert emulator.state()["rejected_429"] == 1
    assert emulator.view(str(message_id))["text"] == "x"  # the refused edit changed nothing
    now[0] += 3.0
    assert _call(emulator, "sendMessage", chat_id=GROUP_CHAT_ID, text="later").status == 200
    assert _call(emulator, "sendChatAction", chat_id=GROUP_CHAT_ID, action="typing").status == 200
    emulator.reset()
    assert emulator.state()["rejected_429"] == 0
    assert emulator.limits.enabled is False


def test_a_private_chat_has_its_own_budget_and_bad_settings_are_named() -> None:
    emulator = _emulator()
    emulator.limits._clock = lambda: 5.0
    reply = emulator.handle_control(
        "POST", "/_emulator/limits", {"enabled": True, "private_burst": 2}
    )
    assert reply is not None and reply.status == 200
    chat = emulator.chat_id
    assert _call(emulator, "sendMessage", chat_id=chat, text="a").status == 200
    assert _call(emulator, "sendMessageDraft", chat_id=chat, draft_id=1, text="b").status == 200
    assert _call(emulator, "sendMessage", chat_id=chat, text="c").status == 429
    assert _call(emulator, "sendMessage", chat_id=GROUP_CHAT_ID, text="g").status == 200
    bad = emulator.handle_control("POST", "/_emulator/limits", {"group_per_minute": 0})
    assert bad is not None and bad.status == 400 and "group_per_minute" in bad.payload["error"]
    shown = emulator.handle_control("GET", "/_emulator/limits", None)
    assert shown is not None and shown.payload["rejected_429"] == 1

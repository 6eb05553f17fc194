from __future__ import annotations

import pytest
import requests_mock as rm
from channelkit.errors import AuthError, BadRequest, RateLimited, ServerError
from channelkit.platforms.telegram.api import TelegramApi

BASE = "http://tg.test"
TOKEN = "123:abc"


def url(method: str) -> str:
    return f"{BASE}/bot{TOKEN}/{method}"


def test_calls_and_bodies() -> None:
    api = TelegramApi(TOKEN, base_url=BASE)
    with rm.Mocker() as m:
        m.post(
            url("sendMessage"),
            json={
                "ok": True,
                "result": {"message_id": 77, "date": 0, "chat": {"id": 1, "type": "private"}},
            },
        )
        m.post(url("editMessageText"), json={"ok": True, "result": True})
        m.post(url("sendChatAction"), json={"ok": True, "result": True})
        m.post(url("answerCallbackQuery"), json={"ok": True, "result": True})
        kb = {"inline_keyboard": [[{"text": "A", "callback_data": "ck:x"}]]}
        assert api.send_message(1, "hi", reply_markup=kb, message_thread_id=3) == 77
        api.edit_message_text(1, 77, "done")
        api.send_chat_action(1, message_thread_id=3)
        api.answer_callback_query("cq", "ok")
        bodies = [r.json() for r in m.request_history]
        assert bodies == [
            {"chat_id": 1, "text": "hi", "reply_markup": kb, "message_thread_id": 3},
            {"chat_id": 1, "message_id": 77, "text": "done"},
            {"chat_id": 1, "action": "typing", "message_thread_id": 3},
            {"callback_query_id": "cq", "text": "ok"},
        ]
        assert all(r.timeout is not None for r in m.request_history)


def test_errors() -> None:
    api = TelegramApi(TOKEN, base_url=BASE)
    with rm.Mocker() as m:
        m.post(
            url("editMessageText"),
            status_code=400,
            json={
                "ok": False,
                "error_code": 400,
                "description": "Bad Request: message is not modified: x",
            },
        )
        api.edit_message_text(1, 2, "same")  # treated as success
        m.post(
            url("sendMessage"),
            status_code=429,
            json={
                "ok": False,
                "error_code": 429,
                "description": "Too Many Requests",
                "parameters": {"retry_after": 3},
            },
        )
        with pytest.raises(RateLimited) as info:
            api.send_message(1, "x")
        assert info.value.retry_after == 3.0
        m.post(
            url("sendMessage"),
            status_code=401,
            json={"ok": False, "error_code": 401, "description": "Unauthorized"},
        )
        with pytest.raises(AuthError) as auth:
            api.send_message(1, "x")
        assert TOKEN not in str(auth.value)
        m.post(url("sendMessage"), status_code=502, text="bad gateway")
        with pytest.raises(ServerError):
            api.send_message(1, "x")
        m.post(
            url("sendMessage"),
            status_code=400,
            json={"ok": False, "error_code": 400, "description": "Bad Request: chat not found"},
        )
        with pytest.raises(BadRequest):
            api.send_message(1, "x")

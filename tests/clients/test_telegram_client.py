"""The generated telegram client: what it does beyond its OpenAPI document.

The spec-driven checks of every operation are in ``test_spec_driven.py``.
"""

from __future__ import annotations

import pytest
import requests_mock as rm
from channelkit.clients.telegram import TelegramClient
from channelkit.errors import BadRequest, RateLimited, ServerError
from channelkit.http.retry import RetryPolicy

BOT = "https://api.telegram.org/bot123:ABC"


def _client(sleeps: list[float]) -> TelegramClient:
    return TelegramClient(
        token="123:ABC", retry=RetryPolicy(max_attempts=3, sleep=sleeps.append, jitter=lambda: 0.0)
    )


def test_flood_control_retry_after_from_the_body_is_honoured() -> None:
    sleeps: list[float] = []
    client = _client(sleeps)
    with rm.Mocker() as m:
        edit = m.post(
            BOT + "/editMessageText",
            [
                {
                    "status_code": 429,
                    "json": {
                        "ok": False,
                        "error_code": 429,
                        "description": "Too Many Requests: retry after 3",
                        "parameters": {"retry_after": 3},
                    },
                },
                {"json": {"ok": True, "result": True}},
            ],
        )
        result = client.edit_message_text(body={"chat_id": 1, "message_id": 2, "text": "x"})
    assert edit.call_count == 2
    assert sleeps == [3.0]
    assert result.result is True


def test_send_message_is_never_retried() -> None:
    sleeps: list[float] = []
    client = _client(sleeps)
    with rm.Mocker() as m:
        send = m.post(
            BOT + "/sendMessage",
            status_code=502,
            json={"ok": False, "error_code": 502, "description": "Bad Gateway"},
        )
        with pytest.raises(ServerError):
            client.send_message(body={"chat_id": 1, "text": "x"})
        send429 = m.post(
            BOT + "/sendMessage",
            status_code=429,
            json={
                "ok": False,
                "error_code": 429,
                "description": "flood",
                "parameters": {"retry_after": 1},
            },
        )
        with pytest.raises(RateLimited) as caught:
            client.send_message(body={"chat_id": 1, "text": "x"})
    assert send.call_count == 1 and send429.call_count == 1
    assert caught.value.retry_after == 1.0
    assert sleeps == []


def test_ok_false_with_http_200_is_an_error() -> None:
    client = _client([])
    with rm.Mocker() as m:
        m.post(
            BOT + "/deleteMessage",
            json={
                "ok": False,
                "error_code": 400,
                "description": "Bad Request: message to delete not found",
            },
        )
        with pytest.raises(BadRequest) as caught:
            client.delete_message(body={"chat_id": 1, "message_id": 5})
    assert caught.value.code == 400
    assert "not found" in caught.value.message


def test_edit_result_is_a_message_or_true() -> None:
    from channelkit.clients.telegram import EditMessageTextResponse, Message

    parsed = EditMessageTextResponse.from_dict(
        {
            "ok": True,
            "result": {
                "message_id": 1,
                "date": 0,
                "chat": {"id": 5, "type": "forum_x"},
                "from": {"id": 9, "is_bot": True, "first_name": "b"},
            },
        }
    )
    assert isinstance(parsed.result, Message)
    assert parsed.result.chat.type == "forum_x"  # unseen enum value kept as str
    assert parsed.result.from_.first_name == "b"  # type: ignore[union-attr]

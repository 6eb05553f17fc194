"""The Weixin emulator speaks iLink as the channel's client calls it, over real HTTP.

``getupdates`` held without messages returns at once when the person writes, and
empty (with its cursor and ``longpolling_timeout_ms``) at its bound; a cursor confirms
the messages before it while repeating an old cursor gets them again; a wrong token
(or an expired session) answers ``errcode`` -14, which the channel's poller takes as an
expired session and stops; malformed calls are refused naming the field.
"""

from __future__ import annotations

import base64
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from channelkit.agents import FunctionAgent
from channelkit.errors import AuthError, BadRequest, ServerError
from channelkit.http import RetryPolicy
from channelkit.platforms.weixin import WeixinChannel, WeixinConfig
from channelkit.platforms.weixin.api import WeixinApi
from channelkit.playground import EmulatorServer
from channelkit.playground.weixin import INVALID_REQUEST, SESSION_EXPIRED, WeixinEmulator
from channelkit.testing import wait_until

LONG = 20.0
TOKEN = "wx-emulator-token"
USER = "wxid_test_user@im.wechat"


@pytest.fixture
def server() -> Iterator[EmulatorServer]:
    with EmulatorServer(platform="weixin", bot_token=TOKEN, user_id=USER, hold_seconds=20.0) as emu:
        yield emu


def api(emu: EmulatorServer, token: str = TOKEN) -> WeixinApi:
    return WeixinApi(token, base_url=emu.url, retry=RetryPolicy.never())


def emulator(emu: EmulatorServer) -> WeixinEmulator:
    found: WeixinEmulator = emu.emulator
    return found


def headers(token: str = TOKEN, **extra: str) -> dict[str, str]:
    base = {
        "Content-Type": "application/json",
        "AuthorizationType": "ilink_bot_token",
        "Authorization": f"Bearer {token}",
        "iLink-App-Id": "bot",
        "iLink-App-ClientVersion": str(0x020103),
        "X-WECHAT-UIN": base64.b64encode(b"\x01\x02\x03\x04").decode(),
    }
    base.update(extra)
    return base


def post(emu: EmulatorServer, name: str, body: Any, **kw: Any) -> dict[str, Any]:
    response = requests.post(
        f"{emu.url}/ilink/bot/{name}", json=body, headers=headers(**kw), timeout=5
    )
    assert response.status_code == 200, response.text
    return dict(response.json())


BASE_INFO = {"channel_version": "2.1.3"}


def test_a_held_poll_returns_at_once_when_a_message_arrives(server: EmulatorServer) -> None:
    emu = emulator(server)
    answers: list[Any] = []
    poll = threading.Thread(target=lambda: answers.append(api(server).get_updates("", 30.0)))
    poll.start()
    wait_until(lambda: emu.waiting_polls() == 1, timeout=LONG)
    sent_at = time.monotonic()
    msg_id, delivery = emu.send_user_message("hi there")
    poll.join(LONG)
    took = time.monotonic() - sent_at
    assert not poll.is_alive() and delivery.status == 200
    assert took < 5.0, f"the held poll took {took:.2f} s to see the message (hold: 20 s)"
    (response,) = answers
    (message,) = response.msgs
    assert str(message["message_id"]) == msg_id
    assert message["from_user_id"] == emu.user_id and message["message_type"] == 1
    assert message["item_list"] == [{"type": 1, "text_item": {"text": "hi there"}}]
    assert message["context_token"]
    assert response.longpolling_timeout_ms == 20_000
    assert isinstance(response.get_updates_buf, str) and response.get_updates_buf
    (delivered,) = emu.callbacks()
    assert delivered["transport"] == "polling" and delivered["fetched"] is True


def test_a_poll_without_messages_returns_empty_at_its_bound() -> None:
    with EmulatorServer(platform="weixin", bot_token=TOKEN, hold_seconds=0.3) as server:
        began = time.monotonic()
        response = api(server).get_updates("", 10.0)
        took = time.monotonic() - began
    assert response.msgs == [] and response.ret == 0
    assert response.longpolling_timeout_ms == 300
    assert 0.25 <= took < 5.0, took


def test_the_cursor_confirms_and_an_old_cursor_gets_the_messages_again(
    server: EmulatorServer,
) -> None:
    emu = emulator(server)
    client = api(server)
    first_id, _ = emu.send_user_message("one")
    first = client.get_updates("", 5.0)
    second_id, _ = emu.send_user_message("two")
    # the old (empty) cursor confirmed nothing: both messages come again
    again = client.get_updates("", 5.0)
    assert [str(m["message_id"]) for m in again.msgs] == [first_id, second_id]
    # the first answer's cursor confirms "one"
    after_first = client.get_updates(str(first.get_updates_buf), 5.0)
    assert [str(m["message_id"]) for m in after_first.msgs] == [second_id]
    assert [str(m["message_id"]) for m in emu.pending_messages()] == [second_id]
    emu.hold_seconds = 0.05  # the next poll finds nothing: do not hold it long
    empty = client.get_updates(str(after_first.get_updates_buf), 5.0)
    assert empty.msgs == [] and emu.pending_messages() == []
    assert empty.get_updates_buf == after_first.get_updates_buf
    # a redelivered message comes again unchanged, after the cursor
    emu.redeliver(first_id)
    redelivered = client.get_updates(str(empty.get_updates_buf), 5.0)
    assert redelivered.msgs == [first.msgs[0]]


def test_a_wrong_token_is_refused_as_an_expired_session(server: EmulatorServer) -> None:
    emu = emulator(server)
    for name, body in (
        ("getupdates", {"get_updates_buf": "", "base_info": BASE_INFO}),
        ("sendmessage", {"msg": {}, "base_info": BASE_INFO}),
        ("getconfig", {"ilink_user_id": emu.user_id, "base_info": BASE_INFO}),
        ("sendtyping", {"ilink_user_id": emu.user_id, "status": 1, "base_info": BASE_INFO}),
    ):
        refused = post(server, name, body, token="not-the-token")
        assert refused == {
            "ret": SESSION_EXPIRED,
            "errcode": SESSION_EXPIRED,
            "errmsg": "session timeout",
        }, name
    without_type = post(
        server,
        "getupdates",
        {"get_updates_buf": "", "base_info": BASE_INFO},
        AuthorizationType="bearer",
    )
    assert without_type["ret"] == SESSION_EXPIRED
    with pytest.raises(AuthError) as raised:
        api(server, "not-the-token").get_typing_ticket(emu.user_id)
    assert str(raised.value.code) == str(SESSION_EXPIRED)
    assert all(c["response"]["ret"] == SESSION_EXPIRED for c in emu.calls())
    assert "not-the-token" not in repr(emu.calls())


def test_the_channel_stops_polling_on_a_wrong_token(server: EmulatorServer) -> None:
    config = WeixinConfig(bot_token="not-the-token", base_url=server.url, typing=False)
    channel = WeixinChannel(config, FunctionAgent(lambda turn: "never"))
    (poller,) = channel.connections
    try:
        poller.start()
        wait_until(lambda: poller.state().status == "stopped", timeout=LONG)
        assert channel.polling.expired
        assert [c["response"]["errcode"] for c in emulator(server).calls()] == [SESSION_EXPIRED]
    finally:
        channel.close()


def test_an_expired_session_answers_a_held_poll_at_once(server: EmulatorServer) -> None:
    emu = emulator(server)
    errors: list[BaseException] = []

    def poll() -> None:
        try:
            api(server).get_updates("", 30.0)
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=poll)
    thread.start()
    wait_until(lambda: emu.waiting_polls() == 1, timeout=LONG)
    response = requests.post(f"{server.url}/_emulator/session/expire", timeout=5)
    assert response.status_code == 200
    thread.join(LONG)
    assert not thread.is_alive()
    (error,) = errors
    assert isinstance(error, AuthError) and str(error.code) == str(SESSION_EXPIRED)
    emu.restore_session()
    assert api(server).get_typing_ticket(emu.user_id).startswith("ticket-")


@pytest.mark.parametrize(
    ("name", "body", "header", "field"),
    [
        (
            "getupdates",
            {"get_updates_buf": "", "base_info": BASE_INFO},
            {"iLink-App-Id": "x"},
            "iLink-App-Id",
        ),
        (
            "getupdates",
            {"get_updates_buf": "", "base_info": BASE_INFO},
            {"X-WECHAT-UIN": "not base64!"},
            "X-WECHAT-UIN",
        ),
        (
            "getupdates",
            {"get_updates_buf": "", "base_info": BASE_INFO},
            {"iLink-App-ClientVersion": "1"},
            "iLink-App-ClientVersion",
        ),
        ("getupdates", {"get_updates_buf": ""}, {}, "base_info.channel_version"),
        ("getupdates", {"base_info": BASE_INFO}, {}, "get_updates_buf"),
        (
            "getupdates",
            {"get_updates_buf": "forged", "base_info": BASE_INFO},
            {},
            "get_updates_buf",
        ),
        (
            "getconfig",
            {"ilink_user_id": "someone-else", "base_info": BASE_INFO},
            {},
            "ilink_user_id",
        ),
        (
            "sendtyping",
            {
                "ilink_user_id": USER,
                "typing_ticket": "forged",
                "status": 1,
                "base_info": BASE_INFO,
            },
            {},
            "typing_ticket",
        ),
        (
            "sendtyping",
            {
                "ilink_user_id": USER,
                "typing_ticket": "forged",
                "status": 3,
                "base_info": BASE_INFO,
            },
            {},
            "status",
        ),
        (
            "sendmessage",
            {
                "msg": {
                    "to_user_id": USER,
                    "from_user_id": "",
                    "client_id": "c1",
                    "message_type": 2,
                    "message_state": 2,
                    "context_token": "forged",
                    "item_list": [{"type": 1, "text_item": {"text": "x"}}],
                },
                "base_info": BASE_INFO,
            },
            {},
            "msg.context_token",
        ),
    ],
    ids=[
        "app-id",
        "uin",
        "client-version",
        "base-info",
        "no-cursor",
        "forged-cursor",
        "unknown-user",
        "forged-ticket",
        "bad-status",
        "forged-context-token",
    ],
)
def test_a_malformed_call_is_refused_naming_the_field(
    server: EmulatorServer, name: str, body: dict[str, Any], header: dict[str, str], field: str
) -> None:
    emu = emulator(server)
    refused = post(server, name, body, **header)
    assert refused["ret"] == INVALID_REQUEST and refused["errmsg"].startswith(field), refused
    assert emu.timeline() == [] and not emu.typing()


def test_a_refused_send_is_a_bad_request_for_the_client(server: EmulatorServer) -> None:
    with pytest.raises(BadRequest, match="msg.context_token"):
        api(server).send_text(emulator(server).user_id, "hello", "forged-token")


def test_close_answers_a_held_poll_at_once_and_later_polls_back_off(
    server: EmulatorServer,
) -> None:
    emu = emulator(server)
    answers: list[Any] = []
    poll = threading.Thread(target=lambda: answers.append(api(server).get_updates("", 30.0)))
    poll.start()
    wait_until(lambda: emu.waiting_polls() == 1, timeout=LONG)
    emu.close()
    poll.join(LONG)
    assert not poll.is_alive() and answers[0].msgs == []
    with pytest.raises(ServerError):  # retryable: the poller backs off
        api(server).get_updates("", 30.0)

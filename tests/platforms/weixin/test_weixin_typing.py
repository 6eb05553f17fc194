from __future__ import annotations

import json
import threading

import pytest
import requests_mock as rm
from channelkit.errors import AuthError, ConfigurationError, RateLimited
from channelkit.http import RetryPolicy
from channelkit.platforms.weixin.api import WeixinApi
from channelkit.platforms.weixin.config import WeixinConfig
from channelkit.platforms.weixin.indicators import WeixinTyping

BASE = "http://ilink.test"


def api() -> WeixinApi:
    return WeixinApi("tok-secret", base_url=BASE, retry=RetryPolicy.never())


def typing_statuses(m: rm.Mocker) -> list[int]:
    return [r.json()["status"] for r in m.request_history if r.path.endswith("/sendtyping")]


@pytest.fixture
def mock():  # type: ignore[no-untyped-def]
    with rm.Mocker() as m:
        m.post(f"{BASE}/ilink/bot/getconfig", json={"ret": 0, "typing_ticket": "ticket-1"})
        m.post(f"{BASE}/ilink/bot/sendtyping", json={"ret": 0})
        yield m


def make(rt, contexts=None):  # type: ignore[no-untyped-def]
    return WeixinTyping(
        api(),
        submit=rt.serial.post,
        clock=rt.clock,
        context_token=(contexts or {}).get,
    )


def test_config_validation() -> None:
    cfg = WeixinConfig(bot_token="t")
    assert cfg.client_version == (2 << 16) | (1 << 8) | 3
    assert repr(cfg) != "t" and "bot_token" not in repr(cfg)
    with pytest.raises(ConfigurationError, match=r"weixin\.bot_token"):
        WeixinConfig(bot_token=" ")
    with pytest.raises(ConfigurationError, match=r"weixin\.channel_version"):
        WeixinConfig(bot_token="t", channel_version="2.1")
    with pytest.raises(ConfigurationError, match=r"weixin\.base_url"):
        WeixinConfig(bot_token="t", base_url="nope")
    with pytest.raises(ConfigurationError, match=r"weixin\.nope"):
        WeixinConfig.from_dict({"botToken": "t", "nope": 1})


def test_request_shape(mock) -> None:  # type: ignore[no-untyped-def]
    assert api().get_typing_ticket("user-1", "ctx-9") == "ticket-1"
    req = mock.request_history[0]
    assert req.json() == {
        "ilink_user_id": "user-1",
        "context_token": "ctx-9",
        "base_info": {"channel_version": "2.1.3"},
    }
    assert req.headers["Authorization"] == "Bearer tok-secret"
    assert req.headers["AuthorizationType"] == "ilink_bot_token"
    assert req.headers["iLink-App-Id"] == "bot"
    assert req.headers["iLink-App-ClientVersion"] == str(0x020103)
    assert len(req.headers["X-WECHAT-UIN"]) == 8
    assert req.timeout is not None
    api().send_typing("user-1", "ticket-1", 2)
    assert mock.request_history[1].json()["status"] == 2


def test_error_mapping(mock) -> None:  # type: ignore[no-untyped-def]
    mock.post(f"{BASE}/ilink/bot/sendtyping", json={"ret": -14, "errmsg": "session expired"})
    with pytest.raises(AuthError):
        api().send_typing("u", "t", 1)
    mock.post(f"{BASE}/ilink/bot/sendtyping", status_code=429)
    with pytest.raises(RateLimited):
        api().send_typing("u", "t", 1)


def test_started_on_terminal_off_and_dedup(rt, mock) -> None:  # type: ignore[no-untyped-def]
    typing = make(rt, {"user-1": "ctx-1"})
    typing.start("user-1")
    typing.start("user-1")  # second started: no second call
    rt.settle()
    typing.stop("user-1")
    typing.stop("user-1")  # repeated terminal: idempotent
    rt.settle()
    assert typing_statuses(mock) == [1, 2]
    getconfigs = [r for r in mock.request_history if r.path.endswith("/getconfig")]
    assert len(getconfigs) == 1 and getconfigs[0].json()["context_token"] == "ctx-1"
    # The ticket is cached per user.
    typing.start("user-1")
    rt.settle()
    typing.stop("user-1")
    rt.settle()
    assert typing_statuses(mock) == [1, 2, 1, 2]
    assert len([r for r in mock.request_history if r.path.endswith("/getconfig")]) == 1
    assert not typing.is_active("user-1")


def test_failed_start_lets_a_later_start_retry(rt, mock) -> None:  # type: ignore[no-untyped-def]
    mock.post(
        f"{BASE}/ilink/bot/sendtyping",
        [{"status_code": 500}, {"json": {"ret": 0}}, {"json": {"ret": 0}}],
    )
    typing = make(rt)
    typing.start("u")
    rt.settle()
    assert not typing.is_active("u")
    typing.start("u")
    rt.settle()
    assert typing.is_active("u")
    assert typing_statuses(mock) == [1, 1]
    # The ticket was dropped after the failure and fetched again.
    assert len([r for r in mock.request_history if r.path.endswith("/getconfig")]) == 2
    typing.stop("u")
    rt.settle()
    assert typing_statuses(mock) == [1, 1, 2]


def test_ticket_failure_lets_a_later_start_retry(rt, mock) -> None:  # type: ignore[no-untyped-def]
    mock.post(
        f"{BASE}/ilink/bot/getconfig",
        [{"json": {"ret": -1, "errmsg": "busy"}}, {"json": {"ret": 0, "typing_ticket": "t2"}}],
    )
    typing = make(rt)
    typing.start("u")
    rt.settle()
    assert typing_statuses(mock) == []
    typing.stop("u")  # nothing to turn off
    rt.settle()
    assert typing_statuses(mock) == []
    typing.start("u")
    rt.settle()
    assert typing_statuses(mock) == [1]


def test_late_start_is_followed_by_typing_off(rt, mock) -> None:  # type: ignore[no-untyped-def]
    gate = threading.Event()
    entered = threading.Event()

    def slow(request, context):  # type: ignore[no-untyped-def]
        if request.json()["status"] == 1:
            entered.set()
            assert gate.wait(5)
        return json.dumps({"ret": 0})

    mock.post(f"{BASE}/ilink/bot/sendtyping", text=slow)
    typing = make(rt)
    typing.start("u")
    assert entered.wait(5)
    typing.stop("u")  # the terminal event arrives while the start is in flight
    gate.set()
    rt.settle()
    assert typing_statuses(mock) == [1, 2]
    assert not typing.is_active("u")

"""The generated feishu client: what it does beyond its OpenAPI document.

The spec-driven checks of every operation are in ``test_spec_driven.py``.
"""

from __future__ import annotations

import threading

import pytest
import requests_mock as rm
from channelkit.clients.feishu import FeishuClient
from channelkit.errors import BadRequest, RateLimited
from channelkit.http.retry import RetryPolicy

API = "https://open.feishu.cn"
TOKEN_URL = API + "/open-apis/auth/v3/tenant_access_token/internal"
MESSAGE = {"receive_id": "oc_1", "msg_type": "text", "content": '{"text":"hi"}'}


def test_tenant_token_bearer_and_expired_token_code_refreshes_once() -> None:
    client = FeishuClient(app_id="cli_1", app_secret="s", retry=RetryPolicy.never())
    with rm.Mocker() as m:
        token = m.post(
            TOKEN_URL,
            [
                {"json": {"code": 0, "msg": "ok", "tenant_access_token": "t-old", "expire": 7200}},
                {"json": {"code": 0, "msg": "ok", "tenant_access_token": "t-new", "expire": 7200}},
            ],
        )
        send = m.post(
            API + "/open-apis/im/v1/messages",
            [
                {
                    "status_code": 400,
                    "json": {"code": 99991663, "msg": "Invalid access token"},
                    "headers": {"x-tt-logid": "L1"},
                },
                {"json": {"code": 0, "msg": "ok", "data": {"message_id": "om_1"}}},
            ],
        )
        client.create_message(receive_id_type="chat_id", body=MESSAGE)
    assert token.call_count == 2
    assert token.request_history[0].json() == {"app_id": "cli_1", "app_secret": "s"}
    assert [r.headers["Authorization"] for r in send.request_history] == [
        "Bearer t-old",
        "Bearer t-new",
    ]
    assert "receive_id_type=chat_id" in send.last_request.url


def test_business_code_with_http_200_is_an_error_with_log_id() -> None:
    client = FeishuClient(token="t-x", retry=RetryPolicy.never())
    with rm.Mocker() as m:
        m.post(
            API + "/open-apis/im/v1/messages",
            json={"code": 230002, "msg": "bot not in chat"},
            headers={"x-tt-logid": "LOG9"},
        )
        with pytest.raises(BadRequest) as caught:
            client.create_message(receive_id_type="chat_id", body=MESSAGE)
    assert caught.value.code == 230002
    assert caught.value.request_id == "LOG9"
    assert not caught.value.retryable


def test_frequency_limit_code_is_rate_limited() -> None:
    client = FeishuClient(token="t-x", retry=RetryPolicy.never())
    with rm.Mocker() as m:
        m.post(API + "/open-apis/im/v1/messages", json={"code": 230020, "msg": "frequency limit"})
        with pytest.raises(RateLimited):
            client.create_message(receive_id_type="chat_id", body=MESSAGE)


def test_fifty_threads_share_one_token_request() -> None:
    client = FeishuClient(app_id="cli_1", app_secret="s", max_workers=50)
    barrier = threading.Barrier(50)
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            barrier.wait(timeout=5)
            client.delete_message(message_id="om_1")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    with rm.Mocker() as m:
        token = m.post(
            TOKEN_URL, json={"code": 0, "msg": "ok", "tenant_access_token": "t-1", "expire": 7200}
        )
        delete = m.delete(API + "/open-apis/im/v1/messages/om_1", json={"code": 0, "msg": "ok"})
        threads = [threading.Thread(target=worker) for _ in range(50)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=10)
    assert not errors
    assert token.call_count == 1
    assert delete.call_count == 50

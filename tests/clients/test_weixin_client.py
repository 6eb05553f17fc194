"""The generated weixin client: what it does beyond its OpenAPI document.

The spec-driven checks of every operation are in ``test_spec_driven.py``.
"""

from __future__ import annotations

import pytest
import requests_mock as rm
from channelkit.clients.weixin import WeixinClient
from channelkit.errors import AuthError, ServerError
from channelkit.http.retry import RetryPolicy

ILINK = "https://ilinkai.weixin.qq.com/ilink/bot"


def test_transient_ret_is_retried_only_where_idempotent() -> None:
    sleeps: list[float] = []
    client = WeixinClient(
        token="bt", retry=RetryPolicy(max_attempts=3, sleep=sleeps.append, jitter=lambda: 0.0)
    )
    with rm.Mocker() as m:
        typing = m.post(
            ILINK + "/sendtyping", [{"json": {"ret": -1, "errmsg": "busy"}}, {"json": {"ret": 0}}]
        )
        client.send_typing(
            body={
                "ilink_user_id": "u",
                "typing_ticket": "t",
                "status": 1,
                "base_info": {"channel_version": "2.1.3"},
            }
        )
        send = m.post(ILINK + "/sendmessage", json={"ret": -1, "errmsg": "busy"})
        with pytest.raises(ServerError):
            client.send_message(
                body={"msg": {"to_user_id": "u"}, "base_info": {"channel_version": "2.1.3"}}
            )
    assert typing.call_count == 2
    assert send.call_count == 1
    assert len(sleeps) == 1
    assert typing.last_request.headers["Authorization"] == "Bearer bt"
    assert typing.last_request.headers["AuthorizationType"] == "ilink_bot_token"


def test_session_expired_is_an_auth_error_not_retried() -> None:
    client = WeixinClient(token="bt")
    with rm.Mocker() as m:
        cfg = m.post(ILINK + "/getconfig", json={"ret": -14, "errmsg": "session expired"})
        with pytest.raises(AuthError):
            client.get_config(
                body={"ilink_user_id": "u", "base_info": {"channel_version": "2.1.3"}}
            )
    assert cfg.call_count == 1

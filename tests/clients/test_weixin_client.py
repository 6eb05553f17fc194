"""The generated weixin client, every operation driven by its OpenAPI document."""

from __future__ import annotations

import pytest
from spec_driver import (
    ERROR_STATUSES,
    check_business_errors,
    check_missing_and_wrong_arguments,
    check_request_shape,
    check_status_mapping,
    check_unknown_enum_value,
    operation_ids,
)

PLATFORM = "weixin"


@pytest.mark.parametrize("as_model", [False, True], ids=["dict-body", "model-body"])
@pytest.mark.parametrize("operation_id", operation_ids(PLATFORM))
def test_request_matches_spec(operation_id: str, as_model: bool) -> None:
    check_request_shape(PLATFORM, operation_id, as_model=as_model)


def test_unknown_enum_value_is_kept() -> None:
    check_unknown_enum_value(PLATFORM)


@pytest.mark.parametrize(("status", "expected"), ERROR_STATUSES)
def test_http_status_maps_to_error_class(status: int, expected: type) -> None:
    check_status_mapping(PLATFORM, status, expected)


def test_business_errors_on_http_200() -> None:
    check_business_errors(PLATFORM)


def test_bad_input_fails_before_any_network_call() -> None:
    check_missing_and_wrong_arguments(PLATFORM)


# -- Weixin specifics -----------------------------------------------------------------------

import requests_mock as rm  # noqa: E402
from channelkit.clients.weixin import WeixinClient  # noqa: E402
from channelkit.errors import AuthError, ServerError  # noqa: E402
from channelkit.http.retry import RetryPolicy  # noqa: E402

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

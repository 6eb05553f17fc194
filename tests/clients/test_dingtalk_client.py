"""The generated dingtalk client: what it does beyond its OpenAPI document.

The spec-driven checks of every operation are in ``test_spec_driven.py``.
"""

from __future__ import annotations

import pytest
import requests_mock as rm
from channelkit.clients.dingtalk import CreateAndDeliverCardResponse, DingtalkClient
from channelkit.errors import AuthError, DeserializationError, RateLimited
from channelkit.http.model import UNSET
from channelkit.http.retry import RetryPolicy

API = "https://api.dingtalk.com"
CARD_BODY = {
    "outTrackId": "t1",
    "cardTemplateId": "tpl.schema",
    "openSpaceId": "dtv1.card//IM_GROUP.cid1",
    "cardData": {"cardParamMap": {"content": "hi"}},
}


def _client(**kwargs: object) -> DingtalkClient:
    return DingtalkClient(app_key="ak", app_secret="sk", retry=RetryPolicy.never(), **kwargs)  # type: ignore[arg-type]


def test_token_is_fetched_once_and_sent_in_the_header() -> None:
    client = _client()
    with rm.Mocker() as m:
        token = m.post(
            API + "/v1.0/oauth2/accessToken", json={"accessToken": "at-1", "expireIn": 7200}
        )
        card = m.post(API + "/v1.0/card/instances/createAndDeliver", json={"success": True})
        client.create_and_deliver_card(body=CARD_BODY)
        client.create_and_deliver_card(body=CARD_BODY)
    assert token.call_count == 1
    assert token.last_request.json() == {"appKey": "ak", "appSecret": "sk"}
    assert card.call_count == 2
    assert card.last_request.headers["x-acs-dingtalk-access-token"] == "at-1"


def test_invalid_authentication_invalidates_and_retries_once() -> None:
    client = _client()
    with rm.Mocker() as m:
        token = m.post(
            API + "/v1.0/oauth2/accessToken",
            [
                {"json": {"accessToken": "old", "expireIn": 7200}},
                {"json": {"accessToken": "new", "expireIn": 7200}},
            ],
        )
        card = m.post(
            API + "/v1.0/card/instances/createAndDeliver",
            [
                {
                    "status_code": 400,
                    "json": {
                        "code": "InvalidAuthentication",
                        "message": "bad token",
                        "requestid": "r1",
                    },
                },
                {"json": {"success": True}},
            ],
        )
        client.create_and_deliver_card(body=CARD_BODY)
    assert token.call_count == 2
    assert [r.headers["x-acs-dingtalk-access-token"] for r in card.request_history] == [
        "old",
        "new",
    ]


def test_a_second_auth_failure_is_raised() -> None:
    client = _client()
    with rm.Mocker() as m:
        m.post(API + "/v1.0/oauth2/accessToken", json={"accessToken": "x", "expireIn": 7200})
        card = m.post(
            API + "/v1.0/card/instances/createAndDeliver",
            status_code=401,
            json={"code": "InvalidAuthentication", "message": "nope", "requestid": "r9"},
        )
        with pytest.raises(AuthError) as caught:
            client.create_and_deliver_card(body=CARD_BODY)
    assert card.call_count == 2
    assert caught.value.request_id == "r9"
    assert caught.value.code == "InvalidAuthentication"


def test_qps_limit_code_is_rate_limited() -> None:
    client = _client(token="static")
    with rm.Mocker() as m:
        m.put(
            API + "/v1.0/card/streaming",
            status_code=403,
            json={"code": "Forbidden.AccessDenied.QpsLimitForApi", "message": "qps"},
        )
        with pytest.raises(RateLimited):
            client.streaming_update_card(
                body={"outTrackId": "t", "guid": "g", "key": "content", "content": "x"}
            )


def test_deliver_results_parse_with_per_target_success() -> None:
    data = {
        "success": True,
        "result": {
            "outTrackId": "t1",
            "deliverResults": [
                {"spaceId": "cid1", "spaceType": "IM_GROUP", "success": True, "carrierId": "pq"},
                {
                    "spaceId": "u2",
                    "spaceType": "IM_ROBOT",
                    "success": False,
                    "errorMsg": "no",
                    "newField": 1,
                },
            ],
        },
    }
    parsed = CreateAndDeliverCardResponse.from_dict(data)
    assert parsed.result is not UNSET
    results = parsed.result.deliver_results  # type: ignore[union-attr]
    assert [r.success for r in results] == [True, False]
    assert results[1].extra_fields == {"newField": 1}
    assert parsed.to_dict() == data
    data["result"]["deliverResults"][0]["success"] = "yes"  # type: ignore[index]
    with pytest.raises(DeserializationError) as caught:
        CreateAndDeliverCardResponse.from_dict(data)
    assert caught.value.path == "result.deliverResults[0].success"


def test_legacy_gettoken_goes_to_the_legacy_server_and_maps_errcode() -> None:
    client = _client(server_urls={"legacy": "http://127.0.0.1:9"})
    with rm.Mocker() as m:
        legacy = m.get(
            "http://127.0.0.1:9/gettoken", json={"errcode": 40089, "errmsg": "invalid appkey"}
        )
        with pytest.raises(Exception) as caught:
            client.get_legacy_access_token(appkey="ak", appsecret="sk")
    assert legacy.call_count == 1
    assert "x-acs-dingtalk-access-token" not in legacy.last_request.headers
    assert getattr(caught.value, "code", None) == 40089

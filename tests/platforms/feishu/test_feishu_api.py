"""FeishuApi request shapes against requests-mock (the generated client underneath)."""

from __future__ import annotations

import json

import pytest
import requests_mock
from channelkit.errors import ApiError, DeserializationError
from channelkit.http.retry import RetryPolicy
from channelkit.platforms.feishu.api import FeishuApi

BASE = "https://feishu.test"
OK = {"code": 0, "msg": "ok", "data": {}}


@pytest.fixture
def mock() -> requests_mock.Mocker:
    with requests_mock.Mocker() as m:
        m.post(
            f"{BASE}/open-apis/auth/v3/tenant_access_token/internal",
            json={"code": 0, "msg": "ok", "tenant_access_token": "t-abc", "expire": 7200},
        )
        yield m


@pytest.fixture
def api(mock: requests_mock.Mocker) -> FeishuApi:
    return FeishuApi.create("cli_1", "secret", base_url=BASE, retry=RetryPolicy(max_attempts=1))


def test_send_card_uses_tenant_token_and_serialized_content(
    mock: requests_mock.Mocker, api: FeishuApi
) -> None:
    route = mock.post(
        f"{BASE}/open-apis/im/v1/messages", json={"code": 0, "data": {"message_id": "om_9"}}
    )
    assert api.send_card("oc_1", {"schema": "2.0", "body": {"elements": []}}) == "om_9"
    req = route.last_request
    assert req.qs == {"receive_id_type": ["chat_id"]}
    assert req.headers["Authorization"] == "Bearer t-abc"
    body = req.json()
    assert body["receive_id"] == "oc_1" and body["msg_type"] == "interactive"
    assert json.loads(body["content"]) == {"schema": "2.0", "body": {"elements": []}}
    assert tuple(req.timeout) == (3.05, 10.0)  # explicit (connect, read) timeout


def test_reply_and_text(mock: requests_mock.Mocker, api: FeishuApi) -> None:
    route = mock.post(
        f"{BASE}/open-apis/im/v1/messages/om_1/reply",
        json={"code": 0, "data": {"message_id": "om_2"}},
    )
    assert api.send_text("oc_1", "hi", reply_to="om_1") == "om_2"
    # a reply goes into the thread of the message it answers (threaded conversations)
    assert route.last_request.json() == {
        "msg_type": "text",
        "content": '{"text":"hi"}',
        "reply_in_thread": True,
    }


def test_card_entity_calls(mock: requests_mock.Mocker, api: FeishuApi) -> None:
    create = mock.post(
        f"{BASE}/open-apis/cardkit/v1/cards", json={"code": 0, "data": {"card_id": "c1"}}
    )
    send = mock.post(
        f"{BASE}/open-apis/im/v1/messages", json={"code": 0, "data": {"message_id": "om_1"}}
    )
    stream = mock.put(f"{BASE}/open-apis/cardkit/v1/cards/c1/elements/ck_content/content", json=OK)
    settings = mock.patch(f"{BASE}/open-apis/cardkit/v1/cards/c1/settings", json=OK)
    update = mock.put(f"{BASE}/open-apis/cardkit/v1/cards/c1", json=OK)
    assert api.create_card_entity({"schema": "2.0"}) == "c1"
    assert create.last_request.json() == {"type": "card_json", "data": '{"schema":"2.0"}'}
    assert api.send_card_entity("oc_1", "c1") == "om_1"
    assert json.loads(send.last_request.json()["content"]) == {
        "type": "card",
        "data": {"card_id": "c1"},
    }
    api.stream_text("c1", "ck_content", "Hello", 1)
    assert stream.last_request.json() == {"content": "Hello", "sequence": 1, "uuid": "c1-1"}
    api.close_streaming("c1", 2)
    body = settings.last_request.json()
    assert (
        json.loads(body["settings"]) == {"config": {"streaming_mode": False}}
        and body["sequence"] == 2
    )
    api.update_card_entity("c1", {"schema": "2.0"}, 3)
    assert update.last_request.json() == {
        "card": {"type": "card_json", "data": '{"schema":"2.0"}'},
        "sequence": 3,
        "uuid": "c1-3",
    }


def test_patch_and_reactions(mock: requests_mock.Mocker, api: FeishuApi) -> None:
    patch = mock.patch(f"{BASE}/open-apis/im/v1/messages/om_1", json=OK)
    react = mock.post(
        f"{BASE}/open-apis/im/v1/messages/om_1/reactions",
        json={"code": 0, "data": {"reaction_id": "r1"}},
    )
    unreact = mock.delete(f"{BASE}/open-apis/im/v1/messages/om_1/reactions/r1", json=OK)
    api.patch_card("om_1", {"schema": "2.0"})
    assert patch.last_request.json() == {"content": '{"schema":"2.0"}'}
    assert api.add_reaction("om_1", "OnIt") == "r1"
    assert react.last_request.json() == {"reaction_type": {"emoji_type": "OnIt"}}
    api.delete_reaction("om_1", "r1")
    assert unreact.called


def test_business_errors_raise(mock: requests_mock.Mocker, api: FeishuApi) -> None:
    mock.put(
        f"{BASE}/open-apis/cardkit/v1/cards/c1/elements/e/content",
        status_code=400,
        json={"code": 300317, "msg": "sequence not increasing"},
    )
    with pytest.raises(ApiError) as info:
        api.stream_text("c1", "e", "x", 1)
    assert info.value.code == 300317


def test_missing_ids_raise(mock: requests_mock.Mocker, api: FeishuApi) -> None:
    mock.post(f"{BASE}/open-apis/im/v1/messages", json=OK)
    with pytest.raises(DeserializationError):
        api.send_text("oc_1", "x")

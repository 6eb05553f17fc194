from __future__ import annotations

import json

import pytest
import requests
from channelkit.errors import AuthError, BadRequest, RateLimited, ServerError, TransportError
from channelkit.http.auth import StaticTokenProvider
from channelkit.platforms.dingtalk.api import (
    QUESTION_CARD_TEMPLATE_ID,
    STATUS_CARD_TEMPLATE_ID,
    CardApi,
    CardDeliveryError,
    CardTarget,
    stringify_param_map,
)

BASE = "https://api.dingtalk.com"


@pytest.fixture
def api():
    return CardApi("robot-code", StaticTokenProvider("tok"))


def test_stringify():
    assert stringify_param_map({"a": "x", "n": 2, "b": True, "o": {"k": [1]}}) == {
        "a": "x",
        "n": "2",
        "b": "true",
        "o": '{"k":[1]}',
    }


def test_create_group_status_card_exact_body(api, requests_mock):
    m = requests_mock.post(f"{BASE}/v1.0/card/instances/createAndDeliver", json={"success": True})
    api.create_and_deliver(
        STATUS_CARD_TEMPLATE_ID,
        "status-1",
        CardTarget("cid-group", True),
        {"content": "hello", "flowStatus": 2},
    )
    req = m.last_request
    assert req.headers["x-acs-dingtalk-access-token"] == "tok"
    assert req.headers["Content-Type"].startswith("application/json")
    assert req.timeout == (3.05, 10.0)  # connect within the 10 s overall deadline
    assert req.json() == {
        "cardTemplateId": STATUS_CARD_TEMPLATE_ID,
        "outTrackId": "status-1",
        "cardData": {"cardParamMap": {"content": "hello", "flowStatus": "2"}},
        "callbackType": "STREAM",
        "imGroupOpenSpaceModel": {"supportForward": True},
        "imRobotOpenSpaceModel": {"supportForward": True},
        "openSpaceId": "dtv1.card//IM_GROUP.cid-group",
        "userIdType": 1,
        "imGroupOpenDeliverModel": {
            "robotCode": "robot-code",
            "extension": {"dynamicSummary": "true"},
        },
    }


def test_create_direct_question_card_http_callbacks(requests_mock):
    api = CardApi("robot-code", lambda: "tok", callback_route_key="route-1")
    m = requests_mock.post(f"{BASE}/v1.0/card/instances/createAndDeliver", json={"success": True})
    api.create_and_deliver(
        QUESTION_CARD_TEMPLATE_ID, "q-1", CardTarget("user-1", False), {"k": "v"}
    )
    body = m.last_request.json()
    assert body["openSpaceId"] == "dtv1.card//IM_ROBOT.user-1"
    assert body["imRobotOpenDeliverModel"] == {
        "spaceType": "IM_ROBOT",
        "robotCode": "robot-code",
        "extension": {"dynamicSummary": "true"},
    }
    assert body["callbackType"] == "HTTP" and body["callbackRouteKey"] == "route-1"
    assert "imGroupOpenDeliverModel" not in body


def test_streaming_and_instance_bodies(api, requests_mock):
    s = requests_mock.put(f"{BASE}/v1.0/card/streaming", json={"success": True, "result": True})
    u = requests_mock.put(f"{BASE}/v1.0/card/instances", json={"success": True, "result": True})
    api.stream("status-1", "content", "snapshot")
    body = s.last_request.json()
    assert isinstance(body.pop("guid"), str)
    assert body == {
        "outTrackId": "status-1",
        "key": "content",
        "content": "snapshot",
        "isFull": True,
        "isFinalize": False,
        "isError": False,
    }
    api.update_instance("status-1", {"flowStatus": 3, "content": "done"})
    assert u.last_request.json() == {
        "outTrackId": "status-1",
        "cardData": {"cardParamMap": {"flowStatus": "3", "content": "done"}},
        "cardUpdateOptions": {"updateCardDataByKey": True},
    }


def test_errors(api, requests_mock):
    url = f"{BASE}/v1.0/card/instances/createAndDeliver"
    requests_mock.post(
        url, status_code=403, json={"code": "Forbidden.AccessDenied", "message": "no"}
    )
    with pytest.raises(AuthError):
        api.create_and_deliver(STATUS_CARD_TEMPLATE_ID, "x", CardTarget("c", True), {})
    requests_mock.post(
        url,
        json={
            "success": True,
            "result": {"deliverResults": [{"success": False, "errorMsg": "template denied"}]},
        },
    )
    with pytest.raises(CardDeliveryError) as info:
        api.create_and_deliver(QUESTION_CARD_TEMPLATE_ID, "x", CardTarget("c", True), {})
    assert f"{QUESTION_CARD_TEMPLATE_ID}: template denied" in str(info.value)
    requests_mock.post(
        url, status_code=400, json={"code": "param.templateNotExist", "message": "x"}
    )
    with pytest.raises(BadRequest) as bad:
        api.create_and_deliver(STATUS_CARD_TEMPLATE_ID, "x", CardTarget("c", True), {})
    assert bad.value.code == "param.templateNotExist"
    assert bad.value.template_id == STATUS_CARD_TEMPLATE_ID  # type: ignore[attr-defined]
    requests_mock.put(f"{BASE}/v1.0/card/streaming", status_code=429)
    with pytest.raises(RateLimited):
        api.stream("x", "content", "")
    requests_mock.put(f"{BASE}/v1.0/card/instances", status_code=503)
    with pytest.raises(ServerError):
        api.update_instance("x", {})
    requests_mock.put(f"{BASE}/v1.0/card/instances", exc=requests.exceptions.ReadTimeout)
    with pytest.raises(TransportError) as timeout:
        api.update_instance("x", {})
    assert timeout.value.timeout


def test_401_invalidates_token_and_retries_once(requests_mock):
    class Tokens:
        refreshable = True

        def __init__(self):
            self.n = 0
            self.invalidated = []

        def get_token(self):
            self.n += 1
            return f"t{self.n}"

        def invalidate(self, token=None):
            self.invalidated.append(token)

    tokens = Tokens()
    api = CardApi("robot", tokens)
    m = requests_mock.put(
        f"{BASE}/v1.0/card/instances",
        [
            {"status_code": 401, "json": {"code": "InvalidAuthentication"}},
            {"json": {"success": True}},
        ],
    )
    api.update_instance("x", {"a": 1})
    assert m.call_count == 2 and tokens.invalidated == ["t1"]
    assert m.request_history[1].headers["x-acs-dingtalk-access-token"] == "t2"


def test_robot_sends_and_emotions(api, requests_mock):
    g = requests_mock.post(f"{BASE}/v1.0/robot/groupMessages/send", json={"processQueryKey": "k"})
    o = requests_mock.post(
        f"{BASE}/v1.0/robot/oToMessages/batchSend", json={"processQueryKey": "k"}
    )
    r = requests_mock.post(f"{BASE}/v1.0/robot/emotion/reply", json={"success": True})
    c = requests_mock.post(f"{BASE}/v1.0/robot/emotion/recall", json={"success": True})
    api.send_group_markdown("cid-1", "Card interaction", "text")
    assert g.last_request.json() == {
        "robotCode": "robot-code",
        "openConversationId": "cid-1",
        "msgKey": "sampleMarkdown",
        "msgParam": json.dumps({"title": "Card interaction", "text": "text"}),
    }
    api.send_direct_markdown(["u1"], "t", "x")
    assert o.last_request.json()["userIds"] == ["u1"]
    api.reply_emotion("msg-1", "cid-1")
    api.recall_emotion("msg-1", "cid-1")
    for mock in (r, c):
        body = mock.last_request.json()
        assert body["openMsgId"] == "msg-1" and body["openConversationId"] == "cid-1"
        assert body["emotionType"] == 2 and body["emotionName"] == "👀"
        assert body["textEmotion"] == {
            "emotionId": "2659900",
            "emotionName": "👀",
            "text": "👀",
            "backgroundId": "im_bg_1",
        }


def test_session_webhook(api, requests_mock):
    url = "https://oapi.dingtalk.com/robot/sendBySession?session=1"
    m = requests_mock.post(url, json={"errcode": 0, "errmsg": "ok"})
    api.send_webhook_markdown(url, "Reply", "hello", ["staff-1"])
    assert m.last_request.json() == {
        "msgtype": "markdown",
        "markdown": {"title": "Reply", "text": "hello"},
        "at": {"atUserIds": ["staff-1"], "isAtAll": False},
    }
    assert "x-acs-dingtalk-access-token" not in m.last_request.headers
    requests_mock.post(url, json={"errcode": 310000, "errmsg": "bad"})
    with pytest.raises(BadRequest):
        api.send_webhook_markdown(url, "Reply", "hello")

"""The DingTalk emulator as the SDK's generated client and the adapter's checks see it."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping

import pytest
import requests
from channelkit.platforms.dingtalk.ingress import (
    check_card_signature,
    check_robot_signature,
    parse_card_callback,
    parse_robot_message,
)
from channelkit.playground import CallbackDelivery, EmulatorServer


@pytest.fixture()
def emu() -> Iterator[tuple[EmulatorServer, list[tuple[str, Mapping[str, str], bytes]]]]:
    sent: list[tuple[str, Mapping[str, str], bytes]] = []

    def deliver(url: str, headers: Mapping[str, str], body: bytes) -> CallbackDelivery:
        sent.append((url, headers, body))
        return CallbackDelivery(200, "{}")

    with EmulatorServer(
        app_key="k",
        app_secret="s",
        api_secret="card-secret",
        robot_callback_url="http://sdk/dingtalk/robot",
        card_callback_url="http://sdk/dingtalk/card",
        deliver=deliver,
    ) as server:
        yield server, sent


def _token(url: str) -> str:
    response = requests.post(
        f"{url}/v1.0/oauth2/accessToken", json={"appKey": "k", "appSecret": "s"}, timeout=5
    )
    assert response.status_code == 200 and response.json()["expireIn"] == 7200
    return str(response.json()["accessToken"])


def test_generated_client_talks_to_the_emulator(emu: tuple[EmulatorServer, list]) -> None:
    from channelkit.clients.dingtalk import DingtalkClient

    server, sent = emu
    client = DingtalkClient(
        app_key="k", app_secret="s", base_url=server.url, server_urls={"legacy": server.url}
    )
    registered = client.register_card_callback(
        body={
            "callbackRouteKey": "route-1",
            "callbackUrl": "http://sdk/hooks/card",
            "apiSecret": "registered-secret",
        }
    )
    assert registered.success is True
    created = client.create_and_deliver_card(
        body={
            "cardTemplateId": "tpl",
            "outTrackId": "card-9",
            "openSpaceId": "dtv1.card//IM_GROUP.cid-1",
            "callbackType": "HTTP",
            "callbackRouteKey": "route-1",
            "cardData": {"cardParamMap": {"content": "hi"}},
        }
    )
    assert created.success is True
    legacy = client.get_legacy_access_token(appkey="k", appsecret="s")
    assert legacy.errcode == 0
    paths = [c["path"] for c in server.emulator.calls()]
    assert paths == [
        "/v1.0/oauth2/accessToken",
        "/v1.0/card/callbacks/register",
        "/v1.0/card/instances/createAndDeliver",
        "/gettoken",
    ]
    token_call = server.emulator.calls("/v1.0/oauth2/accessToken")[0]
    assert token_call["body"] == {"appKey": "k", "appSecret": "***"}
    assert token_call["response"]["accessToken"] == "***"
    # a card action goes to the URL registered for the card's route key, signed with its secret
    server.emulator.card_action("card-9", "stop")
    url, headers, _ = sent[-1]
    assert url == "http://sdk/hooks/card"
    assert check_card_signature(headers, "registered-secret", now=time.time()) is None


def test_token_and_validation_errors(emu: tuple[EmulatorServer, list]) -> None:
    server, _ = emu
    url = server.url
    bad = requests.post(
        f"{url}/v1.0/oauth2/accessToken", json={"appKey": "k", "appSecret": "x"}, timeout=5
    )
    assert bad.status_code == 400
    no_token = requests.put(f"{url}/v1.0/card/instances", json={"outTrackId": "a"}, timeout=5)
    assert no_token.status_code == 401 and no_token.json()["code"] == "InvalidAuthentication"
    headers = {"x-acs-dingtalk-access-token": _token(url)}
    missing = requests.put(
        f"{url}/v1.0/card/instances",
        json={"outTrackId": "nope", "cardData": {"cardParamMap": {"a": "b"}}},
        headers=headers,
        timeout=5,
    )
    assert missing.status_code == 400 and missing.json()["code"] == "param.cardNotExist"
    not_string = requests.post(
        f"{url}/v1.0/card/instances/createAndDeliver",
        json={
            "cardTemplateId": "t",
            "outTrackId": "c1",
            "openSpaceId": "dtv1.card//IM_ROBOT.u",
            "cardData": {"cardParamMap": {"flowStatus": 2}},
        },
        headers=headers,
        timeout=5,
    )
    assert not_string.status_code == 400
    created = requests.post(
        f"{url}/v1.0/card/instances/createAndDeliver",
        json={
            "cardTemplateId": "t",
            "outTrackId": "c1",
            "openSpaceId": "dtv1.card//IM_ROBOT.u",
            "cardData": {"cardParamMap": {"content": ""}},
        },
        headers=headers,
        timeout=5,
    )
    result = created.json()["result"]["deliverResults"][0]
    assert result == {**result, "spaceType": "IM_ROBOT", "spaceId": "u", "success": True}
    no_full = requests.put(
        f"{url}/v1.0/card/streaming",
        json={"outTrackId": "c1", "guid": "g", "key": "content", "content": "x"},
        headers=headers,
        timeout=5,
    )
    assert no_full.json()["code"] == "param.stream.isFull"
    for content, full in (("ab", True), ("cd", False)):
        ok = requests.put(
            f"{url}/v1.0/card/streaming",
            json={
                "outTrackId": "c1",
                "guid": "g",
                "key": "content",
                "content": content,
                "isFull": full,
            },
            headers=headers,
            timeout=5,
        )
        assert ok.json() == {"success": True, "result": True}
    assert server.emulator.card("c1")["params"]["content"] == "abcd"  # type: ignore[index]
    replaced = requests.put(
        f"{url}/v1.0/card/instances",
        json={"outTrackId": "c1", "cardData": {"cardParamMap": {"x": "1"}}},
        headers=headers,
        timeout=5,
    )
    assert replaced.status_code == 200
    assert server.emulator.card("c1")["params"] == {"x": "1"}  # type: ignore[index]
    assert requests.get(f"{url}/v1.0/unknown", timeout=5).status_code == 404


def test_callbacks_are_signed_as_dingtalk_documents(emu: tuple[EmulatorServer, list]) -> None:
    server, sent = emu
    emulator = server.emulator
    msg_id, _ = emulator.send_user_message("hi there")
    url, headers, body = sent[-1]
    assert url == "http://sdk/dingtalk/robot"
    now = time.time()
    assert check_robot_signature(headers, "s", now=now) is None
    assert check_robot_signature(headers, "other", now=now) == 403
    message = parse_robot_message(json.loads(body))
    assert message is not None and message.msg_id == msg_id and message.text == "hi there"
    # the emulator's webhook is on 127.0.0.1, not a DingTalk host: the SDK never trusts it
    assert json.loads(body)["sessionWebhook"].startswith(server.url)
    assert message.session_webhook is None

    with emulator._lock:
        emulator._put_card("card-1", {"id": "card-1", "kind": "question", "params": {}})
    emulator.card_action("card-1", "submit", {"0": "Red", "1": ["A", "B"]})
    url, headers, body = sent[-1]
    assert url == "http://sdk/dingtalk/card"
    assert check_card_signature(headers, "card-secret", now=time.time()) is None
    callback = parse_card_callback(json.loads(body))
    assert callback is not None
    assert (callback.out_track_id, callback.action_id, callback.actor_id) == (
        "card-1",
        "submit",
        emulator.user_id,
    )
    assert dict(callback.form_data) == {"0": "Red", "1": ["A", "B"]}
    emulator.card_action("card-1", "cancel")
    cancel = parse_card_callback(json.loads(sent[-1][2]))
    assert cancel is not None and cancel.is_cancel
    with pytest.raises(ValueError):  # a question card has no Stop button (HTTP: 400)
        emulator.card_action("card-1", "stop")
    with emulator._lock:
        emulator._put_card("card-2", {"id": "card-2", "kind": "status", "params": {}})
    emulator.card_action("card-2", "stop")
    stop = parse_card_callback(json.loads(sent[-1][2]))
    assert stop is not None and stop.action_id == "btn_stop"


def test_session_webhook_and_reactions(emu: tuple[EmulatorServer, list]) -> None:
    server, sent = emu
    emulator = server.emulator
    msg_id, _ = emulator.send_user_message("hello")
    webhook = json.loads(sent[-1][2])["sessionWebhook"]
    reply = requests.post(
        webhook,
        json={"msgtype": "markdown", "markdown": {"title": "t", "text": "**hi**"}},
        timeout=5,
    )
    assert reply.json() == {"errcode": 0, "errmsg": "ok"}
    assert emulator.timeline()[-1]["text"] == "**hi**"
    headers = {"x-acs-dingtalk-access-token": _token(server.url)}
    body = {"robotCode": "k", "openMsgId": msg_id, "openConversationId": "cid", "emotionName": "👀"}
    requests.post(f"{server.url}/v1.0/robot/emotion/reply", json=body, headers=headers, timeout=5)
    assert emulator.reactions(msg_id) == ["👀"]
    requests.post(f"{server.url}/v1.0/robot/emotion/recall", json=body, headers=headers, timeout=5)
    assert emulator.reactions(msg_id) == []
    unknown = requests.post(
        f"{server.url}/robot/sendBySession?session=nope",
        json={"msgtype": "text", "text": {"content": "x"}},
        timeout=5,
    )
    assert unknown.json()["errcode"] != 0


def test_recorded_calls_are_bounded() -> None:
    from channelkit.playground import DingtalkEmulator

    emulator = DingtalkEmulator()
    emulator._calls = type(emulator._calls)(maxlen=5)
    for _ in range(12):
        emulator.handle_api("GET", "/gettoken", {"appkey": "x"}, {}, b"")
    assert len(emulator.calls()) == 5

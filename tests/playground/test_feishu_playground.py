"""`channelkit playground --platform feishu`: the demo conversation over real HTTP.

The Feishu adapter's generated client talks to the emulator; the emulator sends
``im.message.receive_v1`` events and ``card.action.trigger`` callbacks encrypted and
signed (the playground sets an encrypt key), and the assertions read
``/_emulator/calls``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
import requests
from channelkit.playground import CallbackDelivery, FeishuEmulator, Playground
from playground_helpers import callbacks, calls, click, new_view, send, view, views, wait

EVENTS = "/open-apis/im/v1/messages"
CARDS = "/open-apis/cardkit/v1/cards"


@pytest.fixture(scope="module")
def playground() -> Iterator[Playground]:
    with Playground(platform="feishu", demo_delay=0.01) as pg:
        yield pg


def _click_until(pg: Playground, card_id: str, action: str, until: str, form: Any = None) -> None:
    """Click, then wait for the state (once more if the click raced the card's send)."""
    for attempt in range(5):
        click(pg, card_id, action, form)
        try:
            wait(lambda: view(pg, card_id)["state"] == until, f"{card_id} -> {until}", 1.0)
            return
        except AssertionError:
            if attempt == 4:
                raise


def test_demo_conversation_and_stop(playground: Playground) -> None:
    pg = playground
    assert requests.get(f"{pg.url}/_emulator/state", timeout=5).json()["platform"] == "feishu"
    start = send(pg, "hello")
    question = new_view(pg, start, "question", "pending")
    first = views(pg)[start]
    assert first["kind"] == "status" and first["state"] == "completed"
    assert first["statusLine"] == "Completed" and first["actions"] == []
    assert "You wrote: **hello**" in first["content"]
    assert [q["multi"] for q in question["questions"]] == [False, True]
    assert [o["text"] for o in question["questions"][0]["options"]] == ["Red", "Green", "Blue"]
    assert question["actions"] == ["submit", "cancel"]

    # answer the form (labels are mapped to the select's option values, as a click does)
    _click_until(pg, question["id"], "submit", "submitted", {"0": "Blue", "1": ["Cheese", "Basil"]})
    continuation = new_view(pg, start + 2, "status", "completed")
    assert "You picked **Blue** and **Cheese, Basil**" in continuation["content"]
    submitted = view(pg, question["id"])
    assert "Blue" in submitted["desc"] and "Cheese, Basil" in submitted["desc"]
    assert submitted["toast"]["type"] == "success"  # the SDK's toast answer to the click

    # the OnIt reaction was on the user's message while the run was active, then removed
    wait(lambda: not pg.emulator.state()["reactions"], "the reaction to be removed")
    recorded = calls(pg)
    reactions = [c for c in recorded if "/reactions" in c["path"]]
    # removed while the form waited for the person, added again once it was submitted
    assert [c["method"] for c in reactions] == ["POST", "DELETE", "POST", "DELETE"]
    assert reactions[0]["body"] == {"reaction_type": {"emoji_type": "OnIt"}}

    # Stop on a long run: the card streams (CardKit element content), then stops
    start = send(pg, "long")
    running = new_view(pg, start, "status", "running")
    wait(lambda: view(pg, running["id"])["actions"] == ["stop"], "the Stop button")
    wait(lambda: "Step 2" in view(pg, running["id"])["content"], "streamed steps")
    _click_until(pg, running["id"], "stop", "stopped")
    stopped = view(pg, running["id"])
    assert stopped["statusLine"] == "Stopped" and stopped["actions"] == []
    assert not stopped["streaming"]

    recorded = calls(pg)
    assert recorded[0]["path"] == "/open-apis/auth/v3/tenant_access_token/internal"
    assert all(c["status"] == 200 for c in recorded), [c for c in recorded if c["status"] != 200]
    created = [c for c in recorded if c["path"] == CARDS and c["method"] == "POST"]
    assert len(created) == 3  # the two status cards and the long run's card
    for call in created:
        entity = json.loads(call["body"]["data"])
        assert entity["schema"] == "2.0" and entity["config"]["streaming_mode"] is True
    sent = [json.loads(c["body"]["content"]) for c in recorded if c["path"] == EVENTS]
    assert {"type": "card", "data": {"card_id": running["id"]}} in sent
    streamed = [c for c in recorded if c["path"].startswith(f"{CARDS}/{running['id']}")]
    element_writes = [c for c in streamed if c["path"].endswith("/elements/ck_content/content")]
    assert element_writes, "the long run's text was streamed into the card element"
    sequences = [c["body"]["sequence"] for c in streamed]
    assert sequences == sorted(sequences) and len(set(sequences)) == len(sequences)
    assert [c["method"] for c in streamed[-2:]] == ["PATCH", "PUT"]  # close streaming, then
    assert json.loads(streamed[-2]["body"]["settings"]) == {"config": {"streaming_mode": False}}
    final = json.loads(streamed[-1]["body"]["card"]["data"])
    assert "ck_stop" not in json.dumps(final)

    sent_back = callbacks(pg)
    assert {c["kind"] for c in sent_back} == {"event", "card"}
    assert all(c["status"] == 200 for c in sent_back)


def test_cancel_the_form(playground: Playground) -> None:
    pg = playground
    start = send(pg, "again")
    question = new_view(pg, start, "question", "pending")
    _click_until(pg, question["id"], "cancel", "cancelled")
    after = new_view(pg, start + 2, "status", "completed")
    assert "No answers" in after["content"]


def test_callbacks_are_encrypted_and_signed_as_feishu_documents() -> None:
    from channelkit.ingress import Headers, IngressRequest
    from channelkit.platforms.feishu.ingress import (
        FeishuIngressVerifier,
        IngressRejected,
        parse_card_action,
        parse_message_event,
    )

    sent: list[tuple[str, Mapping[str, str], bytes]] = []

    def deliver(url: str, headers: Mapping[str, str], body: bytes) -> CallbackDelivery:
        sent.append((url, headers, body))
        return CallbackDelivery(200, '{"toast": {"type": "info", "content": "ok"}}')

    emulator = FeishuEmulator(
        verification_token="vt",
        encrypt_key="ek",
        events_url="http://sdk/feishu/events",
        card_url="http://sdk/feishu/card",
        deliver=deliver,
    )
    msg_id, _ = emulator.send_user_message("hi there")
    url, headers, body = sent[-1]
    assert url == "http://sdk/feishu/events"
    assert set(json.loads(body)) == {"encrypt"}  # nothing readable without the key

    def request(path: str, headers: Mapping[str, str], body: bytes) -> IngressRequest:
        return IngressRequest(method="POST", path=path, headers=Headers(headers), body=body)

    verifier = FeishuIngressVerifier("vt", "ek", time=time.time)
    verified = verifier.verify(request("/feishu/events", headers, body))
    message = parse_message_event(verified.payload)
    assert verified.event_type == "im.message.receive_v1"
    assert message is not None and (message.message_id, message.text) == (msg_id, "hi there")
    assert message.sender_open_id == emulator.user_open_id and not message.is_group

    tampered = body.replace(b'"}', b'A"}')
    with pytest.raises(IngressRejected) as rejected:
        verifier.verify(request("/feishu/events", headers, tampered))
    assert rejected.value.status == 401
    with pytest.raises(IngressRejected):
        FeishuIngressVerifier("vt", "other-key", time=time.time).verify(
            request("/feishu/events", headers, body)
        )

    # a card click: the button's own callback value and the form's current inputs
    card = {
        "schema": "2.0",
        "config": {"update_multi": True},
        "body": {
            "elements": [
                {
                    "tag": "form",
                    "name": "f",
                    "elements": [
                        {
                            "tag": "select_static",
                            "name": "0",
                            "options": [
                                {"text": {"tag": "plain_text", "content": "A"}, "value": "0"},
                                {"text": {"tag": "plain_text", "content": "B"}, "value": "1"},
                            ],
                        },
                        {"tag": "input", "name": "0_other"},
                        {
                            "tag": "button",
                            "name": "go",
                            "form_action_type": "submit",
                            "behaviors": [
                                {"type": "callback", "value": {"action": "ck_submit", "x": 1}}
                            ],
                        },
                    ],
                }
            ]
        },
    }
    with emulator._lock:
        emulator._put_card(
            "om_1",
            {"id": "om_1", "json": card, "kind": "question", "messageId": "om_1", "updates": 0},
        )
    emulator.card_action("om_1", "submit", {"0": "B"})
    url, headers, body = sent[-1]
    assert url == "http://sdk/feishu/card"
    action = parse_card_action(verifier.verify(request("/feishu/card", headers, body)).payload)
    assert action is not None
    assert action.value == {"action": "ck_submit", "x": 1} and action.name == "go"
    assert action.form_value == {"0": "1", "0_other": ""}
    assert (action.operator_open_id, action.open_message_id) == (emulator.user_open_id, "om_1")
    assert emulator.view("om_1")["toast"]["text"] == "ok"  # type: ignore[index]
    with pytest.raises(ValueError):
        emulator.card_action("om_1", "submit", {"0": "Z"})
    with pytest.raises(ValueError):
        emulator.card_action("om_1", "stop")

    plain = FeishuEmulator(verification_token="vt", encrypt_key=None, deliver=deliver)
    plain.send_user_message("x")
    _, headers, body = sent[-1]
    assert "X-Lark-Signature" not in headers and json.loads(body)["header"]["token"] == "vt"


def test_encryption_matches_the_documented_algorithm() -> None:
    from channelkit.platforms.feishu.crypto import decrypt_event
    from channelkit.playground import feishu_encrypt, feishu_signature

    sealed = feishu_encrypt("key", b'{"a": 1}', iv=bytes(range(16)))
    raw = __import__("base64").b64decode(sealed)
    assert raw[:16] == bytes(range(16)) and len(raw) == 32  # IV + one padded block
    assert decrypt_event("key", sealed) == {"a": 1}
    digest = __import__("hashlib").sha256(b"1n" + b"key" + b"body").hexdigest()
    assert feishu_signature("1", "n", "key", b"body") == digest


def test_emulator_enforces_the_api_rules() -> None:
    from channelkit.clients.feishu import FeishuClient
    from channelkit.playground import EmulatorServer

    with EmulatorServer(platform="feishu", app_id="cli_x", app_secret="s") as server:
        url = server.url
        assert requests.post(f"{url}{CARDS}", json={}, timeout=5).json()["code"] == 99991661
        bad = requests.post(
            f"{url}/open-apis/auth/v3/tenant_access_token/internal",
            json={"app_id": "cli_x", "app_secret": "wrong"},
            timeout=5,
        )
        assert bad.json()["code"] == 10014
        client = FeishuClient(app_id="cli_x", app_secret="s", base_url=url)
        card = {
            "schema": "2.0",
            "config": {"streaming_mode": True, "update_multi": True},
            "body": {"elements": [{"tag": "markdown", "element_id": "md", "content": ""}]},
        }
        created = client.create_card(body={"type": "card_json", "data": json.dumps(card)})
        card_id = created.data.card_id
        client.update_card_element_content(
            card_id=card_id, element_id="md", body={"content": "hi", "sequence": 1, "uuid": "u1"}
        )
        token = requests.post(
            f"{url}/open-apis/auth/v3/tenant_access_token/internal",
            json={"app_id": "cli_x", "app_secret": "s"},
            timeout=5,
        ).json()["tenant_access_token"]
        headers = {"Authorization": f"Bearer {token}"}

        def put(body: dict[str, Any], element: str = "md") -> dict[str, Any]:
            response = requests.put(
                f"{url}{CARDS}/{card_id}/elements/{element}/content",
                json=body,
                headers=headers,
                timeout=5,
            )
            return dict(response.json())

        assert put({"content": "hi", "sequence": 1, "uuid": "u1"})["code"] == 0  # replay
        assert put({"content": "x", "sequence": 1})["code"] == 300317
        assert put({"content": "x", "sequence": 2}, element="nope")["code"] == 300301
        settings = requests.patch(
            f"{url}{CARDS}/{card_id}/settings",
            json={"settings": json.dumps({"config": {"streaming_mode": False}}), "sequence": 3},
            headers=headers,
            timeout=5,
        )
        assert settings.json()["code"] == 0
        assert put({"content": "late", "sequence": 4})["code"] == 300309
        assert server.emulator.card(card_id)["json"]["body"]["elements"][0]["content"] == "hi"

        send = requests.post(
            f"{url}/open-apis/im/v1/messages?receive_id_type=chat_id",
            json={
                "receive_id": "oc_playground",
                "msg_type": "interactive",
                "content": json.dumps({"type": "card", "data": {"card_id": card_id}}),
            },
            headers=headers,
            timeout=5,
        )
        assert send.json()["code"] == 0 and send.json()["data"]["message_id"].startswith("om_")
        again = requests.post(
            f"{url}/open-apis/im/v1/messages?receive_id_type=chat_id",
            json={
                "receive_id": "oc_playground",
                "msg_type": "interactive",
                "content": json.dumps({"type": "card", "data": {"card_id": card_id}}),
            },
            headers=headers,
            timeout=5,
        )
        assert again.json()["code"] == 230099  # a card entity is sent once
        raw_card = {"schema": "2.0", "body": {"elements": [{"tag": "markdown", "content": "x"}]}}
        message_id = client.create_message(
            receive_id_type="chat_id",
            body={
                "receive_id": "oc_playground",
                "msg_type": "interactive",
                "content": json.dumps(raw_card),
            },
        ).data.message_id
        patch = requests.patch(
            f"{url}/open-apis/im/v1/messages/{message_id}",
            json={"content": json.dumps(raw_card)},
            headers=headers,
            timeout=5,
        )
        assert patch.json()["code"] == 230099  # no config.update_multi
        pin = requests.post(
            f"{url}/open-apis/im/v1/pins",
            json={"message_id": message_id},
            headers=headers,
            timeout=5,
        )
        assert pin.json()["data"]["pin"]["message_id"] == message_id
        assert server.emulator.view(message_id)["pinned"] is True
        assert (
            requests.delete(
                f"{url}/open-apis/im/v1/messages/{message_id}", headers=headers, timeout=5
            ).json()["code"]
            == 0
        )
        assert server.emulator.view(message_id)["state"] == "deleted"
        secrets_seen = json.dumps(server.emulator.calls())
        assert token not in secrets_seen and '"s"' not in secrets_seen

"""Verification: challenge, token, signature, encryption, freshness."""

from __future__ import annotations

import json

import pytest
from channelkit.platforms.feishu.crypto import encrypt_event
from channelkit.platforms.feishu.ingress import (
    FeishuIngressVerifier,
    IngressRejected,
    parse_card_action,
    parse_message_event,
)
from feishu_helpers import ENCRYPT_KEY, TOKEN, card_action, challenge, message_event, request

NOW = 1_700_000_000.0


def verifier(encrypt_key: str | None = None) -> FeishuIngressVerifier:
    return FeishuIngressVerifier(TOKEN, encrypt_key, time=lambda: NOW, max_clock_skew_s=300)


def test_plain_challenge() -> None:
    result = verifier().verify(request(challenge()))
    assert result.kind == "challenge" and result.challenge == "ch-1"


def test_encrypted_challenge_without_signature() -> None:
    # Feishu does not sign the URL-verification request
    result = verifier(ENCRYPT_KEY).verify(request(challenge(), encrypt_key=ENCRYPT_KEY))
    assert result.challenge == "ch-1"


def test_encrypted_signed_event() -> None:
    req = request(message_event(), encrypt_key=ENCRYPT_KEY, timestamp=str(int(NOW)))
    result = verifier(ENCRYPT_KEY).verify(req)
    assert result.kind == "event"
    assert result.event_type == "im.message.receive_v1"
    assert result.event_id == "ev-1"


@pytest.mark.parametrize(
    ("make", "status"),
    [
        # wrong verification token
        (lambda: (None, request(challenge(token="nope"))), 401),
        (lambda: (None, request(message_event(token="nope"))), 401),
        (lambda: (None, request({"schema": "2.0", "header": {}, "event": {}})), 401),
        # stale challenge / event (replayed outside the skew window)
        (lambda: (None, request(challenge(), timestamp=str(int(NOW) - 3600))), 401),
        (lambda: (None, request(challenge(), timestamp=str(int(NOW) + 3600))), 401),
        (
            lambda: (
                ENCRYPT_KEY,
                request(challenge(), encrypt_key=ENCRYPT_KEY, timestamp=str(int(NOW) - 301)),
            ),
            401,
        ),
        (lambda: (None, request(challenge(), timestamp="soon")), 401),
        # forged signature
        (
            lambda: (
                ENCRYPT_KEY,
                request(
                    message_event(),
                    encrypt_key=ENCRYPT_KEY,
                    timestamp=str(int(NOW)),
                    signature="0" * 64,
                ),
            ),
            401,
        ),
        # signature made with another key
        (
            lambda: (
                ENCRYPT_KEY,
                request(message_event(), encrypt_key="other-key", timestamp=str(int(NOW))),
            ),
            401,
        ),
        # unsigned event while an encrypt key is configured
        (lambda: (ENCRYPT_KEY, request(message_event(), encrypt_key=ENCRYPT_KEY, sign=False)), 401),
        # plaintext body while an encrypt key is configured
        (lambda: (ENCRYPT_KEY, request(message_event())), 400),
        # encrypted body but no key configured
        (
            lambda: (
                None,
                request(message_event(), encrypt_key=ENCRYPT_KEY, timestamp=str(int(NOW))),
            ),
            400,
        ),
        # bad ciphertext (correctly signed)
        (
            lambda: (
                ENCRYPT_KEY,
                request(
                    None,
                    raw=json.dumps({"encrypt": "AAAA" * 12}).encode(),
                    encrypt_key=ENCRYPT_KEY,
                    timestamp=str(int(NOW)),
                ),
            ),
            400,
        ),
        # ciphertext under another key (correct signature over the body)
        (
            lambda: (
                ENCRYPT_KEY,
                request(
                    None,
                    raw=json.dumps({"encrypt": encrypt_event("other", message_event())}).encode(),
                    encrypt_key=ENCRYPT_KEY,
                    timestamp=str(int(NOW)),
                ),
            ),
            400,
        ),
        # not JSON
        (lambda: (None, request(None, raw=b"<xml/>")), 400),
        (lambda: (None, request(None, raw=b"[1,2]")), 400),
        # challenge without a value
        (lambda: (None, request({"type": "url_verification", "token": TOKEN})), 400),
    ],
)
def test_rejections(make, status: int) -> None:  # type: ignore[no-untyped-def]
    key, req = make()
    with pytest.raises(IngressRejected) as info:
        verifier(key).verify(req)
    assert info.value.status == status
    assert info.value.response().status == status


def test_signature_headers_incomplete() -> None:
    req = request(message_event(), encrypt_key=ENCRYPT_KEY, timestamp=None, signature="ab" * 32)
    with pytest.raises(IngressRejected):
        verifier(ENCRYPT_KEY).verify(req)


def test_parse_message_event() -> None:
    payload = message_event("@_user_1 hi  there", chat_type="group")
    payload["event"]["message"]["mentions"] = [{"key": "@_user_1", "name": "Bot"}]
    msg = parse_message_event(payload)
    assert msg is not None
    assert msg.text == "hi there"
    assert msg.is_group and msg.sender_open_id == "ou_owner" and msg.message_id == "om_in1"


def test_parse_message_event_rejects_unknown_types() -> None:
    payload = message_event()
    payload["event"]["message"]["message_type"] = "image"
    assert parse_message_event(payload) is None
    assert parse_message_event({"event": {}}) is None


def test_parse_post_message() -> None:
    payload = message_event()
    payload["event"]["message"]["message_type"] = "post"
    payload["event"]["message"]["content"] = json.dumps(
        {
            "title": "",
            "content": [[{"tag": "text", "text": "line one"}], [{"tag": "text", "text": "two"}]],
        }
    )
    msg = parse_message_event(payload)
    assert msg is not None and msg.text == "line one\ntwo"


def test_parse_card_action_v2_and_legacy() -> None:
    action = parse_card_action(
        card_action({"action": "ck_stop", "segment": "s"}, form_value={"0": "1"})
    )
    assert action is not None
    assert action.operator_open_id == "ou_owner"
    assert action.open_message_id == "om_card" and action.open_chat_id == "oc_chat"
    assert action.action == "ck_stop" and action.form_value == {"0": "1"}
    legacy = parse_card_action(
        {
            "open_id": "ou_x",
            "open_message_id": "om_1",
            "token": TOKEN,
            "action": {"value": '{"action":"ck_stop"}'},
        }
    )
    assert legacy is not None and legacy.action == "ck_stop" and legacy.operator_open_id == "ou_x"
    assert parse_card_action({"schema": "2.0", "event": {"operator": {}}}) is None

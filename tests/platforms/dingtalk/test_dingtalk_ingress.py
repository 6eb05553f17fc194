from __future__ import annotations

import base64
import hashlib
import hmac
import json

from channelkit.platforms.dingtalk.ingress import (
    card_signature,
    check_card_signature,
    check_robot_signature,
    parse_card_actor_id,
    parse_card_callback,
    parse_robot_message,
    robot_signature,
)

NOW = 1_700_000_000.0


def test_robot_signature_algorithm():
    ts = str(int(NOW * 1000))
    expected = base64.b64encode(
        hmac.new(b"secret", f"{ts}\nsecret".encode(), hashlib.sha256).digest()
    ).decode()
    assert robot_signature(ts, "secret") == expected
    ok = {"timestamp": ts, "sign": expected}
    assert check_robot_signature(ok, "secret", now=NOW) is None
    assert check_robot_signature({"timestamp": ts, "sign": "bad"}, "secret", now=NOW) == 403
    assert check_robot_signature({"timestamp": ts}, "secret", now=NOW) == 401
    assert check_robot_signature(ok, "other", now=NOW) == 403


def test_robot_signature_skew_limit_one_hour():
    ts = str(int((NOW - 3601) * 1000))
    headers = {"timestamp": ts, "sign": robot_signature(ts, "secret")}
    assert check_robot_signature(headers, "secret", now=NOW) == 403
    ts = str(int((NOW - 3599) * 1000))
    headers = {"timestamp": ts, "sign": robot_signature(ts, "secret")}
    assert check_robot_signature(headers, "secret", now=NOW) is None
    headers = {"timestamp": "nope", "sign": "x"}
    assert check_robot_signature(headers, "secret", now=NOW) == 403


def test_card_signature_algorithm():
    ts = str(int(NOW * 1000))
    expected = base64.b64encode(hmac.new(b"api", ts.encode(), hashlib.sha256).digest()).decode()
    assert card_signature(ts, "api") == expected
    headers = {"x-ddpaas-signature-timestamp": ts, "x-ddpaas-signature": expected}
    assert check_card_signature(headers, "api", now=NOW) is None
    assert check_card_signature({**headers, "x-ddpaas-signature": "x"}, "api", now=NOW) == 403
    assert check_card_signature({}, "api", now=NOW) == 401


def test_parse_robot_message_prefers_staff_id():
    msg = parse_robot_message(
        {
            "msgId": "m1",
            "conversationId": "cid-1",
            "conversationType": "2",
            "senderId": "$:LWCP:x",
            "senderStaffId": "staff-1",
            "text": {"content": " hello "},
            "sessionWebhook": "https://oapi.dingtalk.com/robot/sendBySession?session=1",
        }
    )
    assert msg is not None
    assert msg.owner_key == "staff-1" and msg.is_group and msg.text == "hello"
    direct = parse_robot_message(
        {"msgId": "m2", "conversationId": "cid-2", "senderId": "u", "text": {"content": "x"}}
    )
    assert direct is not None and direct.owner_key == "u" and not direct.is_group
    assert parse_robot_message({"msgId": "m"}) is None
    assert parse_robot_message([1]) is None


def test_parse_embedded_payload():
    cb = parse_card_callback(
        {
            "userId": " owner-1 ",
            "value": json.dumps(
                {
                    "outTrackId": "question-1",
                    "cardPrivateData": {"actionIds": ["submit"]},
                    "formData": {"0": "Beijing"},
                }
            ),
        }
    )
    assert cb is not None
    assert (cb.out_track_id, cb.action_id, cb.actor_id) == ("question-1", "submit", "owner-1")
    assert dict(cb.form_data) == {"0": "Beijing"}
    assert cb.has_business_payload and not cb.is_cancel


def test_parse_builtin_template_shape_and_cancel():
    cb = parse_card_callback(
        {
            "userId": "owner-1",
            "outTrackId": "question-1",
            "content": json.dumps(
                {"cardPrivateData": {"actionIds": ["request-1"], "params": {"form": {"0": "B"}}}}
            ),
        }
    )
    assert cb is not None and cb.action_id == "request-1" and dict(cb.form_data) == {"0": "B"}
    cancel = parse_card_callback(
        {
            "userId": "owner-1",
            "outTrackId": "q",
            "content": json.dumps(
                {"cardPrivateData": {"actionIds": ["r"], "params": {"user_cancel": "true"}}}
            ),
        }
    )
    assert cancel is not None and cancel.is_cancel and cancel.has_business_payload
    other = parse_card_callback(
        {
            "userId": "owner-1",
            "outTrackId": "q",
            "content": json.dumps(
                {"cardPrivateData": {"actionIds": ["r"], "params": {"fromConfig": True}}}
            ),
        }
    )
    assert other is not None and not other.has_business_payload and not other.is_cancel


def test_stop_shape_and_failures():
    stop = parse_card_callback(
        {"userId": "o", "value": json.dumps({"outTrackId": "s-1", "actionValue": "btn_stop"})}
    )
    assert stop is not None and stop.action_id == "btn_stop" and stop.out_track_id == "s-1"
    assert parse_card_callback("{broken") is None
    assert parse_card_callback({"outTrackId": "x", "actionId": "submit"}) is None  # no actor


def test_identity_only_from_top_level():
    nested = {"value": json.dumps({"outTrackId": "q", "actionId": "submit", "userId": "evil"})}
    assert parse_card_actor_id(nested) is None
    assert parse_card_callback(nested) is None
    both = {"userId": "real", **nested}
    cb = parse_card_callback(both)
    assert cb is not None and cb.actor_id == "real"
    assert parse_card_actor_id({"userId": " actor-1 ", "value": "{}"}) == "actor-1"
    assert parse_card_actor_id({"senderStaffId": "s"}) == "s"

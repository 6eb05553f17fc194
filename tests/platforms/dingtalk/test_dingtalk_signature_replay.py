"""DingTalk signatures are one-use: a captured request cannot be used again."""

from __future__ import annotations

import json

from channelkit.ingress import Headers, IngressRequest
from channelkit.platforms.dingtalk import card_signature, robot_signature


def _robot(h, payload, ts):  # type: ignore[no-untyped-def]
    headers = Headers({"timestamp": ts, "sign": robot_signature(ts, "app-secret")})
    return h.channel.handle_robot_request(
        IngressRequest("POST", "/dingtalk/robot", headers, json.dumps(payload).encode())
    )


def test_a_reused_robot_signature_with_a_forged_body_is_refused(adapter) -> None:  # type: ignore[no-untyped-def]
    h = adapter(None)
    ts = str(int(h.clock.time() * 1000))
    first = _robot(h, h.robot_payload("mine", sender="alice"), ts)
    assert first.status == 200 and first.after
    forged = h.robot_payload("forged", sender="victim", chat="cid-victim")
    h.clock.advance(60)
    replay = _robot(h, forged, ts)
    assert replay.status == 403 and not replay.after
    assert "cid-victim" not in h.channel._chats  # nothing recorded for the forged body
    first.run_after()
    h.idle()
    assert not any("forged" in text for text in h.api.texts())


def test_a_card_signature_reused_50_minutes_later_is_refused(adapter) -> None:  # type: ignore[no-untyped-def]
    h = adapter(None, secret="card-secret")
    ts = str(int(h.clock.time() * 1000))
    headers = {
        "x-ddpaas-signature-timestamp": ts,
        "x-ddpaas-signature": card_signature(ts, "card-secret"),
    }
    body = {"userId": "u1", "outTrackId": "t-unknown", "content": "{}"}
    assert h.card_request(body, headers=headers, after=False).status == 200
    h.clock.advance(50 * 60)
    assert h.card_request(body, headers=headers, after=False).status == 403


def test_a_robot_request_replayed_after_1000_other_messages_is_refused(adapter) -> None:  # type: ignore[no-untyped-def]
    h = adapter(None)
    ts0 = str(int(h.clock.time() * 1000))
    original = h.robot_payload("original", msg_id="m-original")
    assert _robot(h, original, ts0).status == 200
    for n in range(1_000):
        assert _robot(h, h.robot_payload(f"other {n}"), str(int(ts0) + 1 + n)).status == 200
    replay = _robot(h, original, ts0)
    assert replay.status == 403 and not replay.after

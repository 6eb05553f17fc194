"""A ``sessionWebhook`` serves only the (conversation, sender) pair it arrived with.

A robot body is not signed (only its timestamp is), so a body with a never-used
signature can name any URL on DingTalk's host: another conversation's session webhook.
That URL is never used for the forged body's conversation, never replaces the webhook
the other conversation is bound to, and an in-flight reply keeps the webhook of the
run's own conversation and owner.
"""

from __future__ import annotations

import threading

CARDS_OFF = {"statusCard": {"enabled": False}}
WEBHOOK_A = "https://oapi.dingtalk.com/robot/sendBySession?session=aaa"
WEBHOOK_B = "https://oapi.dingtalk.com/robot/sendBySession?session=bbb"


def _with_webhook(payload, url, h):  # type: ignore[no-untyped-def]
    payload["sessionWebhook"] = url
    payload["sessionWebhookExpiredTime"] = int(h.clock.time() * 1000) + 3_600_000
    return payload


def _webhook_sends(h) -> list[tuple[str, str]]:  # type: ignore[no-untyped-def]
    return [(kw["url"], kw["text"]) for _, kw in h.api.ops("webhook")]


def test_a_body_for_conversation_a_carrying_b_webhook_never_reaches_b(adapter) -> None:  # type: ignore[no-untyped-def]
    h = adapter(None, cards=CARDS_OFF)
    genuine_b = _with_webhook(h.robot_payload("from b", chat="cid-b", sender="bob"), WEBHOOK_B, h)
    assert h.robot_request(genuine_b).status == 200
    h.idle()
    assert _webhook_sends(h) == [(WEBHOOK_B, "echo from b")]
    # A signed body (its signature never used) for conversation A names B's webhook.
    forged = _with_webhook(h.robot_payload("from a", chat="cid-a", sender="mallory"), WEBHOOK_B, h)
    assert h.robot_request(forged).status == 200
    h.idle()
    # A's reply went through the robot API, not to B's session.
    assert _webhook_sends(h) == [(WEBHOOK_B, "echo from b")]
    assert [(kw["chat_id"], kw["text"]) for _, kw in h.api.ops("group")] == [
        ("cid-a", "echo from a")
    ]
    # B is still bound to its own webhook: B's next reply uses it.
    again_b = h.robot_payload("b again", chat="cid-b", sender="bob")
    assert h.robot_request(again_b).status == 200
    h.idle()
    assert _webhook_sends(h) == [(WEBHOOK_B, "echo from b"), (WEBHOOK_B, "echo b again")]


def test_an_in_flight_reply_keeps_its_own_webhook_when_a_forged_body_arrives(adapter) -> None:  # type: ignore[no-untyped-def]
    release = threading.Event()
    started = threading.Event()

    def script(bridge, session_id, text, sink):  # type: ignore[no-untyped-def]
        if text == "slow":
            started.set()
            assert release.wait(10)
        return f"echo {text}"

    h = adapter(script, cards=CARDS_OFF)
    genuine_b = _with_webhook(h.robot_payload("from b", chat="cid-b", sender="bob"), WEBHOOK_B, h)
    assert h.robot_request(genuine_b).status == 200
    h.idle()
    # Alice's run in conversation A is in flight, bound to A's own webhook.
    slow = _with_webhook(h.robot_payload("slow", chat="cid-a", sender="alice"), WEBHOOK_A, h)
    assert h.robot_request(slow).status == 200
    assert started.wait(10)
    # A forged body in A (as Alice, and as someone else) points at B's webhook.
    for sender in ("alice", "mallory"):
        forged = _with_webhook(h.robot_payload("hijack", chat="cid-a", sender=sender), WEBHOOK_B, h)
        assert h.robot_request(forged, after=False).status == 200
    release.set()
    h.idle()
    slow_replies = [url for url, text in _webhook_sends(h) if text == "echo slow"]
    assert slow_replies == [WEBHOOK_A]
    assert all(url != WEBHOOK_B for url, text in _webhook_sends(h) if text != "echo from b")

"""Nothing in a DingTalk robot body is trusted: reply URLs and command bookkeeping."""

from __future__ import annotations

import pytest
from channelkit.platforms.dingtalk.ingress import parse_robot_message, trusted_session_webhook

GOOD = "https://oapi.dingtalk.com/robot/sendBySession?session=abc"


@pytest.mark.parametrize(
    "url",
    [
        "http://oapi.dingtalk.com/robot/sendBySession?session=abc",
        "https://attacker.example/robot/sendBySession?session=abc",
        "https://oapi.dingtalk.com.attacker.example/robot",
        "https://oapi.dingtalk.com@attacker.example/robot",
        "https://user:pw@oapi.dingtalk.com/robot",
        "https://oapi.dingtalk.com:8443/robot",
        "https://oapi.dingtalk.com\\@attacker.example/",
        "javascript:alert(1)",
        "https://oapi.dingtalk.com:99999999/",
        "",
        42,
        None,
    ],
)
def test_a_session_webhook_off_dingtalk_is_dropped(url: object) -> None:
    assert trusted_session_webhook(url) is None


def test_a_documented_session_webhook_is_kept() -> None:
    assert trusted_session_webhook(GOOD) == GOOD
    assert trusted_session_webhook("https://OAPI.dingtalk.com/robot/x") is not None


def test_a_forged_session_webhook_is_never_called(adapter) -> None:  # type: ignore[no-untyped-def]
    h = adapter(None)
    payload = h.robot_payload("hello", chat="cid-group-1")
    payload["sessionWebhook"] = "https://attacker.example/steal?session=x"
    assert parse_robot_message(payload).session_webhook is None  # type: ignore[union-attr]
    assert h.robot_request(payload).status == 200
    h.idle()
    calls = [op for op in h.api.ops() if op[0] == "webhook"]
    assert calls == []


def test_command_messages_are_not_recorded_as_run_owners(adapter) -> None:  # type: ignore[no-untyped-def]
    h = adapter(None)
    for n, text in enumerate(["/cancel", "/deny req-1", "/approve", "/approve-always x"]):
        assert h.robot_request(h.robot_payload(text, msg_id=f"cmd-{n}")).status == 200
    h.idle()
    assert h.channel.map_sizes()["owners"] == 0


# -- status cards off: replies go through send_message, where a sessionWebhook is used --

CARDS_OFF = {"statusCard": {"enabled": False}}


@pytest.mark.parametrize(
    "forged",
    [
        "https://attacker.example/robot/sendBySession?session=x",
        "http://oapi.dingtalk.com/robot/sendBySession?session=x",
        "https://oapi.dingtalk.com.attacker.example/robot/sendBySession?session=x",
        "https://oapi.dingtalk.com@attacker.example/robot/sendBySession?session=x",
        "https://oapi.dingtalk.com:8443/robot/sendBySession?session=x",
    ],
)
def test_with_status_cards_off_a_forged_session_webhook_is_never_called(
    adapter,  # type: ignore[no-untyped-def]
    forged: str,
) -> None:
    h = adapter(None, cards=CARDS_OFF)
    assert not h.config.status_cards_enabled
    payload = h.robot_payload("hello", chat="cid-group-1")
    payload["sessionWebhook"] = forged
    payload["sessionWebhookExpiredTime"] = int(h.clock.time() * 1000) + 3_600_000
    assert h.robot_request(payload).status == 200
    h.idle()
    assert [op for op in h.api.ops() if op[0] == "webhook"] == []
    replies = [kw for op, kw in h.api.ops() if op == "group"]
    assert [kw["chat_id"] for kw in replies] == ["cid-group-1"]
    assert replies[0]["text"] == "echo hello"  # the reply went through the robot API


def test_with_status_cards_off_a_session_webhook_serves_only_its_own_conversation(
    adapter,  # type: ignore[no-untyped-def]
) -> None:
    h = adapter(None, cards=CARDS_OFF)
    expires = int(h.clock.time() * 1000) + 3_600_000
    genuine = {**h.robot_payload("from b", chat="cid-group-b")}
    genuine["sessionWebhook"] = GOOD
    genuine["sessionWebhookExpiredTime"] = expires
    assert h.robot_request(genuine).status == 200
    h.idle()
    # the documented webhook is used for the conversation it came with ...
    assert [(op, kw["url"], kw["text"]) for op, kw in h.api.ops() if op == "webhook"] == [
        ("webhook", GOOD, "echo from b")
    ]
    # ... and never for another one, even one whose body names no webhook at all
    other = h.robot_payload("from a", chat="cid-group-a")
    assert h.robot_request(other).status == 200
    h.idle()
    assert len(h.api.ops("webhook")) == 1
    assert [(kw["chat_id"], kw["text"]) for _, kw in h.api.ops("group")] == [
        ("cid-group-a", "echo from a")
    ]


def test_with_status_cards_off_a_forged_body_cannot_redirect_a_known_conversation(
    adapter,  # type: ignore[no-untyped-def]
) -> None:
    h = adapter(None, cards=CARDS_OFF)
    expires = int(h.clock.time() * 1000) + 3_600_000
    genuine = h.robot_payload("first", chat="cid-group-1")
    genuine["sessionWebhook"] = GOOD
    genuine["sessionWebhookExpiredTime"] = expires
    assert h.robot_request(genuine).status == 200
    h.idle()
    forged = h.robot_payload("second", chat="cid-group-1")
    forged["sessionWebhook"] = "https://attacker.example/steal?session=x"
    forged["sessionWebhookExpiredTime"] = expires
    assert h.robot_request(forged).status == 200
    h.idle()
    urls = [kw["url"] for _, kw in h.api.ops("webhook")]
    assert set(urls) == {GOOD}  # the attacker's URL was never called
    # the second reply went out once: on the webhook bound to this chat and sender
    sent = [kw["text"] for _, kw in h.api.ops("webhook") + h.api.ops("group")]
    assert sent.count("echo second") == 1

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

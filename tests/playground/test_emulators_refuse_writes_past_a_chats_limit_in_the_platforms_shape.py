"""The Slack, Discord, Feishu, DingTalk and Weixin emulators' per-chat write limits
(`channelkit.playground.rate_limits`, issue 28): off until ``POST /_emulator/limits``;
then each chat (message, card) gets its burst and past it the platform's own refusal;
bad settings are refused naming the field; a reset turns them off."""

from __future__ import annotations

import json
from typing import Any

import pytest
from channelkit.playground.rate_limits import WriteLimits, write_key

JSON = {"content-type": "application/json"}

#: platform -> (method, path, body of a write into chat "c1")
WRITES: dict[str, tuple[str, str, dict[str, Any]]] = {
    "slack": ("POST", "/api/chat.postMessage", {"channel": "c1", "text": "hi"}),
    "discord": ("POST", "/api/v10/channels/101/messages", {"content": "hi"}),
    "feishu": ("POST", "/open-apis/im/v1/messages", {"receive_id": "c1", "content": "{}"}),
    "dingtalk": ("POST", "/v1.0/robot/groupMessages/send", {"openConversationId": "c1"}),
    "weixin": ("POST", "/ilink/bot/sendmessage", {"msg": {"to_user_id": "c1"}}),
}


def _check(limits: WriteLimits, platform: str) -> Any:
    method, path, body = WRITES[platform]
    return limits.check(method, path, JSON, json.dumps(body).encode())


@pytest.mark.parametrize("platform", sorted(WRITES))
def test_a_chat_gets_its_burst_then_the_platforms_refusal(platform: str) -> None:
    now = [100.0]
    limits = WriteLimits(clock=lambda: now[0])
    assert _check(limits, platform) is None  # off by default
    status, view, _ = limits.control("POST", "/_emulator/limits", {"per_second": 1, "burst": 2})
    assert status == 200 and view["enabled"] is True
    assert _check(limits, platform) is None and _check(limits, platform) is None
    refused = _check(limits, platform)
    assert refused is not None
    status, payload, headers = refused
    shape = {
        "slack": lambda: status == 429 and payload["error"] == "ratelimited",
        "discord": lambda: status == 429 and payload["retry_after"] > 0,
        "feishu": lambda: status == 429 and payload["code"] == 99991400,
        "dingtalk": lambda: status == 403 and "QpsLimit" in payload["code"],
        "weixin": lambda: payload["ret"] == -1 and payload["errcode"] == 45011,
    }[platform]
    assert shape(), refused
    if platform in ("slack", "discord"):
        assert dict(headers)["Retry-After"] == "1"
    assert limits.view()["rejected_429"] == 1
    now[0] += 1.0  # a token a second
    assert _check(limits, platform) is None
    limits.reset()
    assert limits.view()["enabled"] is False and limits.view()["rejected_429"] == 0


def test_other_chats_and_calls_that_write_nothing_are_not_limited() -> None:
    assert write_key("POST", "/api/chat.update", JSON, b'{"channel": "c1"}') is None
    assert write_key("GET", "/api/v10/channels/101/messages", JSON, b"") is None
    assert write_key("PATCH", "/open-apis/im/v1/messages/om_1", JSON, b"{}") == (
        "feishu",
        "patch:om_1",
    )
    assert write_key("PUT", "/open-apis/cardkit/v1/cards/card_1/elements/md/content", JSON, b"")
    space = b'{"openSpaceId": "dtv1.card//IM_GROUP.cid9"}'
    assert write_key("POST", "/v1.0/card/instances/createAndDeliver", JSON, space) == (
        "dingtalk",
        "message:cid9",
    )
    limits = WriteLimits(clock=lambda: 0.0)
    limits.control("POST", "/_emulator/limits", {"per_second": 1, "burst": 1})
    assert limits.check("POST", "/api/chat.postMessage", JSON, b'{"channel": "a"}') is None
    assert limits.check("POST", "/api/chat.postMessage", JSON, b'{"channel": "b"}') is None


@pytest.mark.parametrize(
    ("body", "field"),
    [({"enabled": "yes"}, "enabled"), ({"per_second": 0}, "per_second"), ({"burst": 0.5}, "burst")],
)
def test_bad_settings_are_refused_naming_the_field(body: dict[str, Any], field: str) -> None:
    limits = WriteLimits()
    status, payload, _ = limits.control("POST", "/_emulator/limits", body)
    assert status == 400 and field in payload["error"]
    assert limits.view()["enabled"] is False

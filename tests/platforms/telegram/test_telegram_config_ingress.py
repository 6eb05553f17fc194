from __future__ import annotations

import json

import pytest
from channelkit.errors import ConfigurationError
from channelkit.ingress import Headers, IngressRequest
from channelkit.platforms.telegram.config import TelegramConfig
from channelkit.platforms.telegram.ingress import (
    SECRET_HEADER,
    TelegramWebhook,
    UpdateParseError,
    parse_update,
    verify_secret_token,
)

TOKEN = "123456:ABC-def_ghi"


def test_config_validates_and_names_fields() -> None:
    cfg = TelegramConfig(bot_token=TOKEN, webhook_secret="s3cret_-X")
    assert cfg.typing_interval_s == 4.0
    assert TOKEN not in repr(cfg) and "s3cret" not in repr(cfg)
    with pytest.raises(ConfigurationError, match=r"telegram\.bot_token"):
        TelegramConfig(bot_token="nope")
    with pytest.raises(ConfigurationError, match=r"telegram\.webhook_secret"):
        TelegramConfig(bot_token=TOKEN, webhook_secret="has space")
    with pytest.raises(ConfigurationError, match=r"telegram\.webhook_secret"):
        TelegramConfig(bot_token=TOKEN, webhook_secret="x" * 257)
    with pytest.raises(ConfigurationError, match=r"telegram\.typing_interval_s"):
        TelegramConfig(bot_token=TOKEN, typing_interval_s=6)
    with pytest.raises(ConfigurationError, match=r"telegram\.question_timeout_s"):
        TelegramConfig(bot_token=TOKEN, question_timeout_s=0)
    with pytest.raises(ConfigurationError, match=r"telegram\.api_base_url"):
        TelegramConfig(bot_token=TOKEN, api_base_url="ftp://x")


def test_config_from_dict() -> None:
    cfg = TelegramConfig.from_dict({"botToken": TOKEN, "webhookSecret": "abc"})
    assert cfg.webhook_secret == "abc"
    with pytest.raises(ConfigurationError, match=r"telegram\.bogus"):
        TelegramConfig.from_dict({"botToken": TOKEN, "bogus": 1})
    with pytest.raises(ConfigurationError, match=r"telegram\.bot_token"):
        TelegramConfig.from_dict({})


def test_secret_token_comparison() -> None:
    assert verify_secret_token(Headers({SECRET_HEADER: "abc"}), "abc")
    assert verify_secret_token(Headers({SECRET_HEADER.lower(): "abc"}), "abc")
    assert not verify_secret_token(Headers({SECRET_HEADER: "abd"}), "abc")
    assert not verify_secret_token(Headers({SECRET_HEADER: "ab"}), "abc")
    assert not verify_secret_token(Headers({}), "abc")
    assert verify_secret_token(Headers({}), None)


UPDATE = {
    "update_id": 10,
    "message": {
        "message_id": 5,
        "date": 1,
        "chat": {"id": -1001234567890123, "type": "supergroup", "is_forum": True},
        "from": {"id": 42, "is_bot": False, "first_name": "Ann"},
        "text": "hello",
        "message_thread_id": 7,
        "is_topic_message": True,
    },
}


def test_parse_update_message_and_callback() -> None:
    update = parse_update(UPDATE)
    assert update.message is not None
    assert update.message.chat.id == -1001234567890123
    assert update.message.from_user is not None and update.message.from_user.id == 42
    assert update.message.message_thread_id == 7
    cq = parse_update(
        {
            "update_id": 11,
            "callback_query": {
                "id": "cb1",
                "from": {"id": 42, "is_bot": False, "first_name": "Ann"},
                "chat_instance": "x",
                "data": "ck:abc",
                "message": {"message_id": 9, "date": 0, "chat": {"id": 1, "type": "private"}},
            },
        }
    ).callback_query
    assert cq is not None and cq.data == "ck:abc" and cq.message is not None
    other = parse_update({"update_id": 12, "my_chat_member": {}})
    assert other.message is None and other.callback_query is None


@pytest.mark.parametrize(
    ("payload", "path"),
    [
        ([], "update"),
        ({}, "update.update_id"),
        ({"update_id": "1"}, "update.update_id"),
        (
            {"update_id": 1, "message": {"message_id": 1, "chat": {"id": "x"}}},
            "update.message.chat.id",
        ),
        (
            {"update_id": 1, "callback_query": {"id": "c", "from": {}}},
            "update.callback_query.from.id",
        ),
        (
            {"update_id": 1, "callback_query": {"id": 5, "from": {"id": 1}}},
            "update.callback_query.id",
        ),
    ],
)
def test_parse_update_names_bad_field(payload: object, path: str) -> None:
    with pytest.raises(UpdateParseError) as info:
        parse_update(payload)
    assert info.value.path == path


def _request(body: bytes, headers: dict[str, str]) -> IngressRequest:
    return IngressRequest(
        method="POST", path="/telegram/webhook", headers=Headers(headers), body=body
    )


def test_webhook_verifies_secret_and_dispatches() -> None:
    seen: list[int] = []
    hook = TelegramWebhook("right", lambda u: seen.append(u.update_id))
    body = json.dumps(UPDATE).encode()
    assert hook(_request(body, {})).status == 401
    assert hook(_request(body, {SECRET_HEADER: "wrong"})).status == 401
    assert seen == []
    assert hook(_request(b"{not json", {SECRET_HEADER: "right"})).status == 400
    assert hook(_request(b'{"update_id": "x"}', {SECRET_HEADER: "right"})).status == 400
    assert seen == []
    assert hook(_request(body, {SECRET_HEADER: "right"})).status == 200
    assert seen == [10]


def test_webhook_dispatch_errors_never_raise() -> None:
    def boom(_u: object) -> None:
        raise RuntimeError("boom")

    hook = TelegramWebhook(None, boom)
    assert hook(_request(json.dumps(UPDATE).encode(), {})).status == 200


@pytest.mark.parametrize(("secret", "warned"), [(None, True), ("s3cret_-X", False)])
def test_mounting_an_unauthenticated_webhook_warns(secret, warned, caplog) -> None:  # type: ignore[no-untyped-def]
    from channelkit.platforms.telegram import TelegramChannel
    from channelkit.testing import ScriptedBridge

    channel = TelegramChannel(
        TelegramConfig(bot_token=TOKEN, webhook_secret=secret, ingress="webhook"), ScriptedBridge()
    )
    try:
        with caplog.at_level("WARNING", logger="channelkit.platforms.telegram.adapter"):
            channel.ingress_routes()
        assert any("not authenticated" in r.getMessage() for r in caplog.records) is warned
    finally:
        channel.close()

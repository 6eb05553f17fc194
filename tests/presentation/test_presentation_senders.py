"""The real senders (``channelkit.platforms.<name>.sender``) on the generated clients,
against requests-mock."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
import requests_mock
from channelkit.clients.discord import DiscordClient
from channelkit.clients.feishu import FeishuClient
from channelkit.clients.line import LineClient
from channelkit.clients.mattermost import MattermostClient
from channelkit.clients.msteams import MsteamsClient
from channelkit.clients.slack import SlackClient
from channelkit.clients.telegram import TelegramClient
from channelkit.errors import ApiError
from channelkit.platforms.discord.sender import DiscordSender
from channelkit.platforms.feishu.sender import FeishuSender
from channelkit.platforms.line.sender import LineSender
from channelkit.platforms.mattermost.sender import MattermostSender
from channelkit.platforms.msteams.sender import MsteamsSender
from channelkit.platforms.slack.sender import SlackSender
from channelkit.platforms.telegram.sender import TelegramSender
from channelkit.presentation import (
    Delivery,
    DeliveryPinError,
    MessagePresentation,
    PinRequest,
    PresentationSender,
    ReplyPayload,
)
from channelkit.presentation.outbound import PIN_UNSUPPORTED, SenderRegistry, deliver

from .golden_cases import REPRESENTATIVE

BASE = "https://api.test"
PAYLOAD = ReplyPayload(
    presentation=MessagePresentation.from_dict(REPRESENTATIVE),
    delivery=Delivery(pin=PinRequest(notify=True)),
)


def run(sender: Any, target: str, payload: ReplyPayload = PAYLOAD) -> Any:
    assert isinstance(sender, PresentationSender)
    registry = SenderRegistry()
    registry.register(sender)
    return deliver(sender.platform, target, payload, registry=registry)


def test_slack_posts_blocks_and_pins() -> None:
    with requests_mock.Mocker() as m:
        post = m.post(
            f"{BASE}/chat.postMessage", json={"ok": True, "channel": "C1", "ts": "1700.01"}
        )
        pin = m.post(f"{BASE}/pins.add", json={"ok": True})
        result = run(SlackSender(SlackClient(token="xoxb-t", base_url=BASE)), "C1")
    assert result.pinned and result.message_ids == ("1700.01",)
    body = post.last_request.json()
    assert body["channel"] == "C1" and body["blocks"][0]["type"] == "header"
    assert pin.last_request.json() == {"channel": "C1", "timestamp": "1700.01"}
    assert post.last_request.headers["Authorization"] == "Bearer xoxb-t"


def test_slack_pin_failure_not_required_still_delivers() -> None:
    with requests_mock.Mocker() as m:
        m.post(f"{BASE}/chat.postMessage", json={"ok": True, "ts": "1.2"})
        m.post(f"{BASE}/pins.add", json={"ok": False, "error": "not_pinnable"})
        result = run(SlackSender(SlackClient(token="t", base_url=BASE, retry=None)), "C1")
    assert result.message_ids == ("1.2",) and not result.pinned
    assert result.pin_warning and "not_pinnable" in result.pin_warning


def test_slack_required_pin_failure_raises_after_send() -> None:
    payload = ReplyPayload(text="hi", delivery=Delivery(pin=PinRequest(required=True)))
    with requests_mock.Mocker() as m:
        post = m.post(f"{BASE}/chat.postMessage", json={"ok": True, "ts": "9.9"})
        m.post(f"{BASE}/pins.add", json={"ok": False, "error": "no_permission"})
        with pytest.raises(DeliveryPinError) as info:
            run(SlackSender(SlackClient(token="t", base_url=BASE)), "C1", payload)
    assert post.call_count == 1
    assert info.value.message_id == "9.9"
    assert isinstance(info.value.__cause__, ApiError)


def test_discord_creates_message_and_pins() -> None:
    with requests_mock.Mocker() as m:
        post = m.post(f"{BASE}/channels/42/messages", json={"id": "777", "channel_id": "42"})
        pin = m.put(f"{BASE}/channels/42/messages/pins/777", status_code=204)
        result = run(DiscordSender(DiscordClient(token="Bot t", base_url=BASE)), "42")
    assert result.pinned and result.message_id == "777"
    assert post.last_request.json()["flags"] == 32768
    assert pin.call_count == 1


def test_mattermost_creates_post_and_pins() -> None:
    with requests_mock.Mocker() as m:
        post = m.post(
            f"{BASE}/api/v4/posts", status_code=201, json={"id": "p1", "channel_id": "ch"}
        )
        pin = m.post(f"{BASE}/api/v4/posts/p1/pin", json={"status": "OK"})
        sender = MattermostSender(
            MattermostClient(token="t", base_url=BASE), callback_url="https://cb.test/mm"
        )
        result = run(sender, "ch")
    assert result.pinned
    body = post.last_request.json()
    assert body["channel_id"] == "ch"
    assert (
        body["props"]["attachments"][0]["actions"][0]["integration"]["url"] == "https://cb.test/mm"
    )
    assert pin.call_count == 1


def test_line_pushes_flex_with_retry_key_and_pin_unsupported() -> None:
    with requests_mock.Mocker() as m:
        push = m.post(f"{BASE}/v2/bot/message/push", json={"sentMessages": [{"id": "L1"}]})
        result = run(LineSender(LineClient(token="t", base_url=BASE)), "U123")
    assert result.message_ids == ("L1",)
    assert result.pin_warning == PIN_UNSUPPORTED
    body = push.last_request.json()
    assert body["to"] == "U123" and body["messages"][0]["type"] == "flex"
    assert push.last_request.headers["X-Line-Retry-Key"]


def test_msteams_sends_adaptive_card() -> None:
    with requests_mock.Mocker() as m:
        send = m.post(requests_mock.ANY, json={"id": "act-1"})
        result = run(MsteamsSender(MsteamsClient(token="t", base_url=BASE)), "19:abc@thread.v2")
    assert result.message_ids == ("act-1",)
    assert "/v3/conversations/" in send.last_request.url
    attachment = send.last_request.json()["attachments"][0]
    assert attachment["contentType"] == "application/vnd.microsoft.card.adaptive"


def test_telegram_sends_keyboard_and_pins_with_notify() -> None:
    message = {"message_id": 55, "date": 1, "chat": {"id": -100, "type": "supergroup"}}
    with requests_mock.Mocker() as m:
        send = m.post(f"{BASE}/botTOKEN/sendMessage", json={"ok": True, "result": message})
        pin = m.post(f"{BASE}/botTOKEN/pinChatMessage", json={"ok": True, "result": True})
        result = run(TelegramSender(TelegramClient(token="TOKEN", base_url=BASE)), "-100")
    assert result.pinned and result.message_id == "55"
    body = send.last_request.json()
    assert body["chat_id"] == -100 and "inline_keyboard" in body["reply_markup"]
    assert pin.last_request.json() == {
        "chat_id": -100,
        "message_id": 55,
        "disable_notification": False,
    }


def test_telegram_inline_buttons_off_sends_text_only() -> None:
    message = {"message_id": 1, "date": 1, "chat": {"id": 5, "type": "private"}}
    with requests_mock.Mocker() as m:
        send = m.post(f"{BASE}/botT/sendMessage", json={"ok": True, "result": message})
        m.post(f"{BASE}/botT/pinChatMessage", json={"ok": True, "result": True})
        run(TelegramSender(TelegramClient(token="T", base_url=BASE), inline_buttons=False), "5")
    body = send.last_request.json()
    assert "reply_markup" not in body
    assert "Actions:\n- Approve" in body["text"]


def test_feishu_sends_card_and_pins() -> None:
    with requests_mock.Mocker() as m:
        send = m.post(
            f"{BASE}/open-apis/im/v1/messages?receive_id_type=chat_id",
            json={"code": 0, "msg": "ok", "data": {"message_id": "om_1"}},
        )
        pin = m.post(f"{BASE}/open-apis/im/v1/pins", json={"code": 0, "msg": "ok", "data": {}})
        result = run(FeishuSender(FeishuClient(token="t-abc", base_url=BASE)), "oc_1")
    assert result.pinned and result.message_id == "om_1"
    body = send.last_request.json()
    assert body["receive_id"] == "oc_1" and body["msg_type"] == "interactive"
    assert json.loads(body["content"])["header"]["template"] == "orange"
    assert pin.last_request.json() == {"message_id": "om_1"}


def test_presentation_imports_no_platform_package() -> None:
    code = (
        "import sys, channelkit.presentation, channelkit.presentation.outbound, "
        "channelkit.presentation.rendering, channelkit.presentation.schema\n"
        "print(sorted(m for m in sys.modules if m.startswith('channelkit.platforms')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"

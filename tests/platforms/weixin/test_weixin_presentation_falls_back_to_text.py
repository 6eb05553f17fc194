"""Weixin has no renderer: ``send_presentation`` and ``turn.present`` deliver the
plain-text fallback through ``sendmessage`` (no message id, so a required pin fails
after the text was sent)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import requests_mock as rm
from channelkit.agents import FunctionAgent, Turn
from channelkit.core import ChannelConfig
from channelkit.errors import DeliveryPinError
from channelkit.http import RetryPolicy
from channelkit.platforms.weixin import WeixinChannel, WeixinConfig
from channelkit.platforms.weixin.api import WeixinApi

BASE = "http://ilink.test"
USER = "wxid_user@im.wechat"
CARD = {
    "title": "Deploy finished",
    "blocks": [
        {"type": "text", "text": "All **3** services are up."},
        {"type": "buttons", "buttons": [{"label": "Dashboard", "url": "https://ex.test/d"}]},
    ],
}


@pytest.fixture
def mock() -> Iterator[rm.Mocker]:
    with rm.Mocker() as m:
        m.post(f"{BASE}/ilink/bot/getconfig", json={"ret": 0, "typing_ticket": "ticket-1"})
        m.post(f"{BASE}/ilink/bot/sendtyping", json={"ret": 0})
        m.post(f"{BASE}/ilink/bot/sendmessage", json={"ret": 0})
        yield m


def _channel(rt: Any, agent: Any) -> WeixinChannel:
    return WeixinChannel(
        WeixinConfig(bot_token="tok", base_url=BASE, typing=False),
        FunctionAgent(agent),
        channel_config=ChannelConfig(name="weixin", max_workers=8),
        api=WeixinApi("tok", base_url=BASE, retry=RetryPolicy.never()),
        executor=rt.pool,
        run_executor=rt.run_pool,
        scheduler=rt.scheduler,
    )


def _texts(mock: rm.Mocker) -> list[str]:
    return [
        r.json()["msg"]["item_list"][0]["text_item"]["text"]
        for r in mock.request_history
        if r.path.endswith("/sendmessage")
    ]


def test_send_presentation_sends_the_text_fallback(rt, mock) -> None:  # type: ignore[no-untyped-def]
    channel = _channel(rt, lambda turn: "")
    try:
        assert channel.send_presentation(USER, CARD) is None
        assert _texts(mock) == [
            "Deploy finished\n\nAll 3 services are up.\n\n• Dashboard: https://ex.test/d"
        ]
        with pytest.raises(DeliveryPinError):
            channel.send_presentation(
                USER, {"text": "pinned?", "delivery": {"pin": {"enabled": True, "required": True}}}
            )
        assert _texts(mock)[-1] == "pinned?"  # sent before the pin failed
    finally:
        channel.close()


def test_turn_present_reaches_weixin_as_text(rt, mock) -> None:  # type: ignore[no-untyped-def]
    def agent(turn: Turn) -> str:
        turn.present(CARD)
        return "Anything else?"

    channel = _channel(rt, agent)
    try:
        channel.handle_weixin_message(
            {
                "seq": 1,
                "message_id": 1,
                "from_user_id": USER,
                "to_user_id": "bot",
                "message_type": 1,
                "message_state": 2,
                "context_token": "ctx-1",
                "item_list": [{"type": 1, "text_item": {"text": "deploy"}}],
            }
        )
        rt.settle()
        texts = _texts(mock)
        assert texts[0].startswith("Deploy finished") and texts[-1] == "Anything else?"
    finally:
        channel.close()

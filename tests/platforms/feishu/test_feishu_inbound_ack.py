"""Feishu message events follow the shared ACK policy: busy -> 200, closed -> 503."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from channelkit.core import ChannelBusy
from channelkit.platforms.feishu import FeishuChannel
from channelkit.platforms.feishu.api import FeishuApi
from channelkit.testing import ScriptedBridge
from feishu_helpers import channel_on, message_event, request


@pytest.fixture
def channel(rt: Any, api: FeishuApi) -> Iterator[FeishuChannel]:
    ch = channel_on(rt, api, ScriptedBridge([]))
    yield ch
    ch.close(timeout=2.0)


def test_busy_channel_is_acknowledged_with_200(
    channel: FeishuChannel, monkeypatch: pytest.MonkeyPatch
) -> None:
    def busy(*args: Any, **kwargs: Any) -> None:
        raise ChannelBusy("1000 runs already queued")

    monkeypatch.setattr(channel, "handle_inbound", busy)
    response = channel.handle_event_request(request(message_event("hi", event_id="ev-busy")))
    assert response.status == 200
    assert "ev-busy" in channel._events_seen  # handled: a redelivery is a duplicate


def test_closed_channel_answers_503_and_forgets_the_event(channel: FeishuChannel) -> None:
    channel.close(timeout=2.0)
    response = channel.handle_event_request(request(message_event("hi", event_id="ev-closed")))
    assert response.status == 503
    assert "ev-closed" not in channel._events_seen

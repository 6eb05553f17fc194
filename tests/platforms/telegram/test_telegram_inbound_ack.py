"""Telegram webhook messages follow the shared ACK policy: busy -> 200, closed -> 503."""

from __future__ import annotations

from typing import Any

from channelkit.core import ChannelBusy
from channelkit.testing import ScriptedBridge

from tests.platforms.telegram.tg_env import Env


def test_busy_channel_is_acknowledged_with_200(rt, mock, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    env = Env(rt, mock, ScriptedBridge([]))

    def busy(*args: Any, **kwargs: Any) -> None:
        raise ChannelBusy("1000 runs already queued")

    monkeypatch.setattr(env.channel, "handle_inbound", busy)
    assert env.message("hello") == 200
    assert len(env.channel._seen_updates) == 1


def test_closed_channel_answers_503_and_forgets_the_update(rt, mock) -> None:  # type: ignore[no-untyped-def]
    env = Env(rt, mock, ScriptedBridge([]))
    env.channel.close(timeout=2.0)
    assert env.message("hello") == 503
    assert len(env.channel._seen_updates) == 0

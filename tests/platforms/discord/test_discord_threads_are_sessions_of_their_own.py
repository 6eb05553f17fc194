"""Discord threads: a thread is a channel whose parent is a guild channel; a message in a
thread carries the thread as its `thread_id` and is its own session, apart from the
parent channel's; the answer goes into the thread."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import requests_mock as rm
from channelkit.testing import ScriptedBridge, chunk

from tests.platforms.discord.discord_env import GUILD, GUILD_CHANNEL, THREAD, Env


@pytest.fixture
def mocker() -> Iterator[rm.Mocker]:
    with rm.Mocker() as m:
        yield m


def test_a_thread_message_is_its_own_session_and_is_answered_in_the_thread(rt, mocker) -> None:  # type: ignore[no-untyped-def]
    bridge = ScriptedBridge([chunk("ok")])
    env = Env(rt, mocker, bridge)
    env.channel.dispatch(
        "THREAD_CREATE",
        {"id": THREAD, "type": 11, "parent_id": GUILD_CHANNEL, "guild_id": GUILD},
    )
    env.message("in the channel", channel=GUILD_CHANNEL, mention=True)
    rt.settle()
    env.message("in the thread", channel=THREAD, mention=True)
    rt.settle()
    (channel_session, _), (thread_session, _) = bridge.prompts
    assert channel_session != thread_session
    started = [e for e in env.channel.events if e.type.value == "started"]
    assert [(e.chat_id, e.thread_id) for e in started] == [
        (GUILD_CHANNEL, None),
        (THREAD, THREAD),
    ]
    assert [p["content"] for p in env.posts(THREAD)] == ["ok"]
    env.channel.close(2.0)


def test_a_thread_named_by_a_guild_create_is_known(rt, mocker) -> None:  # type: ignore[no-untyped-def]
    env = Env(rt, mocker, ScriptedBridge([chunk("ok")]))
    assert not env.channel.is_thread(THREAD)
    env.channel.dispatch(
        "GUILD_CREATE",
        {"id": GUILD, "threads": [{"id": THREAD, "type": 11, "parent_id": GUILD_CHANNEL}]},
    )
    assert env.channel.is_thread(THREAD)
    env.channel.dispatch("THREAD_DELETE", {"id": THREAD, "type": 11})
    assert not env.channel.is_thread(THREAD)
    env.channel.close(2.0)

"""The channel's own Gateway connection: identify with the bot's intents, READY names
the bot user, a person's `MESSAGE_CREATE` over the socket becomes a run answered over
REST, and a component click over the socket is answered at the interaction callback."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import requests_mock as rm
from channelkit.platforms.discord.gateway import DEFAULT_INTENTS
from channelkit.testing import ScriptedBridge, chunk, wait_until
from websockets.sync.server import ServerConnection

from tests.platforms.discord.discord_env import APP_ID, DM, OWNER, Env
from tests.platforms.discord.discord_gateway_peer import Peer, running

BOT_USER = "9900000000000000001"  # READY names a bot user other than the application


@pytest.fixture
def mocker() -> Iterator[rm.Mocker]:
    with rm.Mocker(real_http=False) as m:
        yield m


def _message(message_id: str, content: str) -> dict[str, Any]:
    return {
        "id": message_id,
        "channel_id": DM,
        "author": {"id": OWNER, "username": "owner"},
        "content": content,
        "mentions": [],
        "type": 0,
    }


def test_a_message_over_the_socket_is_answered(rt, mocker) -> None:  # type: ignore[no-untyped-def]
    def script(peer: Peer, ws: ServerConnection) -> None:
        peer.hello(ws)
        identify = peer.expect(ws, 2)
        assert identify["d"]["intents"] == DEFAULT_INTENTS
        peer.dispatch(
            ws,
            1,
            "READY",
            {"session_id": "s", "resume_gateway_url": peer.resume_url, "user": {"id": BOT_USER}},
        )
        peer.dispatch(ws, 2, "MESSAGE_CREATE", _message("6600000000000000001", "hello there"))
        peer.dispatch(
            ws,
            3,
            "MESSAGE_CREATE",
            {**_message("6600000000000000002", "mine"), "author": {"id": BOT_USER, "bot": True}},
        )
        peer.hold(ws)

    bridge = ScriptedBridge([chunk("hi!")])
    with running([script]) as peer:
        env = Env(
            rt,
            mocker,
            bridge,
            gateway_url=f"ws://127.0.0.1:{peer.port}/",
        )
        env.channel.gateway.start()
        try:
            wait_until(lambda: bridge.prompts, what="the run")
            rt.settle()
            assert [text for _, text in bridge.prompts] == ["hello there"]
            assert env.channel.bot_id == BOT_USER
            assert [p["content"] for p in env.posts(DM)] == ["hi!"]
        finally:
            env.channel.close(5.0)
    assert env.channel.gateway.state().status == "stopped"  # close() ended the connection


def test_a_click_over_the_socket_is_answered_at_the_callback(rt, mocker) -> None:  # type: ignore[no-untyped-def]
    click = {
        "id": "7700000000000000001",
        "token": "interaction-token-over-the-socket",
        "type": 3,
        "application_id": APP_ID,
        "channel_id": DM,
        "user": {"id": OWNER},
        "data": {"custom_id": "ck:stop:unknown-token", "component_type": 2},
    }

    def script(peer: Peer, ws: ServerConnection) -> None:
        peer.hello(ws)
        peer.expect(ws, 2)
        peer.ready(ws, 1)
        peer.dispatch(ws, 2, "INTERACTION_CREATE", click)
        peer.hold(ws)

    with running([script]) as peer:
        env = Env(rt, mocker, ScriptedBridge([]), gateway_url=f"ws://127.0.0.1:{peer.port}/")
        env.channel.gateway.start()
        try:
            wait_until(lambda: env.callbacks(), what="the interaction response")
            (_, path, body) = env.calls("POST", r"/callback$")[0]
            assert path.endswith(
                "/interactions/7700000000000000001/interaction-token-over-the-socket/callback"
            )
            assert body == {"type": 6}  # a stale Stop: acknowledged, nothing changes
        finally:
            env.channel.close(5.0)

"""Slack Socket Mode envelopes on a real SlackChannel: ACK first, the Events API's handlers
after, each envelope once, hello / disconnect / garbage never run anything."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import requests_mock as rm
from channelkit.core import ChannelConfig
from channelkit.errors import ConfigurationError
from channelkit.http import RetryPolicy
from channelkit.ingress import IngressResponse
from channelkit.platforms.slack import SlackChannel, SlackConfig
from channelkit.platforms.slack.api import SlackApi
from channelkit.platforms.slack.socket_mode import SlackSocket, ack_envelope
from channelkit.testing import ScriptedBridge, chunk

from tests.platforms.slack.slack_env import BASE, DM, OWNER, TEAM, TOKEN, mock_web_api

APP_TOKEN = "xapp-1-test-app-token"


class SocketEnv:
    def __init__(self, rt: Any, mock: rm.Mocker) -> None:
        self.rt = rt
        self.mock = mock
        self.bridge = ScriptedBridge([chunk("hi there")])
        config = SlackConfig(
            bot_token=TOKEN, app_token=APP_TOKEN, ingress="socket", api_base_url=BASE
        )
        self.channel = SlackChannel(
            config,
            self.bridge,
            channel_config=ChannelConfig(name="slack", max_workers=8),
            api=SlackApi(TOKEN, base_url=BASE, retry=RetryPolicy.never()),
            executor=rt.pool,
            run_executor=rt.run_pool,
            scheduler=rt.scheduler,
            clock=rt.clock,
        )
        socket = self.channel.socket
        assert socket is not None
        self.socket: SlackSocket = socket
        self.sent: list[dict[str, Any]] = []

    def send(self, text: str) -> None:
        self.sent.append(json.loads(text))

    def frame(self, envelope: dict[str, Any] | str) -> str | None:
        raw = envelope if isinstance(envelope, str) else json.dumps(envelope)
        return self.socket.handle_frame(raw, self.send)


def event_envelope(envelope_id: str, event_id: str, text: str, retry: int = 0) -> dict[str, Any]:
    return {
        "envelope_id": envelope_id,
        "type": "events_api",
        "accepts_response_payload": False,
        "retry_attempt": retry,
        "retry_reason": "timeout" if retry else "",
        "payload": {
            "type": "event_callback",
            "team_id": TEAM,
            "event_id": event_id,
            "event": {
                "type": "message",
                "user": OWNER,
                "text": text,
                "channel": DM,
                "channel_type": "im",
                "ts": f"1699999999.{event_id[-4:]}",
            },
        },
    }


@pytest.fixture
def env(rt) -> Iterator[SocketEnv]:  # type: ignore[no-untyped-def]
    with rm.Mocker() as m:
        mock_web_api(m)
        e = SocketEnv(rt, m)
        yield e
        e.channel.close(2.0)


def test_socket_ingress_exposes_one_connection_and_no_http_routes(env: SocketEnv) -> None:
    assert env.channel.connections == (env.socket,)
    assert env.channel.ingress_routes() == []


def test_socket_ingress_needs_the_app_level_token() -> None:
    with pytest.raises(ConfigurationError, match="app_token"):
        SlackConfig(bot_token=TOKEN, ingress="socket")


def test_apps_connections_open_is_called_with_the_app_token(env: SocketEnv) -> None:
    env.mock.post(f"{BASE}/apps.connections.open", json={"ok": True, "url": "ws://127.0.0.1:9/x"})
    assert env.channel.api.open_socket_url(APP_TOKEN) == "ws://127.0.0.1:9/x"
    request = env.mock.request_history[-1]
    assert request.headers["Authorization"] == f"Bearer {APP_TOKEN}"


def test_an_events_api_envelope_is_acked_then_runs_the_agent(env: SocketEnv) -> None:
    assert env.frame(event_envelope("env-1", "Ev0001", "hello")) is None
    assert env.sent == [{"envelope_id": "env-1"}]
    env.rt.wait_for(lambda: env.bridge.prompts)
    assert env.bridge.prompts[0][1] == "hello"


def test_the_ack_is_written_before_the_handler_runs(env: SocketEnv) -> None:
    order: list[str] = []

    def on_event(payload: Any, retry: bool) -> IngressResponse:
        order.append(f"handler after {len(env.sent)} ack(s)")
        return IngressResponse.json(200, {}, after=[lambda: order.append("after")])

    socket = SlackSocket(lambda: "ws://unused", on_event, lambda p: IngressResponse.json(200, {}))
    socket.handle_frame(json.dumps(event_envelope("env-9", "Ev0009", "x")), env.send)
    assert order == ["handler after 1 ack(s)", "after"]
    assert env.sent == [{"envelope_id": "env-9"}]


def test_a_redelivered_envelope_and_a_retried_event_run_once(env: SocketEnv) -> None:
    env.frame(event_envelope("env-1", "Ev0001", "hello"))
    env.frame(event_envelope("env-1", "Ev0001", "hello"))  # the same envelope again
    env.frame(event_envelope("env-2", "Ev0001", "hello", retry=1))  # Slack's retry
    env.rt.settle()
    assert [a["envelope_id"] for a in env.sent] == ["env-1", "env-1", "env-2"]
    assert len(env.bridge.prompts) == 1
    assert env.socket.counts["duplicates"] == 1


def test_hello_disconnect_and_garbage_run_nothing(env: SocketEnv) -> None:
    assert env.frame({"type": "hello", "num_connections": 1}) is None
    assert env.frame("not json {") is None
    assert env.frame("[1, 2]") is None
    assert env.frame({"type": "events_api", "payload": {}}) is None  # no envelope_id
    assert env.frame({"type": "disconnect", "reason": "refresh_requested"}) == "disconnect"
    env.rt.settle()
    assert env.sent == []
    assert env.bridge.prompts == []
    assert env.socket.counts == {"hellos": 1, "garbage": 2, "ignored": 1, "disconnects": 1}


def test_unknown_envelope_types_are_acked_and_ignored(env: SocketEnv) -> None:
    env.frame({"envelope_id": "env-s", "type": "slash_commands", "payload": {"command": "/x"}})
    env.rt.settle()
    assert env.sent == [{"envelope_id": "env-s"}]
    assert env.bridge.prompts == []


def test_ack_frame_is_the_envelope_id_alone() -> None:
    assert json.loads(ack_envelope("abc")) == {"envelope_id": "abc"}

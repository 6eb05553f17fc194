"""Feishu long connection: pbbp2 frames as published (field numbers pinned by bytes), the
ACK shape, pings at the server's PingInterval, and the ``ingress`` setting."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest
from channelkit.errors import ConfigurationError
from channelkit.platforms.feishu import FeishuConfig
from channelkit.platforms.feishu.api import FeishuApi
from channelkit.platforms.feishu.ingress import FeishuIngressVerifier, IngressRejected
from channelkit.platforms.feishu.longconn import (
    CONTROL,
    DATA,
    ClientConfig,
    Frame,
    ack_payload,
    ping_frame,
)
from channelkit.playground.feishu.gateway import FeishuGateway, decode_frame, encode_frame
from channelkit.testing import ScriptedBridge, final, wait_until
from feishu_helpers import challenge, message_event, request
from feishu_ws_helpers import Waits, connected_channel

WAIT = 20.0


def test_a_ping_frame_has_the_published_field_numbers() -> None:
    # SeqID=1 0, LogID=2 0, service=3 7, method=4 0 (control), headers=5 {key=1, value=2}
    expected = bytes.fromhex("08 00 10 00 18 07 20 00 2a 0c 0a 04") + b"type"
    expected += bytes.fromhex("12 04") + b"ping"
    assert ping_frame(7).encode() == expected
    assert Frame.decode(expected) == Frame(service=7, method=CONTROL, headers=[("type", "ping")])


def test_frames_round_trip_with_an_independent_schema() -> None:
    sent = encode_frame(
        DATA, {"type": "event", "message_id": "m1", "sum": "1", "seq": "0"}, b'{"a":1}', service=3
    )
    frame = Frame.decode(sent)
    assert (frame.method, frame.service, frame.payload) == (DATA, 3, b'{"a":1}')
    assert frame.header("message_id") == "m1" and frame.header("missing") is None
    back = Frame(seq_id=9, log_id=8, service=3, method=DATA, headers=[("type", "card")])
    assert decode_frame(back.encode()) == (DATA, {"type": "card"}, b"")
    for garbage in (b"", b"\x08\x01", b"\xff\xff\xff"):
        with pytest.raises(ValueError):
            Frame.decode(garbage)


def test_the_ack_payload_carries_the_code_and_the_base64_answer() -> None:
    assert json.loads(ack_payload(200, b"{}")) == {"code": 200, "headers": {}}
    answer = json.loads(ack_payload(200, b'{"toast":{"type":"info"}}'))
    assert answer["code"] == 200
    assert json.loads(base64.b64decode(answer["data"])) == {"toast": {"type": "info"}}
    assert json.loads(ack_payload(503, b"{}"))["code"] == 500


def test_client_config_takes_only_valid_values() -> None:
    config = ClientConfig().merged({"PingInterval": 30, "ReconnectCount": 3, "Bogus": 1})
    assert (config.ping_interval, config.reconnect_count) == (30.0, 3)
    same = config.merged({"PingInterval": 0, "ReconnectInterval": "10", "ReconnectNonce": True})
    assert same == config
    assert config.merged(None) == config


@pytest.fixture
def gateway() -> Iterator[FeishuGateway]:
    gw = FeishuGateway("cli_1", "s", ack_timeout=WAIT)
    yield gw
    gw.close()


def test_pings_follow_the_ping_interval_and_pong_updates(
    rt: Any, api: FeishuApi, gateway: FeishuGateway
) -> None:
    gateway.client_config["PingInterval"] = 100
    with connected_channel(rt, api, ScriptedBridge([final("ok")]), gateway, Waits()) as channel:
        connection = channel.long_connection
        assert connection is not None
        wait_until(lambda: gateway.counts.get("pings") == 1, WAIT, what="the first ping")
        assert connection.client_config.ping_interval == 100.0
        gateway.pong_config = {"PingInterval": 10}
        rt.clock.advance(100)
        wait_until(lambda: gateway.counts.get("pings") == 2, WAIT, what="the second ping")
        wait_until(lambda: connection.client_config.ping_interval == 10.0, WAIT, what="pong")
        assert gateway.counts["pings"] == 2  # none before the interval is over
        rt.clock.advance(10)
        wait_until(lambda: gateway.counts.get("pings") == 3, WAIT, what="a ping 10 s later")
        assert connection.counts["pongs"] >= 2
        assert gateway.counts["pings"] == 3


def test_ingress_is_validated_naming_the_field() -> None:
    with pytest.raises(ConfigurationError) as info:
        FeishuConfig.from_dict({"app_id": "a", "app_secret": "s", "ingress": "ws"})
    assert info.value.path == "feishu.ingress"
    with pytest.raises(ConfigurationError) as info:
        FeishuConfig.from_dict({"app_id": "a", "app_secret": "s"})
    assert info.value.path == "feishu.verification_token"  # HTTP, the default, needs it
    config = FeishuConfig.from_dict({"app_id": "a", "app_secret": "s", "ingress": "websocket"})
    assert config.ingress == "websocket" and config.verification_token == ""
    assert FeishuConfig(app_id="a", app_secret="s", verification_token="t").ingress == "http"


def test_without_a_verification_token_no_callback_is_accepted() -> None:
    verifier = FeishuIngressVerifier("", None, time=lambda: 1_700_000_000.0)
    for payload in (challenge(token=""), message_event(token="")):
        with pytest.raises(IngressRejected):
            verifier.verify(request(payload))


def test_a_deployment_needs_the_verification_token_only_for_http() -> None:
    from channelkit.config import parse_config

    def document(options: dict[str, Any]) -> dict[str, Any]:
        credentials = {"appId": "a", "appSecret": "s"}
        channel = {"platform": "feishu", "credentials": credentials, "options": options}
        return {"channels": [channel], "agent": {"type": "demo"}}

    parse_config(document({"ingress": "websocket"}))
    with pytest.raises(ConfigurationError) as info:
        parse_config(document({}))
    assert info.value.path == "channels[0].credentials.verificationToken"
    with pytest.raises(ConfigurationError) as info:
        parse_config(document({"ingress": "ws"}))
    assert info.value.path == "channels[0].options.ingress"

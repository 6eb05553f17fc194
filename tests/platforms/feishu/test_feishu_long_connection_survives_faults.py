"""The Feishu long connection survives its faults: a dropped socket, garbage frames, a
split payload, refused handshakes (bounded backoff) and lost ACKs, and processes every
event exactly once; the ACK goes out before any deferred work runs."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from channelkit.platforms.feishu.api import FeishuApi
from channelkit.platforms.feishu.longconn import FeishuLongConnection
from channelkit.playground.feishu.gateway import FeishuGateway
from channelkit.testing import ScriptedBridge, final, wait_until
from feishu_helpers import message_event
from feishu_ws_helpers import Waits, connected_channel

WAIT = 20.0


@pytest.fixture
def gateway() -> Iterator[FeishuGateway]:
    gw = FeishuGateway("cli_1", "s", ack_timeout=WAIT)
    yield gw
    gw.close()


def _connection(channel: Any) -> FeishuLongConnection:
    connection = channel.long_connection
    assert isinstance(connection, FeishuLongConnection)
    return connection


def _event(n: int, text: str = "hi") -> dict[str, Any]:
    return message_event(text, event_id=f"ev-{n}", message_id=f"om_{n}")


def test_messages_survive_a_dropped_socket_and_garbage_frames(
    rt: Any, api: FeishuApi, gateway: FeishuGateway
) -> None:
    bridge = ScriptedBridge([final("ok")])
    waits = Waits()
    with connected_channel(rt, api, bridge, gateway, waits) as channel:
        connection = _connection(channel)
        _, ack = gateway.deliver(_event(1, "one"))
        assert ack is not None and ack.code == 200
        assert "biz_rt" in ack.headers

        # garbage: bytes that are no pbbp2.Frame, a text frame, an empty frame
        for raw in (b"\xff\x00garbage", "not binary", b""):
            assert gateway.send_raw(raw)
        wait_until(lambda: connection.counts.get("garbage", 0) >= 3, WAIT, what="garbage")
        _, ack = gateway.deliver(_event(2, "two"))
        assert ack is not None and ack.code == 200
        assert gateway.counts["connections"] == 1  # garbage never ends the connection

        # the socket dies without a close frame: reconnect after a backoff, go on
        assert gateway.drop()
        assert gateway.wait_connected(WAIT, connections=2)
        _, ack = gateway.deliver(_event(3, "three"))
        assert ack is not None and ack.code == 200
        assert waits.delays and all(d <= 4.0 for d in waits.delays)
        assert bridge.wait_prompt(3, WAIT)
        assert [text for _, text in bridge.prompts] == ["one", "two", "three"]


def test_a_split_payload_is_reassembled_once(
    rt: Any, api: FeishuApi, gateway: FeishuGateway
) -> None:
    bridge = ScriptedBridge([final("ok")])
    with connected_channel(rt, api, bridge, gateway, Waits()) as channel:
        connection = _connection(channel)
        _, ack = gateway.deliver(_event(1, "split in three parts"), fragments=3)
        assert ack is not None and ack.code == 200
        assert connection.counts["fragments"] == 3
        assert connection.partial_messages() == 0
        assert bridge.wait_prompt(1, WAIT)
        assert [text for _, text in bridge.prompts] == ["split in three parts"]


def test_refused_handshakes_back_off_within_the_cap(
    rt: Any, api: FeishuApi, gateway: FeishuGateway
) -> None:
    bridge = ScriptedBridge([final("ok")])
    waits = Waits()
    with connected_channel(rt, api, bridge, gateway, waits) as channel:
        connection = _connection(channel)
        gateway.refuse_handshakes(5)
        assert gateway.drop()
        assert gateway.wait_connected(WAIT, connections=2)
        assert gateway.counts["refused"] == 5
        # equal jitter at its top: base 0.5 doubling to the 4 s cap, then reset
        assert waits.delays == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
        wait_until(lambda: connection.state().status == "connected", WAIT, what="connected")
        assert connection.state().attempt == 0
        _, ack = gateway.deliver(_event(1))
        assert ack is not None and ack.code == 200


def test_no_event_is_processed_twice(rt: Any, api: FeishuApi, gateway: FeishuGateway) -> None:
    bridge = ScriptedBridge([final("ok")])
    with connected_channel(rt, api, bridge, gateway, Waits()) as channel:
        connection = _connection(channel)
        # the ACK is lost with the connection: Feishu sends the message again on the next
        gateway.lose_acks(1)
        message_id, ack = gateway.deliver(_event(1, "once"))
        assert ack is not None and ack.code == 200
        assert gateway.counts["connections"] == 2 and gateway.counts["redelivered"] == 1
        # and an ACKed message sent again is ACKed again, not processed
        again = gateway.redeliver(message_id)
        assert again is not None and again.code == 200
        assert connection.counts["duplicates"] == 2
        assert connection.counts["events"] == 1
        assert bridge.wait_prompt(1, WAIT)
        rt.settle()
        assert [text for _, text in bridge.prompts] == ["once"]


def test_the_ack_is_written_before_the_deferred_work_runs(
    rt: Any, api: FeishuApi, gateway: FeishuGateway
) -> None:
    bridge = ScriptedBridge([final("ok")])
    with connected_channel(rt, api, bridge, gateway, Waits()) as channel:
        connection = _connection(channel)
        order: list[str] = []
        released = threading.Event()

        def blocking_work() -> None:
            order.append("work")
            released.wait(WAIT)  # a responder that blocks: nothing may wait for it

        def dispatch(payload: Any) -> Any:
            from channelkit.ingress import IngressResponse

            return IngressResponse.json(200, {"toast": {"content": "ok"}}, after=[blocking_work])

        channel.dispatch_card_action = dispatch  # type: ignore[method-assign]

        def send(data: bytes) -> None:
            order.append("ack")

        frame = _card_frame(gateway)
        worker = threading.Thread(target=connection.handle_frame, args=(frame, send))
        worker.start()
        wait_until(lambda: order == ["ack", "work"], WAIT, what="ACK, then the work")
        released.set()
        worker.join(WAIT)

        # over the socket: the ACK (with the card answer) arrives while the work blocks
        released.clear()
        order.clear()
        _, ack = gateway.deliver({"schema": "2.0", "event": {}}, kind="card")
        assert ack is not None and ack.code == 200 and '"toast"' in ack.data
        released.set()


def _card_frame(gateway: FeishuGateway) -> bytes:
    from channelkit.playground.feishu.gateway import encode_frame

    return encode_frame(
        1,
        {"type": "card", "message_id": "m-order", "sum": "1", "seq": "0"},
        b'{"schema": "2.0"}',
        service=gateway.service_id,
    )

"""The Stream connection survives the gateway's faults without losing or repeating work.

Against the emulator's gateway: a dropped socket, the ``disconnect`` system frame, five
refused reconnects, an expired ticket and frames of garbage JSON. The client reconnects
with a bounded backoff (the wait is injected and records each delay; nothing sleeps),
a callback it ACKed is never lost, and a redelivered callback (same messageId) is ACKed
again but never processed twice.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from channelkit.agents.function import Turn
from channelkit.testing import wait_until
from stream_env import BACKOFF_CAP, WAIT, StreamEnv


class CountingAgent:
    """Answers at once; counts the runs per text. ``hold`` blocks the next run."""

    def __init__(self) -> None:
        self.runs: dict[str, int] = {}
        self.lock = threading.Lock()
        self.hold: threading.Event | None = None
        self.holding = threading.Event()

    def __call__(self, turn: Turn) -> str:
        with self.lock:
            self.runs[turn.text] = self.runs.get(turn.text, 0) + 1
        hold = self.hold
        if hold is not None:
            self.holding.set()
            assert hold.wait(WAIT)
        return f"answer to {turn.text}"


@pytest.fixture
def env() -> Iterator[tuple[StreamEnv, CountingAgent]]:
    agent = CountingAgent()
    stream_env = StreamEnv(agent)
    try:
        yield stream_env, agent
    finally:
        if agent.hold is not None:
            agent.hold.set()
        stream_env.close()


def _completed(env: StreamEnv, text: str) -> bool:
    return any(v["state"] == "completed" and text in v.get("content", "") for v in env.views())


def _roundtrip(env: StreamEnv, agent: CountingAgent, text: str) -> None:
    """A message over the (re)connected stream is ACKed and answered, once."""
    _, ack = env.emulator.send_user_message(text)
    assert ack.status == 200, ack
    wait_until(lambda: _completed(env, f"answer to {text}"), WAIT, what=f"the answer to {text}")
    assert agent.runs[text] == 1


def test_a_dropped_socket_reconnects_after_one_backoff_and_keeps_acked_work(
    env: tuple[StreamEnv, CountingAgent],
) -> None:
    stream_env, agent = env
    agent.hold = threading.Event()
    _, ack = stream_env.emulator.send_user_message("long job")
    assert ack.status == 200
    assert agent.holding.wait(WAIT)
    assert stream_env.gateway.drop()
    stream_env.wait_connections(2)
    assert stream_env.waits == [0.5]  # one failure: the first backoff step
    agent.hold.set()  # the ACKed run was not lost with the socket
    wait_until(lambda: _completed(stream_env, "answer to long job"), WAIT, what="the answer")
    agent.hold = None
    _roundtrip(stream_env, agent, "after the drop")
    assert agent.runs == {"long job": 1, "after the drop": 1}


def test_the_disconnect_frame_reconnects_at_once(env: tuple[StreamEnv, CountingAgent]) -> None:
    stream_env, agent = env
    assert stream_env.gateway.disconnect()
    stream_env.wait_connections(2)
    assert stream_env.waits == []  # a requested reconnect waits for nothing
    assert stream_env.gateway.counts.get("opens") == 2  # a new ticket for it
    _roundtrip(stream_env, agent, "after disconnect")


def test_five_refused_reconnects_back_off_within_the_cap(
    env: tuple[StreamEnv, CountingAgent],
) -> None:
    stream_env, agent = env
    stream_env.gateway.refuse_handshakes(5)
    assert stream_env.gateway.drop()
    stream_env.wait_connections(2)
    assert stream_env.gateway.counts.get("refused") == 5
    # the drop, then each refusal: doubling from the base, never above the cap
    assert stream_env.waits == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0]
    assert max(stream_env.waits) <= BACKOFF_CAP
    assert stream_env.stream.state().attempt == 0  # reset once connected
    _roundtrip(stream_env, agent, "after refusals")
    # the next failure starts from the base again
    assert stream_env.gateway.drop()
    stream_env.wait_connections(3)
    assert stream_env.waits[-1] == 0.5


def test_an_expired_ticket_is_replaced_by_a_new_one(
    env: tuple[StreamEnv, CountingAgent],
) -> None:
    stream_env, agent = env
    gateway = stream_env.gateway
    gateway.expire_tickets()  # the live connection's ticket is spent anyway
    gateway.expire_next_tickets(1)  # the next ticket expires before its handshake
    assert gateway.drop()
    stream_env.wait_connections(2)
    assert gateway.counts.get("bad_tickets") == 1  # refused with HTTP 401
    assert gateway.counts.get("opens") == 3  # initial, expired, fresh
    assert stream_env.waits == [0.5, 1.0]
    assert stream_env.stream.state().last_error is None
    _roundtrip(stream_env, agent, "after expiry")


def test_garbage_frames_are_ignored_and_the_connection_stays(
    env: tuple[StreamEnv, CountingAgent],
) -> None:
    stream_env, agent = env
    gateway = stream_env.gateway
    for garbage in ("{not json", "[1, 2, 3]", '"text"', '{"type": "CALLBACK", "headers": 7}'):
        assert gateway.send_raw(garbage)
    # a CALLBACK whose data is not JSON is ACKed 400, not processed
    assert gateway.send_raw(
        '{"type":"CALLBACK","headers":{"messageId":"m-bad","topic":'
        '"/v1.0/im/bot/messages/get"},"data":"{oops"}'
    )
    wait_until(lambda: any(a.message_id == "m-bad" for a in gateway.acks()), WAIT, what="ACK")
    assert {a.message_id: a.code for a in gateway.acks()}["m-bad"] == 400
    pong = gateway.ping('{"opaque":"p-1"}')  # the connection still answers
    assert pong is not None and pong.data == '{"opaque":"p-1"}'
    assert stream_env.stream.counts.get("garbage") == 3
    assert stream_env.connections() == 1 and stream_env.waits == []
    _roundtrip(stream_env, agent, "after garbage")


def test_a_lost_ack_is_redelivered_and_processed_once(
    env: tuple[StreamEnv, CountingAgent],
) -> None:
    stream_env, agent = env
    gateway = stream_env.gateway
    gateway.lose_acks(1)  # the ACK never reaches DingTalk: it resends on the next connection
    _, ack = stream_env.emulator.send_user_message("only once")
    assert ack.status == 200  # the redelivery's ACK
    wait_until(lambda: _completed(stream_env, "answer to only once"), WAIT, what="the answer")
    assert gateway.counts.get("redelivered") == 1
    assert stream_env.stream.counts.get("duplicates") == 1
    assert agent.runs == {"only once": 1}

    # an ACKed frame sent again (any time later) is ACKed and not run again
    message_id = stream_env.emulator.callbacks()[-1]["messageId"]
    again = gateway.redeliver(message_id)
    assert again is not None and again.code == 200
    assert stream_env.stream.counts.get("duplicates") == 2
    assert agent.runs == {"only once": 1}

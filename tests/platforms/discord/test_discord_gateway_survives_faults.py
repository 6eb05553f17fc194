"""The Discord gateway client against a local gateway playing Discord's side: identify
with the bot's intents, resume after a dropped socket without losing or repeating a
message, re-identify after an invalid session, reconnect on a missing heartbeat ACK,
skip garbage frames."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest
from channelkit.errors import ConfigurationError
from channelkit.platforms.discord.gateway import DEFAULT_INTENTS, DiscordGateway
from channelkit.runtime.clock import FakeClock
from channelkit.runtime.pool import WorkerPool
from channelkit.runtime.scheduler import Scheduler
from websockets.sync.server import ServerConnection

from tests.platforms.discord.discord_gateway_peer import Peer, running


class Seen:
    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.events: list[tuple[str, str]] = []

    def __call__(self, name: str, data: Mapping[str, Any]) -> None:
        with self.cond:
            self.events.append((name, str(data.get("id"))))
            self.cond.notify_all()

    def wait_for(self, count: int, timeout: float = 5.0) -> list[tuple[str, str]]:
        with self.cond:
            assert self.cond.wait_for(lambda: len(self.events) >= count, timeout), self.events
            return list(self.events)


def until(predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    """Wait (bounded) for something the connection thread does."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        threading.Event().wait(0.01)


class Rig:
    def __init__(self) -> None:
        self.clock = FakeClock()
        self.pool = WorkerPool(2, name="test-discord-gw")
        self.scheduler = Scheduler(self.pool, clock=self.clock)
        self.seen = Seen()
        self.waits: list[float] = []
        self.errors: list[str | None] = []  # the connection's last error at each wait

    def gateway(self, peer: Peer) -> DiscordGateway:
        made: list[DiscordGateway] = []

        def wait(event: threading.Event, seconds: float) -> bool:
            self.waits.append(seconds)
            self.errors.append(made[0].state().last_error)
            return event.is_set()

        gateway = DiscordGateway(
            "test-token",
            self.seen,
            scheduler=self.scheduler,
            url=f"ws://127.0.0.1:{peer.port}/",
            jitter=lambda: 0.5,
            wait=wait,
        )
        made.append(gateway)
        return gateway


@pytest.fixture
def rig() -> Iterator[Rig]:
    r = Rig()
    yield r
    r.scheduler.stop(2.0)
    r.pool.shutdown(timeout=2.0)


def test_a_dropped_socket_resumes_without_losing_or_repeating_a_message(rig: Rig) -> None:
    def first(peer: Peer, ws: ServerConnection) -> None:
        peer.hello(ws)
        identify = peer.expect(ws, 2)
        assert identify["d"]["intents"] == DEFAULT_INTENTS == 1 | 512 | 4096 | 32768
        assert identify["d"]["token"] == "test-token"
        peer.ready(ws, 1)
        peer.message(ws, 2, "m1")
        peer.message(ws, 3, "m2")
        rig.seen.wait_for(2)
        peer.drop(ws)  # m3 (seq 4) was never sent on this connection

    def resumed(peer: Peer, ws: ServerConnection) -> None:
        peer.hello(ws)
        resume = peer.expect(ws, 6)
        assert resume["d"] == {"token": "test-token", "session_id": "sess-1", "seq": 3}
        peer.message(ws, 3, "m2")  # a replay overlapping what was handled
        peer.message(ws, 4, "m3")
        peer.dispatch(ws, 5, "RESUMED", {})
        peer.hold(ws)

    with running([first, resumed]) as peer:
        gateway = rig.gateway(peer)
        gateway.start()
        try:
            events = rig.seen.wait_for(3)
            until(lambda: gateway.counts.get("replays", 0) >= 1)
            assert [e[1] for e in events] == ["m1", "m2", "m3"]
            assert peer.paths == ["/?v=10&encoding=json", "/resume/?v=10&encoding=json"]
            until(lambda: gateway.seq == 5)  # RESUMED
            assert gateway.session_id == "sess-1"
        finally:
            assert gateway.stop(5.0)
    assert [e[1] for e in rig.seen.events] == ["m1", "m2", "m3"]


def test_an_invalid_session_identifies_anew(rig: Rig) -> None:
    def first(peer: Peer, ws: ServerConnection) -> None:
        peer.hello(ws)
        peer.expect(ws, 2)
        peer.ready(ws, 1, session="old")
        peer.message(ws, 2, "m1")
        ws.send(json.dumps({"op": 9, "d": False}))
        peer.hold(ws)

    def second(peer: Peer, ws: ServerConnection) -> None:
        peer.hello(ws)
        peer.expect(ws, 2)  # identify, not resume
        peer.ready(ws, 1, session="new")
        peer.message(ws, 2, "m2")  # a new session counts from 1 again
        peer.hold(ws)

    with running([first, second]) as peer:
        gateway = rig.gateway(peer)
        gateway.start()
        try:
            assert [e[1] for e in rig.seen.wait_for(2)] == ["m1", "m2"]
            until(lambda: gateway.session_id == "new")
            assert peer.paths == ["/?v=10&encoding=json"] * 2
            assert gateway.counts["identifies"] == 2 and "resumes" not in gateway.counts
            assert any(1.0 <= w <= 5.0 for w in rig.waits)  # the pause Discord asks for
        finally:
            assert gateway.stop(5.0)


def test_a_missing_heartbeat_ack_reconnects_and_resumes(rig: Rig) -> None:
    beats = threading.Semaphore(0)

    def first(peer: Peer, ws: ServerConnection) -> None:
        peer.hello(ws, interval_ms=1000)
        peer.expect(ws, 2)
        peer.ready(ws, 1)
        peer.expect(ws, 1)
        ws.send(json.dumps({"op": 11}))  # the first heartbeat is ACKed
        beats.release()
        peer.expect(ws, 1)  # the second is not
        beats.release()
        peer.hold(ws)

    def second(peer: Peer, ws: ServerConnection) -> None:
        peer.hello(ws, interval_ms=1000)
        peer.expect(ws, 6)
        peer.hold(ws)

    with running([first, second]) as peer:
        gateway = rig.gateway(peer)
        gateway.start()
        try:
            until(lambda: gateway.session_id == "sess-1")
            rig.clock.advance(0.4)
            assert gateway.counts.get("heartbeats", 0) == 0  # jitter: 0.5 of the interval
            rig.clock.advance(0.1)
            assert beats.acquire(timeout=5)
            until(lambda: gateway.counts.get("acks", 0) == 1)
            rig.clock.advance(1.0)
            assert beats.acquire(timeout=5)
            assert len(peer.paths) == 1  # an ACKed heartbeat keeps the connection
            rig.clock.advance(1.0)  # the next beat finds no ACK
            until(lambda: len(peer.paths) == 2 and gateway.counts.get("resumes", 0) == 1)
            assert gateway.counts["zombies"] == 1
            assert peer.paths[1].startswith("/resume")
            heartbeat = next(f for f in peer.received[0] if f["op"] == 1)
            assert heartbeat["d"] == 1  # the last sequence handled
        finally:
            assert gateway.stop(5.0)


def test_garbage_frames_are_skipped_and_reconnect_resumes(rig: Rig) -> None:
    def first(peer: Peer, ws: ServerConnection) -> None:
        peer.hello(ws)
        peer.expect(ws, 2)
        peer.ready(ws, 1)
        ws.send("not json at all")
        ws.send(json.dumps({"op": "zero"}))
        ws.send(json.dumps([1, 2, 3]))
        ws.send(b"\x00\xff binary")
        peer.message(ws, 2, "m1")
        ws.send(json.dumps({"op": 1, "d": None}))  # Discord asks for a heartbeat now
        peer.expect(ws, 1)
        ws.send(json.dumps({"op": 7, "d": None}))  # reconnect
        peer.hold(ws)

    def second(peer: Peer, ws: ServerConnection) -> None:
        peer.hello(ws)
        peer.expect(ws, 6)
        peer.message(ws, 3, "m2")
        peer.hold(ws)

    with running([first, second]) as peer:
        gateway = rig.gateway(peer)
        gateway.start()
        try:
            assert [e[1] for e in rig.seen.wait_for(2)] == ["m1", "m2"]
            assert gateway.counts["garbage"] == 4
            assert gateway.counts["reconnects"] == 1
            assert not rig.waits  # op 7 reconnects at once, no backoff
        finally:
            assert gateway.stop(5.0)


def test_configuration_errors_name_the_field(rig: Rig) -> None:
    with pytest.raises(ConfigurationError, match="token"):
        DiscordGateway(" ", rig.seen, scheduler=rig.scheduler)
    with pytest.raises(ConfigurationError, match="url"):
        DiscordGateway("t", rig.seen, scheduler=rig.scheduler, url="https://x")


def test_refused_intents_and_token_say_what_to_fix(rig: Rig) -> None:
    def closing(code: int) -> Callable[[Peer, ServerConnection], None]:
        def script(peer: Peer, ws: ServerConnection) -> None:
            peer.hello(ws)
            peer.expect(ws, 2)
            ws.close(code)

        return script

    def last(peer: Peer, ws: ServerConnection) -> None:
        peer.hello(ws)
        peer.expect(ws, 2)
        peer.hold(ws)

    with running([closing(4014), closing(4004), last]) as peer:
        gateway = rig.gateway(peer)
        gateway.start()
        try:
            until(lambda: len(peer.paths) == 3 and gateway.state().status == "connected")
            errors = rig.errors
            assert "Message Content intent" in (errors[0] or "")
            assert "credentials refused" in (errors[1] or "")
            assert "test-token" not in " ".join(e or "" for e in errors)
        finally:
            assert gateway.stop(5.0)


def test_a_peer_that_never_says_hello_is_left_and_connected_again(rig: Rig) -> None:
    def chatty(peer: Peer, ws: ServerConnection) -> None:
        for _ in range(8):
            ws.send(json.dumps({"op": 11}))  # anything but HELLO
        peer.hold(ws)

    def proper(peer: Peer, ws: ServerConnection) -> None:
        peer.hello(ws)
        peer.expect(ws, 2)
        peer.ready(ws, 1)
        peer.hold(ws)

    with running([chatty, proper]) as peer:
        gateway = rig.gateway(peer)
        gateway.start()
        try:
            until(lambda: gateway.session_id == "sess-1")
            assert "no HELLO" in (rig.errors[0] or "")
            assert gateway.counts["identifies"] == 1
        finally:
            assert gateway.stop(5.0)

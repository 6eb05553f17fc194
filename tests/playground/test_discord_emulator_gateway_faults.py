"""The Discord emulator's Gateway against channelkit's gateway client: a dropped socket
resumes without losing or repeating a message, an invalid session re-identifies, a
missing heartbeat ACK reconnects and resumes, op 7 reconnects, garbage frames are logged
and skipped, a wrong token is refused with close 4004."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest
from channelkit.platforms.discord.gateway import DiscordGateway
from channelkit.playground import discord_gateway
from channelkit.playground.discord import DM_CHANNEL, DiscordEmulator
from channelkit.runtime.clock import FakeClock
from channelkit.runtime.pool import WorkerPool
from channelkit.runtime.scheduler import Scheduler
from channelkit.testing import wait_until

TOKEN = "playground-discord-bot-token"


class Rig:
    def __init__(self) -> None:
        self.clock = FakeClock(wall_start=time.time())
        self.pool = WorkerPool(2, name="test-discord-emu-gw")
        self.scheduler = Scheduler(self.pool, clock=self.clock)
        self.emulator = DiscordEmulator(bot_token=TOKEN, clock=self.clock)
        self.lock = threading.Lock()
        self.messages: list[str] = []  # the content of each MESSAGE_CREATE handled
        self.client: DiscordGateway | None = None

    def on_dispatch(self, name: str, data: Mapping[str, Any]) -> None:
        if name == "MESSAGE_CREATE":
            with self.lock:
                self.messages.append(str(data["content"]))

    def seen(self) -> list[str]:
        with self.lock:
            return list(self.messages)

    def start(self, token: str = TOKEN) -> DiscordGateway:
        self.client = DiscordGateway(
            token,
            self.on_dispatch,
            scheduler=self.scheduler,
            url=self.emulator.gateway.url,
            jitter=lambda: 0.5,
            wait=lambda event, seconds: event.is_set(),  # no real back-off / 1-5 s wait
        )
        self.client.start()
        return self.client

    def send(self, text: str) -> None:
        _, result = self.emulator.send_user_message(text)
        assert result.status == 200, result

    def until(self, predicate: Callable[[], object], what: str) -> None:
        """Wait (bounded) for something the connection threads do; a timeout shows both
        ends' counters and the messages seen then."""
        wait_until(predicate, 10.0, what=what, state=self.describe)

    def describe(self) -> str:
        # copying a dict is one step under the interpreter lock, safe beside the threads
        # that count
        client = dict(self.client.counts) if self.client is not None else None
        gateway = dict(self.emulator.gateway.counts)
        return f"gateway {gateway}, client {client}, messages {self.seen()}"

    def wait_messages(self, count: int) -> list[str]:
        self.until(lambda: len(self.seen()) >= count, f"{count} messages")
        return self.seen()


@pytest.fixture
def rig() -> Iterator[Rig]:
    r = Rig()
    yield r
    if r.client is not None:
        assert r.client.stop(5.0)
    r.emulator.close()
    r.scheduler.stop(2.0)
    r.pool.shutdown(timeout=2.0)


def test_a_dropped_socket_resumes_without_losing_or_repeating_a_message(rig: Rig) -> None:
    client = rig.start()
    gateway = rig.emulator.gateway
    assert gateway.wait_identified()
    rig.send("m1")
    rig.send("m2")
    assert rig.wait_messages(2) == ["m1", "m2"]
    assert gateway.drop()
    rig.send("m3")  # sent into the dead socket or kept for the resume: replayed either way
    rig.send("m4")
    assert rig.wait_messages(4) == ["m1", "m2", "m3", "m4"]
    rig.until(lambda: gateway.counts.get("resumes") == 1, "the resume")
    assert gateway.counts.get("identifies") == 1
    assert client.session_id == gateway.session_id
    rig.send("m5")
    assert rig.wait_messages(5) == ["m1", "m2", "m3", "m4", "m5"]
    assert list(gateway.paths)[-1].startswith("/resume")


def test_op_7_reconnects_and_resumes_the_same_session(rig: Rig) -> None:
    client = rig.start()
    gateway = rig.emulator.gateway
    assert gateway.wait_identified()
    session = gateway.session_id
    assert gateway.reconnect()
    rig.send("after reconnect")
    assert rig.wait_messages(1) == ["after reconnect"]
    rig.until(lambda: gateway.counts.get("resumes") == 1, "the resume")
    assert gateway.session_id == session == client.session_id, rig.describe()
    assert gateway.counts.get("identifies") == 1, rig.describe()


def test_an_invalid_session_makes_the_bot_identify_anew(rig: Rig) -> None:
    client = rig.start()
    gateway = rig.emulator.gateway
    assert gateway.wait_identified()
    first = gateway.session_id
    rig.send("before")
    assert rig.wait_messages(1) == ["before"]
    assert gateway.invalidate_session(resumable=False)
    rig.until(lambda: gateway.counts.get("identifies") == 2 and gateway.identified, "re-identify")
    assert gateway.session_id not in (None, first)
    rig.until(lambda: client.session_id == gateway.session_id, "the client's new session")
    assert client.counts.get("invalid_sessions") == 1
    rig.send("after")
    assert rig.wait_messages(2) == ["before", "after"]
    assert gateway.counts.get("resumes", 0) == 0


def test_a_missing_heartbeat_ack_reconnects_and_resumes(rig: Rig) -> None:
    client = rig.start()
    gateway = rig.emulator.gateway
    assert gateway.wait_identified()
    gateway.withhold_acks(1)

    def advancing(done: Callable[[], object]) -> Callable[[], object]:
        # the client times its heartbeats from when it scheduled them, which may be just
        # after the server saw IDENTIFY: move the fake time a second per poll until done
        def step() -> object:
            if done():
                return True
            rig.clock.advance(1.0)
            return False

        return step

    rig.until(advancing(lambda: gateway.counts.get("acks_withheld") == 1), "a withheld ACK")
    # the next beat finds the last one unanswered: a zombie connection, closed
    rig.until(advancing(lambda: client.counts.get("zombies") == 1), "the zombie detection")
    rig.until(lambda: gateway.counts.get("resumes") == 1 and gateway.identified, "the resume")
    assert gateway.counts.get("connections") == 2
    rig.send("still here")
    assert rig.wait_messages(1) == ["still here"]


def test_garbage_frames_are_logged_and_skipped(rig: Rig, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="channelkit.platforms.discord.gateway")
    client = rig.start()
    gateway = rig.emulator.gateway
    assert gateway.wait_identified()
    assert gateway.send_raw("{not json")
    assert gateway.send_raw('{"op": "ten"}')
    assert gateway.send_raw(b"\xff\x00")
    rig.send("after garbage")
    assert rig.wait_messages(1) == ["after garbage"]
    assert client.counts.get("garbage") == 3
    assert gateway.counts.get("connections") == 1  # the same connection throughout
    skipped = [r for r in caplog.records if "not a Discord payload" in r.getMessage()]
    assert len(skipped) == 3
    assert all("not json" not in r.getMessage() for r in caplog.records)


def test_a_wrong_token_is_refused_with_close_4004(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a message sent before any session waits that long for the bot's first session; the
    # refused bot never gets one, so a short wait gives the same answer (default: 10 s)
    monkeypatch.setattr(discord_gateway, "FIRST_SESSION_WAIT_S", 0.2)
    client = rig.start(token="not-the-token")
    gateway = rig.emulator.gateway
    rig.until(lambda: gateway.counts.get("auth_failures", 0) >= 1, "the refusal")
    rig.until(lambda: client.state().last_error is not None, "the client's error")
    assert "4004" in str(client.state().last_error)
    assert not gateway.identified
    _, result = rig.emulator.send_user_message("nobody listens")
    assert result.status == 0  # no session: the emulator says so instead of losing it


def test_a_message_in_a_dm_is_a_message_create_in_the_dm_channel(rig: Rig) -> None:
    seen: list[Mapping[str, Any]] = []
    rig.on_dispatch = lambda name, data: seen.append(data)  # type: ignore[method-assign]
    rig.start()
    assert rig.emulator.gateway.wait_identified()
    rig.send("hello")
    rig.until(lambda: seen, "the dispatch")
    (event,) = seen
    assert event["channel_id"] == DM_CHANNEL
    assert "guild_id" not in event
    assert event["author"]["bot"] is False

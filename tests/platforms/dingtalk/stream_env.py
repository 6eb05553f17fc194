"""A DingTalk channel in Stream mode against the emulator's gateway, on 127.0.0.1.

The emulator (an :class:`~channelkit.playground.server.EmulatorServer`) delivers robot
messages and card actions as ``CALLBACK`` frames; the channel's
:class:`~channelkit.platforms.dingtalk.stream.DingtalkStream` reconnects through an
injected ``wait`` that records each backoff delay and returns at once (no real sleep),
with a jitter-free :class:`Backoff` so the delays are exact. ``log`` records, in order,
each frame the client wrote (``("ack", messageId)``) and whatever the test's agent
appends, so a test can prove an ACK was written before a responder ran.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from channelkit.agents.function import FunctionAgent, Turn
from channelkit.platforms.common.connection import Backoff
from channelkit.platforms.dingtalk import DingtalkChannel, DingtalkConfig
from channelkit.playground.server import EmulatorServer
from channelkit.testing import wait_until

APP_KEY = "stream-app"
APP_SECRET = "stream-secret"
#: generous: the suite runs on a loaded 2-core machine
WAIT = 15.0
BACKOFF_BASE = 0.5
BACKOFF_CAP = 30.0


class StreamEnv:
    """Emulator + Stream mode channel; ``close()`` stops both."""

    def __init__(self, agent: Callable[[Turn], str | None]) -> None:
        self.server = EmulatorServer(app_key=APP_KEY, app_secret=APP_SECRET, ingress="stream")
        self.emulator: Any = self.server.emulator
        self.gateway = self.emulator.stream
        self.gateway.ack_timeout = WAIT
        self.waits: list[float] = []
        self.log: list[tuple[str, str]] = []
        self._lock = threading.Lock()
        config = DingtalkConfig.from_dict(
            {
                "clientId": APP_KEY,
                "clientSecret": APP_SECRET,
                "apiBaseUrl": self.server.url,
                "model": "test-model",
                "interactiveCards": {"enabled": True},
            }
        )
        self.channel = DingtalkChannel(
            config,
            FunctionAgent(agent, question_timeout=60),
            stream_options={
                "wait": self._wait,
                "backoff": Backoff(BACKOFF_BASE, BACKOFF_CAP, jitter=lambda: 1.0),
            },
        )
        stream = self.channel.stream
        assert stream is not None
        self.stream = stream
        original = stream.send_frame

        def recording(send: Callable[[str], None], message_id: str, text: str) -> None:
            original(send, message_id, text)
            self.record("ack", message_id)

        stream.send_frame = recording  # type: ignore[method-assign]
        stream.start()
        assert self.gateway.wait_connected(WAIT), "the channel never connected"

    def _wait(self, stop: threading.Event, seconds: float) -> bool:
        with self._lock:
            self.waits.append(seconds)
        return stop.is_set()

    def record(self, kind: str, what: str) -> None:
        with self._lock:
            self.log.append((kind, what))

    def position(self, entry: tuple[str, str]) -> int:
        with self._lock:
            return self.log.index(entry)

    def connections(self) -> int:
        return int(self.gateway.counts.get("connections", 0))

    def wait_connections(self, count: int) -> None:
        assert self.gateway.wait_connected(WAIT, connections=count), (
            f"expected {count} connections, saw {self.connections()}"
        )
        wait_until(lambda: self.stream.state().status == "connected", WAIT, what="connected")

    def views(self) -> list[dict[str, Any]]:
        state = self.emulator.state()
        return [state["views"][e["card"]] for e in state["timeline"] if e["kind"] == "card"]

    def close(self) -> None:
        self.channel.close()
        self.server.close()

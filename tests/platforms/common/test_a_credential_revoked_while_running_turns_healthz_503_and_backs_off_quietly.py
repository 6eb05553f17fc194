"""A long connection whose platform starts refusing the credentials (a token revoked while
running: an `AuthError` from the connection) reports it on ``/healthz`` (503, the reason
"credentials refused by the platform"), backs off by minutes instead of seconds, and logs
it once at ERROR, then at most every 10 minutes, then once when it is accepted again.
The clock is a FakeClock advanced by the recorded waits: nothing sleeps."""

from __future__ import annotations

import io
import json
import logging
import threading
from typing import Any

import pytest
from channelkit.errors import AuthError
from channelkit.platforms.common.connection import (
    REFUSED_BACKOFF,
    REFUSED_LOG_INTERVAL_S,
    Backoff,
    LongConnection,
)
from channelkit.platforms.common.delivery import DeliveryHealth
from channelkit.runtime.clock import FakeClock
from channelkit.testing import wait_until
from channelkit.web import create_wsgi_app
from channelkit.web.health import health_report

LOGGER = "channelkit.platforms.common.connection"


class Revoked(LongConnection):
    """Refused `refusals` times (HTTP 401), then connected until stopped."""

    def __init__(self, refusals: int) -> None:
        self.clock = FakeClock()
        self.delays: list[float] = []
        self.seen: list[Any] = []  # the state during each wait
        self.refusals = refusals
        self.attempts = 0
        self.up = threading.Event()
        self.released = threading.Event()
        super().__init__(
            "telegram-polling",
            clock=self.clock,
            backoff=Backoff(0.5, 30.0, jitter=lambda: 1.0),
            refused_backoff=Backoff(*REFUSED_BACKOFF, jitter=lambda: 1.0),
            wait=self._record,
        )

    def _record(self, stop: threading.Event, seconds: float) -> bool:
        self.delays.append(seconds)
        self.seen.append(self.state())
        self.clock.advance(seconds)
        return stop.is_set()

    def serve_once(self) -> None:
        self.attempts += 1
        if self.attempts <= self.refusals:
            raise AuthError("Unauthorized", status=401, code=401)
        self.connected()
        self.up.set()
        self.released.wait(10)

    def interrupt(self) -> None:
        self.released.set()


class OneConnectionChannel:
    def __init__(self, connection: LongConnection) -> None:
        self.name = "telegram"
        self.connections = (connection,)
        self.delivery_health = DeliveryHealth()


def _healthz(channel: OneConnectionChannel) -> tuple[str, dict[str, Any]]:
    app = create_wsgi_app([], health=lambda: health_report([channel]))
    seen: dict[str, str] = {}
    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": "/healthz", "wsgi.input": io.BytesIO()}
    body = b"".join(app(environ, lambda status, headers: seen.update(status=status)))
    return seen["status"], json.loads(body)


def test_a_revoked_token_is_named_on_healthz_with_503() -> None:
    gate = threading.Event()
    states: list[tuple[str, dict[str, Any]]] = []

    class Held(Revoked):
        def _record(self, stop: threading.Event, seconds: float) -> bool:
            states.append(_healthz(channel))
            gate.wait(10)
            return stop.is_set()

    conn = Held(refusals=1)
    channel = OneConnectionChannel(conn)
    conn.start()
    try:
        wait_until(lambda: states, 10.0, what="the state during the first refusal's wait")
        status, report = states[0]
        assert status.startswith("503")
        (connection,) = report["channels"]["telegram"]["connections"]
        assert connection["status"] == "reconnecting"
        assert connection["last_error"].startswith(
            "credentials refused by the platform: AuthError: Unauthorized (HTTP 401"
        )
    finally:
        gate.set()
        assert conn.stop(5)


def test_refusals_back_off_by_minutes_and_log_one_error_per_ten_minutes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    conn = Revoked(refusals=8)
    conn.start()
    try:
        assert conn.up.wait(10)
    finally:
        assert conn.stop(5)
    # full jitter: 60, 120, 240, then the 300 s cap (never the 0.5 s of a dropped socket)
    assert conn.delays == [60.0, 120.0, 240.0, 300.0, 300.0, 300.0, 300.0, 300.0]
    errors = [r for r in caplog.records if r.name == LOGGER and r.levelno == logging.ERROR]
    # refusal n happens at the sum of the waits before it: 0, 60, 180, 420, 720, 1020,
    # 1320, 1620 s; an ERROR line at most every REFUSED_LOG_INTERVAL_S (600 s): 1, 5, 7
    assert REFUSED_LOG_INTERVAL_S == 600.0
    assert [r.getMessage().rsplit("(attempt ", 1)[1].split(";")[0] for r in errors] == [
        "1",
        "5",
        "7",
    ]
    assert "the platform refused the credentials (AuthError: HTTP 401)" in errors[0].getMessage()
    assert "/healthz answers 503" in errors[0].getMessage()
    warnings = [r for r in caplog.records if r.name == LOGGER and r.levelno == logging.WARNING]
    assert warnings == []  # no per-attempt reconnect warning for a refusal
    back = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert "telegram-polling: the platform accepts the credentials again; connected" in back
    state = conn.state()
    assert state.status == "stopped" and state.last_error is None
    assert conn.refused_backoff.failures == 0  # reset once connected


def test_a_network_failure_keeps_the_short_backoff() -> None:
    class Dropped(Revoked):
        def serve_once(self) -> None:
            self.attempts += 1
            if self.attempts <= 2:
                raise ConnectionError("reset by peer")
            self.connected()
            self.up.set()
            self.released.wait(10)

    conn = Dropped(refusals=0)
    conn.start()
    try:
        assert conn.up.wait(10)
    finally:
        assert conn.stop(5)
    assert conn.delays == [0.5, 1.0]
    assert conn.seen[0].last_error == "ConnectionError: reset by peer"

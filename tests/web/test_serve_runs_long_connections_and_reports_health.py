"""``channelkit serve`` runs long-connection channels next to webhook ones: their
connections start on their own threads, ``/healthz`` (same WSGI app) reports every
channel's connections and delivery counters, and the shutdown stops and closes
everything within the grace period. Fake channels and a fake LongConnection, so
nothing depends on a real platform."""

from __future__ import annotations

import io
import json
import threading
from pathlib import Path
from typing import Any

import pytest
from channelkit import cli
from channelkit.platforms.common.connection import LongConnection
from channelkit.platforms.common.delivery import DeliveryHealth
from channelkit.testing import wait_until
from channelkit.web import create_wsgi_app
from channelkit.web.service import ChannelService

#: fake channels with made-up credentials: the start-up checks would ask the real platform
NO_CHECKS = ("--skip-startup-checks",)


class FakeConnection(LongConnection):
    """Connects at once and reads until stopped; or fails every attempt (``fail``)."""

    def __init__(self, name: str, *, fail: bool = False) -> None:
        # a failed attempt waits on the stop event, not on a real backoff timer
        super().__init__(name, wait=lambda stop, seconds: stop.wait(60.0))
        self.fail = fail
        self._wake = threading.Event()
        self.thread_seen: threading.Thread | None = None

    def serve_once(self) -> None:
        self.thread_seen = threading.current_thread()
        if self.fail:
            raise ConnectionError("refused by the fake gateway")
        self.connected()
        self._wake.wait(60.0)

    def interrupt(self) -> None:
        self._wake.set()


class FakeChannel:
    """A channel with long connections and no ingress routes."""

    def __init__(self, name: str, *connections: LongConnection, close_gate: Any = None) -> None:
        self.name = name
        self.connections = connections
        self.delivery_health = DeliveryHealth()
        self.closed = False
        self.close_timeouts: list[float] = []
        self._gate = close_gate

    def close(self, timeout: float = 10.0) -> None:
        self.close_timeouts.append(timeout)
        if self._gate is not None:
            self._gate.wait(60.0)
        self.closed = True


def _get(app: Any, path: str = "/healthz") -> tuple[str, dict[str, Any]]:
    seen: dict[str, str] = {}
    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": path, "wsgi.input": io.BytesIO()}
    body = b"".join(app(environ, lambda status, headers: seen.update(status=status)))
    return seen["status"], json.loads(body)


def _config(tmp_path: Path, **server: Any) -> str:
    doc = {
        "channels": [{"platform": "telegram", "credentials": {"botToken": "123456:ABC-def"}}],
        "agent": {"type": "demo"},
        "options": {"logLevel": "WARNING"},
        "server": {"host": "127.0.0.1", "port": 0, **server},
    }
    path = tmp_path / "channelkit.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return str(path)


def test_serve_with_only_long_connection_channels_serves_the_health_endpoint_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    connection = FakeConnection("fake-gateway")
    channel = FakeChannel("fake", connection)
    monkeypatch.setattr("channelkit.config.build_channels", lambda config, bridge: [channel])
    monkeypatch.setattr(cli, "_pick_engine", lambda preferred: "waitress")
    seen: dict[str, Any] = {}

    def fake_run(engine: str, app: Any, host: str, port: int, threads: int) -> None:
        seen["routes"] = [path for path, _ in app.dispatcher.routes()]
        wait_until(lambda: connection.state().status == "connected", 10.0, what="connected")
        seen["health"] = _get(app)

    monkeypatch.setattr(cli, "run_server", fake_run)
    assert cli.main(["serve", "--config", _config(tmp_path), *NO_CHECKS]) == 0
    assert seen["routes"] == ["/healthz", "/metrics"]  # no ingress route of a channel
    status, report = seen["health"]
    assert status.startswith("200") and report["ok"] is True
    entry = report["channels"]["fake"]
    assert entry["ok"] is True and entry["closed"] is False
    assert [c["name"] for c in entry["connections"]] == ["fake-gateway"]
    assert entry["connections"][0]["status"] == "connected"
    assert entry["connections"][0]["attempt"] == 0
    assert entry["delivery"] == {"delivered": 0, "retried": 0, "failed": 0, "uncertain": 0}
    # the connection ran on its own thread, and the shutdown ended it and closed the channel
    assert connection.thread_seen is not None
    assert connection.thread_seen is not threading.main_thread()
    assert not connection.thread_seen.is_alive()
    assert connection.state().status == "stopped"
    assert channel.closed and channel.close_timeouts and channel.close_timeouts[0] <= 10.0
    assert "routes: /healthz" in capsys.readouterr().out


def test_healthz_answers_503_naming_the_reconnecting_connection_and_its_error() -> None:
    good = FakeConnection("good")
    bad = FakeConnection("bad", fail=True)
    service = ChannelService([FakeChannel("one", good), FakeChannel("two", bad)])
    app = create_wsgi_app(service.http_channels, health=service.health)
    service.start()
    try:
        wait_until(lambda: good.state().status == "connected", 10.0, what="good connected")
        wait_until(lambda: bad.state().status == "reconnecting", 10.0, what="bad reconnecting")
        status, report = _get(app)
        assert status.startswith("503") and report["ok"] is False
        assert report["channels"]["one"]["ok"] is True
        two = report["channels"]["two"]
        assert two["ok"] is False
        (state,) = two["connections"]
        assert state["status"] == "reconnecting" and state["attempt"] == 1
        assert state["last_error"] == "ConnectionError: refused by the fake gateway"
        assert isinstance(state["since"], float)
    finally:
        assert service.shutdown(5.0) is True
    status, report = _get(app)
    assert status.startswith("503")  # closed channels are not healthy
    assert report["channels"]["one"]["closed"] is True


def test_shutdown_leaves_no_thread_behind() -> None:
    before = set(threading.enumerate())
    connections = [FakeConnection(f"c{i}") for i in range(3)]
    channels = [FakeChannel("a", *connections[:2]), FakeChannel("b", connections[2])]
    service = ChannelService(channels)
    assert service.start() == connections
    wait_until(lambda: all(c.state().status == "connected" for c in connections), 10.0, what="up")
    assert service.shutdown(5.0) is True
    assert all(c.state().status == "stopped" for c in connections)
    assert all(ch.closed for ch in channels)
    wait_until(lambda: set(threading.enumerate()) <= before, 10.0, what="threads ended")


def test_a_channel_that_outlives_the_grace_period_makes_serve_exit_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    gate = threading.Event()
    stuck = FakeChannel("stuck", close_gate=gate)
    monkeypatch.setattr("channelkit.config.build_channels", lambda config, bridge: [stuck])
    monkeypatch.setattr(cli, "_pick_engine", lambda preferred: "waitress")
    monkeypatch.setattr(cli, "run_server", lambda *args: None)
    try:
        code = cli.main(["serve", "--config", _config(tmp_path), "--grace", "0.3", *NO_CHECKS])
        assert code == 1
        assert "still running after the 0.3 s grace period: stuck" in caplog.text
    finally:
        gate.set()
    wait_until(lambda: stuck.closed, 10.0, what="the stuck close to finish")


def test_the_grace_period_comes_from_the_configuration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    channel = FakeChannel("fake")
    monkeypatch.setattr("channelkit.config.build_channels", lambda config, bridge: [channel])
    monkeypatch.setattr(cli, "_pick_engine", lambda preferred: "waitress")
    monkeypatch.setattr(cli, "run_server", lambda *args: None)
    assert cli.main(["serve", "--config", _config(tmp_path, shutdownGraceS=2.5), *NO_CHECKS]) == 0
    assert 0 < channel.close_timeouts[0] <= 2.5
    assert channel.close_timeouts[0] > 1.0

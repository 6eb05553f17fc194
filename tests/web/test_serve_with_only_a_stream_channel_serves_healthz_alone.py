"""``channelkit serve`` with only a long-connection channel (DingTalk, ``"ingress":
"stream"``): the server it binds has one route, ``/healthz`` (every other path is 404:
no webhook is mounted, so none can be called), and ``/healthz`` reports the Stream
connection live: connected (200), reconnecting with the attempt and the last error while
the gateway refuses it (503), connected again once it is let back in. A real ``serve``
process against the DingTalk emulator's Stream gateway, 127.0.0.1 only."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from channelkit.playground import EmulatorServer
from channelkit.testing import wait_until
from dingtalk_serve import APP_KEY, APP_SECRET, CARD_SECRET, WAIT, healthz, start_serve

GRACE_S = 8.0


@pytest.fixture()
def emulator() -> Iterator[EmulatorServer]:
    server = EmulatorServer(app_key=APP_KEY, app_secret=APP_SECRET, api_secret=CARD_SECRET)
    try:
        yield server
    finally:
        server.close()


def _health_when(url: str, status: int, connection: str) -> dict[str, Any] | None:
    """The /healthz document once it answers ``status`` with the one connection in
    state ``connection``; else None."""
    code, report = healthz(url)
    (entry,) = report["channels"].values()
    (state,) = entry["connections"]
    return report if code == status and state["status"] == connection else None


def test_serve_with_only_a_stream_channel_serves_healthz_alone_and_reports_the_connection(
    tmp_path: Path, emulator: EmulatorServer
) -> None:
    pytest.importorskip("waitress")
    gateway = emulator.emulator.stream
    serve, url = start_serve(tmp_path, emulator, "stream", GRACE_S)
    try:
        assert any(
            line.rstrip().endswith("routes: /healthz, /metrics") for line in serve.stdout
        ), serve.stdout
        report = wait_until(
            lambda: _health_when(url, 200, "connected"),
            WAIT,
            0.05,
            what="/healthz: 200 with the Stream connection connected",
        )
        assert report["ok"] is True
        ((name, entry),) = report["channels"].items()
        assert entry["ok"] is True and entry["closed"] is False
        (state,) = entry["connections"]
        assert state["name"] == f"{name}-stream"
        assert state["attempt"] == 0 and state["last_error"] is None
        assert gateway.wait_connected(WAIT) and gateway.counts["connections"] == 1
        opens = emulator.emulator.calls("/v1.0/gateway/connections/open")
        assert len(opens) == 1 and opens[0]["body"]["clientId"] == APP_KEY

        # nothing but /healthz and /metrics is mounted: the HTTP ingress routes are absent
        for method, path in [
            ("GET", "/"),
            ("POST", "/dingtalk/robot"),
            ("POST", "/dingtalk/card"),
            ("GET", "/dingtalk/robot"),
            ("POST", "/webhook"),
        ]:
            answer = requests.request(method, f"{url}{path}", json={}, timeout=10)
            assert answer.status_code == 404, (method, path, answer.status_code)

        # the gateway drops the socket and refuses reconnects: 503, reconnecting, and why
        gateway.refuse_handshakes(1_000)
        assert gateway.drop()
        report = wait_until(
            lambda: _health_when(url, 503, "reconnecting"),
            WAIT,
            0.05,
            what="/healthz: 503 with the Stream connection reconnecting",
        )
        (entry,) = report["channels"].values()
        assert report["ok"] is False and entry["ok"] is False
        (state,) = entry["connections"]
        assert state["attempt"] >= 1 and state["last_error"], state
        assert "TransportError" in state["last_error"]
        assert APP_SECRET not in state["last_error"]

        # let it back in: connected again, healthy again
        gateway.refuse_handshakes(0)
        report = wait_until(
            lambda: _health_when(url, 200, "connected"),
            WAIT,
            0.05,
            what="/healthz: 200 again once the Stream connection reconnected",
        )
        (entry,) = report["channels"].values()
        assert entry["connections"][0]["attempt"] == 0
        # the bot sees the handshake done a moment before the gateway counts it
        assert gateway.wait_connected(WAIT, connections=2) and gateway.counts["connections"] == 2

        serve.signal(signal.SIGTERM)
        assert serve.wait(timeout=GRACE_S + 20) == 0, (serve.stdout, serve.stderr)
        assert "Traceback" not in "".join(serve.stderr), serve.stderr
    finally:
        serve.kill()

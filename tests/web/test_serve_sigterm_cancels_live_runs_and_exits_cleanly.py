"""``channelkit serve`` as a service: SIGTERM (like SIGINT) cancels the live run, the
DingTalk status card ends cancelled on the platform, and the process exits 0 within
the grace period. A real ``serve`` process, a real DingTalk emulator, 127.0.0.1 only."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from channelkit.playground import EmulatorServer
from channelkit.testing import wait_until
from serve_process import CommandProcess

APP_KEY = "ding-serve-app"
APP_SECRET = "ding-serve-secret"
CARD_SECRET = "ding-serve-card-secret"
GRACE_S = 8.0
HERE = Path(__file__).resolve().parent


@pytest.fixture()
def emulator() -> Iterator[EmulatorServer]:
    server = EmulatorServer(app_key=APP_KEY, app_secret=APP_SECRET, api_secret=CARD_SECRET)
    try:
        yield server
    finally:
        server.close()


def _config(tmp_path: Path, api_base_url: str) -> str:
    doc = {
        "channels": [
            {
                "platform": "dingtalk",
                "credentials": {
                    "clientId": APP_KEY,
                    "clientSecret": APP_SECRET,
                    "cardCallbackSecret": CARD_SECRET,
                },
                "options": {
                    "ingress": "http",
                    "cardCallbackRouteKey": "channelkit-serve-test",
                    "apiBaseUrl": api_base_url,
                    "interactiveCards": {"enabled": True},
                },
            }
        ],
        "agent": {"type": "function", "function": "slow_serve_agent:agent"},
        "options": {"logLevel": "WARNING"},
        "server": {"host": "127.0.0.1", "port": 0, "engine": "waitress"},
    }
    path = tmp_path / "channelkit.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return str(path)


def _status_cards(emulator: EmulatorServer) -> list[dict[str, Any]]:
    state = emulator.emulator.state()
    views = [state["views"][e["card"]] for e in state["timeline"] if e["kind"] == "card"]
    return [v for v in views if v["kind"] == "status"]


def _start_serve(tmp_path: Path, emulator: EmulatorServer) -> tuple[CommandProcess, str]:
    serve = CommandProcess(
        ["serve", "--config", _config(tmp_path, emulator.url), "--grace", str(GRACE_S)],
        pythonpath=[HERE],
    )
    found = serve.wait_for_line(r"listening on (http://127\.0\.0\.1:\d+)")
    url = found.group(1)
    emulator.emulator.robot_callback_url = f"{url}/dingtalk/robot"
    emulator.emulator.card_callback_url = f"{url}/dingtalk/card"
    return serve, url


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stop_signal_cancels_the_live_run_and_exits_zero_within_the_grace_period(
    signum: int, tmp_path: Path, emulator: EmulatorServer
) -> None:
    pytest.importorskip("waitress")
    serve, url = _start_serve(tmp_path, emulator)
    try:
        health = requests.get(f"{url}/healthz", timeout=10)
        assert health.status_code == 200 and health.json()["ok"] is True
        _, ack = emulator.emulator.send_user_message("please take your time")
        assert ack.status == 200, ack
        wait_until(
            lambda: any("Working on it." in c["content"] for c in _status_cards(emulator)),
            30.0,
            what="the live run's status card streaming",
        )
        (card,) = _status_cards(emulator)
        assert card["state"] not in ("cancelled", "completed"), card
        started = time.monotonic()
        serve.signal(signum)
        code = serve.wait(timeout=GRACE_S + 20)
        elapsed = time.monotonic() - started
        assert code == 0, (serve.stdout, serve.stderr)
        assert elapsed < GRACE_S, elapsed
        (final,) = _status_cards(emulator)
        assert final["state"] == "cancelled", final
        assert "Traceback" not in "".join(serve.stderr), serve.stderr
    finally:
        serve.kill()

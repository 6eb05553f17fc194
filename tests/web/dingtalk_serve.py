"""``channelkit serve`` as a real process with one DingTalk channel, against the playground
DingTalk emulator on 127.0.0.1, receiving either by ``"ingress": "http"`` (the emulator
posts signed callbacks to the serve process) or ``"ingress": "stream"`` (the serve
process connects out to the emulator's Stream gateway; the emulator's URL is the API
base URL, so ``POST /v1.0/gateway/connections/open`` goes there).

:class:`StreamCloses` records how each Stream connection ended on the gateway's side (its
WebSocket close code: 1000 when the bot closed it with a close frame, 1006 when the
socket just died, e.g. with the process).
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import requests
from channelkit.playground import EmulatorServer
from serve_process import CommandProcess

APP_KEY = "ding-serve-app"
APP_SECRET = "ding-serve-secret"
CARD_SECRET = "ding-serve-card-secret"
HERE = Path(__file__).resolve().parent
#: generous: the suite runs on a loaded 2-core machine
WAIT = 30.0


def write_config(tmp_path: Path, api_base_url: str, ingress: str) -> str:
    """The configuration file of one DingTalk channel with the slow agent."""
    options: dict[str, Any] = {
        "ingress": ingress,
        "apiBaseUrl": api_base_url,
        "interactiveCards": {"enabled": True},
    }
    if ingress == "http":
        options["cardCallbackRouteKey"] = "channelkit-serve-test"
    doc = {
        "channels": [
            {
                "platform": "dingtalk",
                "credentials": {
                    "clientId": APP_KEY,
                    "clientSecret": APP_SECRET,
                    "cardCallbackSecret": CARD_SECRET,
                },
                "options": options,
            }
        ],
        "agent": {"type": "function", "function": "slow_serve_agent:agent"},
        "options": {"logLevel": "WARNING"},
        "server": {"host": "127.0.0.1", "port": 0, "engine": "waitress"},
    }
    path = tmp_path / "channelkit.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return str(path)


def start_serve(
    tmp_path: Path, emulator: EmulatorServer, ingress: str, grace: float
) -> tuple[CommandProcess, str]:
    """Start ``channelkit serve``; ``(process, its base URL)`` once it listens. The caller
    kills the process in a finally."""
    serve = CommandProcess(
        [
            "serve",
            "--config",
            write_config(tmp_path, emulator.url, ingress),
            "--grace",
            str(grace),
        ],
        pythonpath=[HERE],
    )
    try:
        found = serve.wait_for_line(r"listening on (http://127\.0\.0\.1:\d+)")
    except BaseException:
        serve.kill()
        raise
    url = found.group(1)
    if ingress == "http":
        emulator.emulator.robot_callback_url = f"{url}/dingtalk/robot"
        emulator.emulator.card_callback_url = f"{url}/dingtalk/card"
    return serve, url


def healthz(url: str) -> tuple[int, dict[str, Any]]:
    """``GET /healthz`` of the serve process: (status, document)."""
    response = requests.get(f"{url}/healthz", timeout=10)
    return response.status_code, response.json()


def stream_connections(url: str) -> list[dict[str, Any]]:
    """The long connections ``/healthz`` reports, over every channel."""
    _, report = healthz(url)
    return [c for entry in report["channels"].values() for c in entry["connections"]]


def emulator_callbacks(emulator: EmulatorServer) -> list[dict[str, Any]]:
    """``GET /_emulator/callbacks``: every delivery to the SDK with its transport."""
    response = requests.get(f"{emulator.url}/_emulator/callbacks", timeout=10)
    response.raise_for_status()
    return list(response.json()["callbacks"])


def status_cards(emulator: EmulatorServer) -> list[dict[str, Any]]:
    """The status cards the bot created, as the emulator renders them (oldest first)."""
    state = emulator.emulator.state()
    views = [state["views"][e["card"]] for e in state["timeline"] if e["kind"] == "card"]
    return [v for v in views if v["kind"] == "status"]


class StreamCloses:
    """How each Stream connection ended, as the gateway saw it: its WebSocket close code
    (None while the closing handshake is still settling).

    Wraps the gateway's per-connection handler; install it before the bot first connects
    (the WebSocket server is created on the first ``connections/open``).
    """

    def __init__(self, emulator: EmulatorServer) -> None:
        gateway = emulator.emulator.stream
        self._lock = threading.Lock()
        self._ended: list[Any] = []
        handle = gateway._handle

        def recording(connection: Any) -> None:
            try:
                handle(connection)
            finally:
                with self._lock:
                    self._ended.append(connection)

        gateway._handle = recording

    def codes(self) -> list[int | None]:
        """The close codes of the connections that ended (oldest first)."""
        with self._lock:
            return [connection.close_code for connection in self._ended]

"""One ``channelkit serve`` process (a real subprocess, 127.0.0.1 only) runs ONE
configuration holding every registered chat platform, each pointed at its playground
emulator (an ``EmulatorServer`` per platform; the API base URL option and the
credentials come from the platform's ``playground`` entry in the registry).
``/healthz`` lists every channel, healthy, with its long connections connected; a
person's message on each platform reaches the agent as that platform's session, and the
agent's answer comes back to that platform's chat.

The platforms and their ingress modes are read from ``channelkit.platforms.PLATFORMS``:
a platform registered later joins this test without an edit (its default ingress is
used unless :data:`INGRESS` picks another)."""

from __future__ import annotations

import json
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from channelkit.platforms import PlatformSpec, chat_platforms
from channelkit.playground import EmulatorServer
from channelkit.testing import wait_until
from serve_process import CommandProcess

HERE = Path(__file__).resolve().parent
WAIT = 45.0  # generous: five channels and five emulators on a loaded 2-core machine
GRACE_S = 10.0

#: The ingress each platform uses here when not its default: long connections where the
#: platform has one (no callback URL to wire), and Slack over the Events API so that one
#: webhook channel shares the WSGI server with /healthz.
INGRESS = {"dingtalk": "stream", "feishu": "websocket", "slack": "events"}


def _point_slack_at(emulator: Any, url: str) -> None:
    emulator.events_url = f"{url}/slack/events"
    emulator.interactivity_url = f"{url}/slack/interactivity"


#: (platform, ingress) -> how the emulator learns the serve process's URL (HTTP ingress)
CALLBACKS: dict[tuple[str, str], Callable[[Any, str], None]] = {
    ("slack", "events"): _point_slack_at,
}
#: emulator keyword arguments per platform (how the emulator delivers to the bot). The
#: Weixin emulator holds an idle getupdates 2 s instead of 25: a polling connection counts
#: as connected once its first poll has returned, so /healthz would answer 503 for the
#: whole first hold.
EMULATOR_OPTIONS: dict[str, dict[str, Any]] = {
    "slack": {"ingress": "events"},
    "weixin": {"hold_seconds": 2.0},
}

#: ingress modes where the channel connects out to the emulator (no callback URL to wire)
LONG_CONNECTIONS = ("stream", "websocket", "polling", "socket", "gateway")
#: further channel options per platform: where its long connection goes
CONNECT_OPTIONS: dict[str, Callable[[Any], dict[str, Any]]] = {
    "discord": lambda emulator: {"gatewayUrl": emulator.gateway.url},
}

#: chat platforms without an emulator yet (they cannot join a message round trip)
WITHOUT_EMULATOR: frozenset[str] = frozenset()


def _served() -> list[PlatformSpec]:
    return [spec for spec in chat_platforms() if spec.playground is not None]


def _ingress(spec: PlatformSpec) -> str:
    mode = INGRESS.get(spec.name, spec.default_ingress)
    assert mode in spec.ingress, (spec.name, mode)
    if mode not in LONG_CONNECTIONS:
        assert (spec.name, mode) in CALLBACKS, f"{spec.name}: wire its {mode} callbacks here"
    return str(mode)


@pytest.fixture()
def emulators() -> Iterator[dict[str, EmulatorServer]]:
    started: dict[str, EmulatorServer] = {}
    try:
        for spec in _served():
            started[spec.name] = EmulatorServer(
                platform=spec.name, **EMULATOR_OPTIONS.get(spec.name, {})
            )
        yield started
    finally:
        for server in started.values():
            server.close()


def _write_config(tmp_path: Path, emulators: dict[str, EmulatorServer]) -> str:
    channels = []
    for spec in _served():
        defaults = spec.playground
        assert defaults is not None
        channels.append(
            {
                "platform": spec.name,
                "credentials": dict(defaults.credentials),
                "options": {
                    defaults.api_base_url_option: emulators[spec.name].url,
                    "ingress": _ingress(spec),
                    **CONNECT_OPTIONS.get(spec.name, lambda _: {})(emulators[spec.name].emulator),
                },
            }
        )
    doc = {
        "channels": channels,
        "agent": {"type": "function", "function": "recording_serve_agent:agent"},
        "options": {"logLevel": "WARNING"},
        "server": {"host": "127.0.0.1", "port": 0, "engine": "waitress"},
    }
    path = tmp_path / "channelkit.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return str(path)


def _healthy(url: str, names: set[str]) -> dict[str, Any] | None:
    response = requests.get(f"{url}/healthz", timeout=10)
    report: dict[str, Any] = response.json()
    channels = report.get("channels", {})
    if response.status_code != 200 or set(channels) != names:
        return None
    for entry in channels.values():
        if not entry["ok"] or any(c["status"] != "connected" for c in entry["connections"]):
            return None
    return report


def _prompts(record: Path) -> list[dict[str, str]]:
    if not record.exists():
        return []
    lines = record.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def test_serve_runs_every_registered_chat_platform_against_its_emulator(
    tmp_path: Path, emulators: dict[str, EmulatorServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("waitress")
    served = {spec.name for spec in _served()}
    chat = {spec.name for spec in chat_platforms()}
    # every chat platform takes part, except those named as lacking an emulator
    assert chat - served == set(WITHOUT_EMULATOR), chat - served
    assert {"dingtalk", "feishu", "telegram", "slack", "weixin"} <= served
    record = tmp_path / "prompts.jsonl"
    monkeypatch.setenv("CHANNELKIT_TEST_RECORD", str(record))
    serve = CommandProcess(
        ["serve", "--config", _write_config(tmp_path, emulators), "--grace", str(GRACE_S)],
        pythonpath=[HERE],
    )
    try:
        url = serve.wait_for_line(r"listening on (http://127\.0\.0\.1:\d+)", WAIT).group(1)
        for spec in _served():
            wire = CALLBACKS.get((spec.name, _ingress(spec)))
            if wire is not None:
                wire(emulators[spec.name].emulator, url)
        report = wait_until(
            lambda: _healthy(url, served), WAIT, 0.1, what="/healthz: every channel connected"
        )
        assert report["ok"] is True
        long_connections = {
            name for name, entry in report["channels"].items() if entry["connections"]
        }
        assert long_connections == {
            spec.name for spec in _served() if _ingress(spec) not in ("events", "http", "webhook")
        }

        for name in sorted(served):
            text = f"hello {name} 4711"
            emulators[name].emulator.send_user_message(text)
            prompt = wait_until(
                lambda t=text: next((p for p in _prompts(record) if p["text"] == t), None),
                WAIT,
                0.05,
                what=f"the agent to receive the {name} message",
            )
            assert prompt["session_id"].startswith(f"{name}-"), prompt
            answer = text[::-1]
            wait_until(
                lambda e=emulators[name], a=answer: a in json.dumps(e.emulator.state()),
                WAIT,
                0.05,
                what=f"the agent's answer in the {name} chat",
            )
        assert sorted(p["session_id"].split("-", 1)[0] for p in _prompts(record)) == sorted(served)

        serve.signal(signal.SIGTERM)
        assert serve.wait(timeout=GRACE_S + 20) == 0, (serve.stdout, serve.stderr)
        assert "Traceback" not in "".join(serve.stderr), serve.stderr
    finally:
        serve.kill()

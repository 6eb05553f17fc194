"""A Telegram token revoked while ``channelkit serve`` runs (the emulator starts answering
``getUpdates`` with 401) turns ``/healthz`` to 503 naming the refused credentials, and the
log says so once at ERROR instead of a reconnect warning per attempt (the polling
connection backs off by a minute: see
tests/platforms/common/test_a_credential_revoked_while_running_turns_healthz_503_and_backs_off_quietly.py
for the backoff and the log cadence on a fake clock). A real serve process on 127.0.0.1
against the Telegram emulator."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest
import requests
from channelkit.playground import EmulatorServer
from channelkit.testing import wait_until
from serve_process import CommandProcess

WAIT = 30.0


def _report(url: str) -> tuple[int, dict[str, Any]]:
    response = requests.get(f"{url}/healthz", timeout=10)
    return response.status_code, response.json()


def test_a_revoked_token_turns_healthz_503_with_the_reason(tmp_path: Path) -> None:
    pytest.importorskip("waitress")
    with EmulatorServer(platform="telegram") as telegram:
        doc = {
            "channels": [
                {
                    "platform": "telegram",
                    "credentials": {"botToken": telegram.emulator.bot_token},
                    # a short long-poll, so the revocation is seen within a second
                    "options": {"apiBaseUrl": telegram.url, "pollingTimeoutS": 1},
                }
            ],
            "agent": {"type": "demo"},
            "options": {"logLevel": "INFO"},
            "server": {"host": "127.0.0.1", "port": 0, "engine": "waitress"},
        }
        config = tmp_path / "channelkit.json"
        config.write_text(json.dumps(doc), encoding="utf-8")
        serve = CommandProcess(["serve", "--config", str(config), "--grace", "5"])
        try:
            url = serve.wait_for_line(r"listening on (http://127\.0\.0\.1:\d+)", WAIT).group(1)
            wait_until(lambda: _report(url)[0] == 200, WAIT, 0.1, what="/healthz 200")

            telegram.emulator.bot_token = "123456:another-token"  # revoked: 401 from now on
            status, report = wait_until(
                lambda: (lambda r: r if r[0] == 503 else None)(_report(url)),
                WAIT,
                0.1,
                what="/healthz 503 after the revocation",
            )
            (connection,) = report["channels"]["telegram"]["connections"]
            assert connection["status"] == "reconnecting"
            assert connection["last_error"].startswith(
                "credentials refused by the platform: AuthError: Unauthorized (HTTP 401"
            ), connection
            assert "playground-bot-token" not in json.dumps(report)

            serve.signal(signal.SIGTERM)
            assert serve.wait(timeout=30) == 0, (serve.stdout, serve.stderr)
        finally:
            serve.kill()
    log = "".join(serve.stderr)
    refused = [line for line in serve.stderr if "refused the credentials" in line]
    assert len(refused) == 1, log
    assert " ERROR " in refused[0] and "/healthz answers 503" in refused[0]
    assert "connection failed (AuthError)" not in log
    assert "playground-bot-token" not in log

"""Pairing with the in-memory store: the serving process's local admin endpoint (127.0.0.1,
a bearer token) lets ``channelkit pairing --admin-port N`` list and answer the codes; a
wrong token is refused; ``serve --admin-port N`` starts it, and a stranger's message to
the running serve gets a code the command approves once."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any

import pytest
import requests
from channelkit.cli import main
from channelkit.core.access import AccessConfig
from channelkit.playground import Playground
from channelkit.web.admin import ADMIN_TOKEN_ENV, AdminEndpoint
from serve_process import CommandProcess

TOKEN = "admin-token-for-tests-0123456789"
WEBHOOK_SECRET = "webhook-secret-for-tests"


def _config(tmp_path: Path) -> str:
    document = {
        "channels": [
            {
                "platform": "telegram",
                "credentials": {"botToken": "123456:ABC"},
                "options": {
                    "ingress": "webhook",
                    "apiBaseUrl": "http://127.0.0.1:9",
                    "webhookSecret": WEBHOOK_SECRET,
                },
                "access": {"dm": "pairing"},
            }
        ]
    }
    path = tmp_path / "bot.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return str(path)


def _wait(predicate: Any, what: str, timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)
    return value


def test_the_cli_answers_a_code_through_the_admin_endpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _config(tmp_path)
    options = {"access": AccessConfig(dm="pairing")}
    with Playground(platform="telegram", channel_options=options) as pg:
        sent = requests.post(
            f"{pg.url}/_emulator/send", json={"text": "hi", "userId": "777"}, timeout=5
        )
        assert sent.status_code == 200
        gate = pg.channel.access
        (request,) = _wait(gate.pairing_codes, "a pairing code")
        with AdminEndpoint([pg.channel], TOKEN) as admin:
            assert admin.url.startswith("http://127.0.0.1:")
            argv = ["pairing", "--config", config, "--admin-port", str(admin.port)]
            monkeypatch.setenv(ADMIN_TOKEN_ENV, "wrong-token-0123456789")
            assert main([*argv, "list"]) == 2
            assert "refused the token" in capsys.readouterr().err
            monkeypatch.setenv(ADMIN_TOKEN_ENV, TOKEN)
            assert main([*argv, "list"]) == 0
            assert request.code in capsys.readouterr().out
            assert main([*argv, "approve", request.code]) == 0
            assert "approved" in capsys.readouterr().out
            assert gate.allowed_user("777")  # the running channel admits them now
            assert main([*argv, "approve", request.code]) == 1  # once
            assert "no such code" in capsys.readouterr().err
            assert main([*argv, "revoke", "777"]) == 0
            assert not gate.allowed_user("777")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_serve_starts_the_admin_endpoint_with_its_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _config(tmp_path)
    admin_port, web_port = _free_port(), _free_port()
    monkeypatch.setenv(ADMIN_TOKEN_ENV, TOKEN)
    serve = CommandProcess(
        [
            "serve",
            "--config",
            config,
            "--host",
            "127.0.0.1",
            "--port",
            str(web_port),
            "--skip-startup-checks",
            "--admin-port",
            str(admin_port),
        ]
    )
    try:
        serve.wait_for_line(rf"admin endpoint on http://127\.0\.0\.1:{admin_port}", timeout=60)
        # the admin endpoint starts before the web server binds: wait for both
        serve.wait_for_line(rf"listening on http://127\.0\.0\.1:{web_port}", timeout=60)
        argv = ["pairing", "--config", config, "--admin-port", str(admin_port)]
        assert main([*argv, "list"]) == 0
        assert "no pairing requests waiting" in capsys.readouterr().out
        refused = requests.get(f"http://127.0.0.1:{admin_port}/pairing/telegram", timeout=5)
        assert refused.status_code == 401
        # a stranger writes to the running bot (a Telegram webhook update): a code waits
        update = {
            "update_id": 1,
            "message": {
                "message_id": 1,
                "from": {"id": 777, "is_bot": False, "first_name": "Stranger"},
                "chat": {"id": 777, "type": "private"},
                "date": int(time.time()),
                "text": "hello?",
            },
        }
        answer = requests.post(
            f"http://127.0.0.1:{web_port}/telegram/webhook",
            json=update,
            headers={"X-Telegram-Bot-Api-Secret-Token": WEBHOOK_SECRET},
            timeout=10,
        )
        assert answer.status_code == 200

        def listed() -> str:
            main([*argv, "list"])
            out = capsys.readouterr().out
            return out if "user=777" in out else ""

        code = _wait(listed, "the stranger's pairing code").split()[0]
        assert main([*argv, "approve", code]) == 0
        assert f"approved {code}: user 777" in capsys.readouterr().out
        assert main([*argv, "approve", code]) == 1  # a used code cannot be reused
    finally:
        serve.proc.terminate()
        serve.proc.wait(30)


def test_serve_refuses_an_admin_port_without_a_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv(ADMIN_TOKEN_ENV, raising=False)
    code = main(["serve", "--config", _config(tmp_path), "--admin-port", "0"])
    assert code == 2
    assert ADMIN_TOKEN_ENV in capsys.readouterr().err

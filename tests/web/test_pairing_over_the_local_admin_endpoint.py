"""Pairing with the in-memory store: the serving process's local admin endpoint (127.0.0.1,
a bearer token) lets ``channelkit pairing --admin-port N`` list and answer the codes; a
wrong token is refused; ``serve --admin-port N`` starts it."""

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


def _config(tmp_path: Path) -> str:
    document = {
        "channels": [
            {
                "platform": "telegram",
                "credentials": {"botToken": "123456:ABC"},
                "options": {"ingress": "webhook", "apiBaseUrl": "http://127.0.0.1:9"},
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
    admin_port = _free_port()
    monkeypatch.setenv(ADMIN_TOKEN_ENV, TOKEN)
    serve = CommandProcess(
        [
            "serve",
            "--config",
            config,
            "--host",
            "127.0.0.1",
            "--port",
            str(_free_port()),
            "--skip-startup-checks",
            "--admin-port",
            str(admin_port),
        ]
    )
    try:
        serve.wait_for_line(rf"admin endpoint on http://127\.0\.0\.1:{admin_port}", timeout=60)
        argv = ["pairing", "--config", config, "--admin-port", str(admin_port), "list"]
        assert main(argv) == 0
        assert "no pairing requests waiting" in capsys.readouterr().out
        refused = requests.get(f"http://127.0.0.1:{admin_port}/pairing/telegram", timeout=5)
        assert refused.status_code == 401
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

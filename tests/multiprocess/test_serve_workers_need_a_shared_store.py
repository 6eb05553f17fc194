"""``channelkit serve --workers N``: refused with one line without a shared state store;
with ``state.redis`` N processes serve one port (each holds its own lease in Redis, named
``<instanceName>-w<i>``) and SIGTERM stops them all, exit 0."""

from __future__ import annotations

import json
import signal
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest
from channelkit import cli
from channelkit.state import open_store
from channelkit.testing import wait_until

from tests.web.serve_process import CommandProcess

ROOT = Path(__file__).resolve().parents[2]

DINGTALK = {
    "platform": "dingtalk",
    "name": "helpdesk",
    "credentials": {
        "clientId": "ding-app",
        "clientSecret": "ding-secret",
        "cardCallbackSecret": "card-secret",
    },
    "options": {
        "ingress": "http",
        "cardCallbackRouteKey": "helpdesk-cards",
        "apiBaseUrl": "http://127.0.0.1:9",
        "interactiveCards": {"enabled": True},
    },
}


def write(tmp_path: Path, state: Any = None) -> Path:
    doc: dict[str, Any] = {"channels": [DINGTALK], "agent": {"type": "demo"}}
    if state is not None:
        doc["state"] = state
    path = tmp_path / "channelkit.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def test_several_workers_without_a_shared_store_are_refused_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = cli.main(["serve", "--config", str(write(tmp_path)), "--workers", "2"])
    err = capsys.readouterr().err
    assert status == 2
    assert err.count("\n") == 1, err
    assert "--workers 2 needs a shared state store" in err and "state.redis" in err


def test_several_workers_without_waitress_name_the_serve_extra(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    redis_server: Any,
) -> None:
    monkeypatch.setattr(cli, "_pick_engine", lambda preferred: None)
    path = write(tmp_path, {"redis": {"url": redis_server.url}})
    status = cli.main(["serve", "--config", str(path), "--workers", "3"])
    err = capsys.readouterr().err
    assert status == 3
    assert err.count("\n") == 1, err
    assert "channelkit[serve]" in err


def start_two_workers(tmp_path: Path, redis_url: str, namespace: str) -> CommandProcess:
    """``channelkit serve --workers 2`` on port 0 with ``state.redis`` (``namespace``),
    its output read on threads (never a full pipe)."""
    state = {
        "redis": {"url": redis_url, "namespace": namespace},
        "instanceName": "bot",
        "leaseRenewSeconds": 1,
        "leaseExpirySeconds": 5,
    }
    path = write(tmp_path, state)
    # the grace bounds the shutdown, which takes well under a second here (it passes with
    # 0.3 s); on a machine running every tox environment at once (load 10 on 2 cores) a
    # starved worker took over 5 s and exited 1 ("still running after the grace period")
    argv = ["serve", "--config", str(path), "--workers", "2", "--port", "0", "--grace", "25"]
    argv.append("--skip-startup-checks")  # made-up credentials: nothing to ask a platform
    return CommandProcess(argv, pythonpath=[ROOT / "sdk"])


def serving_at(proc: CommandProcess) -> str:
    """The URL ``serve --workers 2`` prints first (once its socket is bound)."""
    return proc.wait_for_line(r"2 workers on (http://127\.0\.0\.1:\d+)").group(1)


def stops_cleanly_on_sigterm(proc: CommandProcess) -> None:
    """SIGTERM ``serve``: it exits 0 (else the failure shows the workers' log)."""
    proc.signal(signal.SIGTERM)
    status = proc.wait(60)  # beyond the workers' grace
    assert status == 0, "".join(proc.stderr)[-4000:]


def test_a_sigterm_while_the_workers_start_stops_serve_cleanly(
    tmp_path: Path, redis_server: Any
) -> None:
    """SIGTERM as soon as ``serve`` prints its address: the workers are still starting
    (importing, before they handle the signal) and end by that SIGTERM. That is a clean
    stop (exit 0): they had built nothing to close. It was exit 1."""
    proc = start_two_workers(tmp_path, redis_server.url, f"early-{uuid.uuid4().hex[:8]}")
    try:
        serving_at(proc)
        stops_cleanly_on_sigterm(proc)
    finally:
        proc.kill()


def test_two_workers_share_one_port_and_the_store_and_stop_on_sigterm(
    tmp_path: Path, redis_server: Any
) -> None:
    namespace = f"workers-{uuid.uuid4().hex[:8]}"
    proc = start_two_workers(tmp_path, redis_server.url, namespace)
    store = open_store({"redis": {"url": redis_server.url, "namespace": namespace}})
    try:
        url = serving_at(proc)

        def leases() -> list[Any]:
            return [store.get(k) for k in store.scan("helpdesk:lease:")]

        wait_until(lambda: len(leases()) == 2, timeout=60, what="two leases")
        assert sorted(lease["name"] for lease in leases()) == ["bot-w0", "bot-w1"]

        def healthy() -> bool:
            try:
                with urllib.request.urlopen(url + "/healthz", timeout=5) as response:
                    return bool(response.status == 200)
            except OSError:
                return False

        for _ in range(6):  # the shared socket answers, whichever worker accepts
            wait_until(healthy, timeout=30, what="/healthz answers")
        # SIGTERM once both serve (a worker still starting is not what this stops)
        for _ in range(2):
            proc.wait_for_line("waitress listening")
        stops_cleanly_on_sigterm(proc)
    finally:
        proc.kill()
        store.close()

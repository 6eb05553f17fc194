"""``channelkit serve --workers N``: refused with one line without a shared state store;
with ``state.redis`` N processes serve one port (each holds its own lease in Redis, named
``<instanceName>-w<i>``) and SIGTERM stops them all, exit 0."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest
from channelkit import cli
from channelkit.state import open_store
from channelkit.testing import wait_until

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


def read_lines(stream: Any, count: int, marker: str, timeout: float) -> list[str]:
    """Read ``stream`` (a text pipe, perhaps with lines already buffered) on a thread
    until ``count`` lines containing ``marker`` came or ``timeout`` seconds passed;
    returns those lines."""
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        for line in stream:
            lines.put(line)

    threading.Thread(target=pump, daemon=True).start()
    found: list[str] = []
    deadline = time.monotonic() + timeout
    while len(found) < count and time.monotonic() < deadline:
        try:
            line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            break
        if marker in line:
            found.append(line.strip())
    return found


def start_two_workers(tmp_path: Path, redis_url: str, namespace: str) -> subprocess.Popen[str]:
    """``channelkit serve --workers 2`` on port 0 with ``state.redis`` (``namespace``);
    the workers' logs go to ``tmp_path/serve.log`` (never a full pipe)."""
    state = {
        "redis": {"url": redis_url, "namespace": namespace},
        "instanceName": "bot",
        "leaseRenewSeconds": 1,
        "leaseExpirySeconds": 5,
    }
    path = write(tmp_path, state)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "sdk")}
    argv = ["serve", "--config", str(path), "--workers", "2", "--port", "0", "--grace", "5"]
    argv.append("--skip-startup-checks")  # made-up credentials: nothing to ask a platform
    with (tmp_path / "serve.log").open("w") as log:  # the child keeps its own descriptor
        return subprocess.Popen(
            [sys.executable, "-m", "channelkit", *argv],
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            env=env,
        )


def serving_at(proc: subprocess.Popen[str]) -> str:
    """The URL ``serve --workers 2`` prints first (once its socket is bound)."""
    assert proc.stdout is not None
    first = proc.stdout.readline()
    assert "2 workers on http://127.0.0.1:" in first, first
    return first.strip().rsplit(" ", 1)[-1]


def stops_cleanly_on_sigterm(proc: subprocess.Popen[str], tmp_path: Path) -> None:
    """SIGTERM ``serve``: it exits 0 (else the failure shows the workers' log)."""
    proc.send_signal(signal.SIGTERM)
    status = proc.wait(30)
    assert status == 0, (tmp_path / "serve.log").read_text(errors="replace")[-4000:]


def killed(proc: subprocess.Popen[str]) -> None:
    """Kill ``proc`` if it still runs (a failed test's cleanup)."""
    if proc.poll() is None:
        proc.kill()
        proc.wait(10)


def test_a_sigterm_while_the_workers_start_stops_serve_cleanly(
    tmp_path: Path, redis_server: Any
) -> None:
    """SIGTERM as soon as ``serve`` prints its address: the workers are still starting
    (importing, before they handle the signal) and end by that SIGTERM. That is a clean
    stop (exit 0): they had built nothing to close. It was exit 1."""
    proc = start_two_workers(tmp_path, redis_server.url, f"early-{uuid.uuid4().hex[:8]}")
    try:
        serving_at(proc)
        stops_cleanly_on_sigterm(proc, tmp_path)
    finally:
        killed(proc)


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
        serving = read_lines(proc.stdout, 2, "waitress listening", 60)
        assert len(serving) == 2, serving
        stops_cleanly_on_sigterm(proc, tmp_path)
    finally:
        killed(proc)
        store.close()

"""Issue 7 acceptance, README: the README's first command starts the playground with no
configuration. The part after ``pip install ... &&`` is run exactly as written, as the
installed console script in a child process: it prints a free port on 127.0.0.1, serves the
page, answers ``GET /_emulator/calls`` and runs the demo agent when a message is sent."""

from __future__ import annotations

import os
import queue
import re
import shlex
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

ROOT = Path(__file__).resolve().parents[2]
STARTUP_TIMEOUT = 30.0


def _readme_run_command() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```sh\n(.*?)```", text, flags=re.S)
    first = blocks[0].strip().splitlines()[0]
    install, _, run = first.partition("&&")
    assert "pip install" in install and run.strip(), first
    return shlex.split(run.strip())


def _console_script(name: str) -> str:
    beside = Path(sys.executable).parent / name
    if beside.exists():
        return str(beside)
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"console script {name!r} is not installed (pip install -e . installs it)")
    return found


@pytest.fixture()
def started() -> Iterator[tuple[str, list[str]]]:
    argv = _readme_run_command()
    assert argv == ["channelkit", "playground"], argv  # no configuration, no options
    argv[0] = _console_script(argv[0])
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        cwd=ROOT,
    )
    lines: queue.Queue[str] = queue.Queue()
    seen: list[str] = []

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT
        url = None
        while url is None:
            left = deadline - time.monotonic()
            if left <= 0 or proc.poll() is not None:
                pytest.fail("the playground printed no URL:\n" + "".join(seen))
            try:
                line = lines.get(timeout=min(left, 1.0))
            except queue.Empty:
                continue
            seen.append(line)
            match = re.search(r"http://127\.0\.0\.1:(\d+)", line)
            if match:
                url = match.group(0)
        yield url, seen
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        reader.join(timeout=5)


def _state(url: str, since: int = -1) -> dict[str, Any]:
    # with ``since``, the emulator long-polls until its version moves past it (or 0.5 s)
    query = f"?since={since}&wait=0.5" if since >= 0 else ""
    state: dict[str, Any] = requests.get(f"{url}/_emulator/state{query}", timeout=5).json()
    return state


def _kinds(state: dict[str, Any]) -> list[str]:
    cards = [state["views"][e["card"]] for e in state["timeline"] if e["kind"] == "card"]
    return [str(c["kind"]) for c in cards]


def test_readme_command_starts_the_playground_without_configuration(
    started: tuple[str, list[str]],
) -> None:
    url, output = started
    port = int(url.rsplit(":", 1)[1])
    assert port > 0  # a free port was chosen and printed
    page = requests.get(f"{url}/", timeout=5)
    assert page.status_code == 200 and "channelkit playground" in page.text
    calls = requests.get(f"{url}/_emulator/calls", timeout=5)
    assert calls.status_code == 200 and isinstance(calls.json()["calls"], list)
    assert "demo agent" in "".join(output)
    # The built-in demo agent answers: a status card appears and then the question form.
    sent = requests.post(f"{url}/_emulator/send", json={"text": "hello"}, timeout=5)
    assert sent.status_code == 200 and sent.json()["status"] == 200
    deadline = time.monotonic() + 15
    state = _state(url)
    while "question" not in _kinds(state) and time.monotonic() < deadline:
        state = _state(url, since=int(state["version"]))
    assert _kinds(state)[:2] == ["status", "question"], _kinds(state)
    recorded = requests.get(f"{url}/_emulator/calls", timeout=5).json()["calls"]
    assert any(c["path"] == "/v1.0/card/instances/createAndDeliver" for c in recorded)

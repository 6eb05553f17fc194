"""Install a built wheel into a fresh virtualenv and hold one playground conversation with it.

Run by ``tox -e package`` after ``python -m build`` (not collected by pytest: the file name
does not start with ``test_``)::

    python tests/packaging/smoke_wheel.py dist/

It creates a virtualenv outside the checkout, installs only the wheel (its dependencies
come from the package index), starts ``channelkit playground`` from that virtualenv on a
free port with the working directory outside the checkout, and then, over HTTP with the
emulator's control API: loads the chat page, sends a message, waits for the question
card, submits it and waits for the continuation card to complete. Exit status 0 means
the wheel works on its own. Standard library only.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import venv
from pathlib import Path
from typing import Any

TIMEOUT = 60.0


def _bin(env: Path, name: str) -> Path:
    scripts = env / ("Scripts" if os.name == "nt" else "bin")
    return scripts / (name + (".exe" if os.name == "nt" else ""))


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _request(url: str, body: dict[str, Any] | None = None) -> Any:
    data = None if body is None else json.dumps(body).encode("utf-8")
    request = urllib.request.Request(url, data=data, method="GET" if data is None else "POST")
    if data is not None:
        request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=10) as response:
        raw = response.read()
        if response.headers.get_content_type() == "application/json":
            return json.loads(raw)
        return raw.decode("utf-8", "replace")


def _wait(predicate: Any, what: str) -> Any:
    deadline = time.monotonic() + TIMEOUT
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise SystemExit(f"smoke: timed out waiting for {what}")
        time.sleep(0.05)


def _cards(base: str) -> list[dict[str, Any]]:
    state = _request(f"{base}/_emulator/state")
    return [state["views"][e["card"]] for e in state["timeline"] if e["kind"] == "card"]


def converse(base: str) -> None:
    """One conversation with the demo agent: message, question card, submit, completion."""
    page = _request(f"{base}/")
    assert "<html" in page.lower(), "the chat page (package data) is missing"
    sent = _request(f"{base}/_emulator/send", {"text": "hello"})
    assert sent["status"] == 200, sent
    question = _wait(
        lambda: next((c for c in _cards(base) if c["kind"] == "question"), None),
        "the question card",
    )
    form = {"0": "Green", "1": ["Cheese", "Basil"]}

    def submitted() -> bool:
        clicked = _request(
            f"{base}/_emulator/cards/{question['id']}/action", {"action": "submit", "form": form}
        )
        assert clicked["status"] == 200, clicked
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            if _request(f"{base}/_emulator/state")["views"][question["id"]]["state"] == "submitted":
                return True
            time.sleep(0.05)
        return False

    _wait(submitted, "the question card to be submitted")

    def continuation() -> dict[str, Any] | None:
        cards = _cards(base)
        index = next(i for i, c in enumerate(cards) if c["id"] == question["id"])
        return next(
            (c for c in cards[index + 1 :] if c["kind"] == "status" and c["state"] == "completed"),
            None,
        )

    final = _wait(continuation, "the continuation card to complete")
    assert "Green" in final["content"], final
    print(f"smoke: conversation completed ({final['content'][:60]!r}...)")


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: smoke_wheel.py DIST_DIR", file=sys.stderr)
        return 2
    wheels = sorted(Path(argv[0]).resolve().glob("channelkit-*.whl"))
    if len(wheels) != 1:
        print(f"smoke: expected one channelkit wheel in {argv[0]}, found {wheels}", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="channelkit-smoke-"))
    try:
        env_dir = work / "venv"
        venv.create(env_dir, with_pip=True, clear=True)
        python = _bin(env_dir, "python")
        subprocess.run(
            [
                str(python),
                "-m",
                "pip",
                "install",
                "-q",
                "--disable-pip-version-check",
                str(wheels[0]),
            ],
            check=True,
        )
        clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
        location = subprocess.run(
            [str(python), "-c", "import channelkit; print(channelkit.__file__)"],
            check=True,
            capture_output=True,
            text=True,
            cwd=work,
            env=clean,
        ).stdout.strip()
        assert Path(location).resolve().is_relative_to(env_dir.resolve()), location
        port = _free_port()
        process = subprocess.Popen(
            [str(_bin(env_dir, "channelkit")), "playground", "--port", str(port), "--delay", "0"],
            cwd=work,
            env=clean,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            assert process.stdout is not None
            line = ""
            while "Open http" not in line:
                line = process.stdout.readline()
                if not line:
                    raise SystemExit(f"smoke: channelkit playground exited ({process.wait()})")
            converse(f"http://127.0.0.1:{port}")
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

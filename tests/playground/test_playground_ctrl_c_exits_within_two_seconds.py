"""``channelkit playground``: Ctrl+C (SIGINT) - and SIGTERM - exit within 2 s, with
status 0 and no traceback, even while a run streams or a question waits for an answer.
A real playground process on 127.0.0.1."""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import requests
from channelkit.testing import wait_until

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "web"))
from serve_process import CommandProcess


def _views(url: str) -> list[dict[str, Any]]:
    state = requests.get(f"{url}/_emulator/state", timeout=10).json()
    return [state["views"][e["card"]] for e in state["timeline"] if e["kind"] == "card"]


# ``delay``: the demo's pause between streamed words. A live run streams at 0.2 s a word;
# before its question the demo streams a 30-word intro, so that case streams fast (the
# question, not the stream, is what waits when the signal comes).
@pytest.mark.parametrize(
    ("text", "signum", "waiting", "delay"),
    [
        ("long", signal.SIGINT, "status", "0.2"),
        ("hello", signal.SIGINT, "question", "0.01"),
        ("long", signal.SIGTERM, "status", "0.2"),
    ],
    ids=["SIGINT-live-run", "SIGINT-pending-question", "SIGTERM-live-run"],
)
def test_a_stop_signal_exits_within_two_seconds(
    text: str, signum: int, waiting: str, delay: str
) -> None:
    playground = CommandProcess(["playground", "--port", "0", "--delay", delay])
    try:
        url = playground.wait_for_line(r"Open (http://127\.0\.0\.1:\d+)/").group(1)
        sent = requests.post(f"{url}/_emulator/send", json={"text": text}, timeout=10)
        assert sent.status_code == 200, sent.text
        wait_until(
            lambda: any(
                v["kind"] == waiting and v["state"] in ("streaming", "pending", "running")
                for v in _views(url)
            ),
            30.0,
            what=f"a live {waiting} card",
        )
        started = time.monotonic()
        playground.signal(signum)
        code = playground.wait(timeout=30)
        elapsed = time.monotonic() - started
        assert code == 0, (playground.stdout, playground.stderr)
        assert elapsed < 2.0, elapsed
        assert "Traceback" not in "".join(playground.stderr), playground.stderr
    finally:
        playground.kill()


def test_ctrl_c_stops_the_playground_even_when_the_test_run_ignores_it() -> None:
    # pytest started from a background shell inherits SIGINT ignored; the playground the test
    # starts must still get Ctrl+C's default disposition (the child sets it itself).
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        playground = CommandProcess(["playground", "--port", "0"])
    finally:
        signal.signal(signal.SIGINT, previous)
    try:
        url = playground.wait_for_line(r"Open (http://127\.0\.0\.1:\d+)/").group(1)
        _views(url)  # serving: the stop handlers are installed
        playground.signal(signal.SIGINT)
        assert playground.wait(timeout=30) == 0, (playground.stdout, playground.stderr)
        assert "Traceback" not in "".join(playground.stderr), playground.stderr
    finally:
        playground.kill()


def test_ctrl_c_right_after_the_address_is_printed_closes_the_playground_and_exits_0(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The signal can land after the address is printed but before serve_forever takes
    # over SIGINT: the playground is closed and the command still exits 0.
    import channelkit.playground
    from channelkit import cli

    closed: list[bool] = []

    class InterruptedWhilePrinting:
        def __init__(self, **options: Any) -> None:
            pass

        @property
        def url(self) -> str:
            raise KeyboardInterrupt

        def serve_forever(self) -> None:
            raise AssertionError("never reached")

        def close(self) -> None:
            closed.append(True)

    monkeypatch.setattr(channelkit.playground, "Playground", InterruptedWhilePrinting)
    assert cli.main(["playground", "--port", "0"]) == 0
    assert closed == [True]

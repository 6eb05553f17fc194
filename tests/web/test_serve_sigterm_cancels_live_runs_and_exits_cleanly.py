"""``channelkit serve`` as a service: SIGTERM (like SIGINT) cancels the live run, the
DingTalk status card ends cancelled on the platform, and the process exits 0 within
the grace period. A real ``serve`` process, a real DingTalk emulator, 127.0.0.1 only.

With ``"ingress": "http"`` the emulator posts the user's message to the serve process;
with ``"ingress": "stream"`` (no public URL) the serve process holds a Stream connection
to the emulator's gateway, receives the message as a CALLBACK frame, and the shutdown
closes that connection with a close frame (code 1000) before the process exits."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from channelkit.playground import EmulatorServer
from channelkit.testing import wait_until
from dingtalk_serve import (
    APP_KEY,
    APP_SECRET,
    CARD_SECRET,
    WAIT,
    StreamCloses,
    emulator_callbacks,
    healthz,
    start_serve,
    status_cards,
    stream_connections,
)

GRACE_S = 8.0


@pytest.fixture()
def emulator() -> Iterator[EmulatorServer]:
    server = EmulatorServer(app_key=APP_KEY, app_secret=APP_SECRET, api_secret=CARD_SECRET)
    try:
        yield server
    finally:
        server.close()


@pytest.mark.parametrize(
    ("ingress", "signum"),
    [("http", signal.SIGTERM), ("http", signal.SIGINT), ("stream", signal.SIGTERM)],
    ids=["http-SIGTERM", "http-SIGINT", "stream-SIGTERM"],
)
def test_a_stop_signal_cancels_the_live_run_and_exits_zero_within_the_grace_period(
    ingress: str, signum: int, tmp_path: Path, emulator: EmulatorServer
) -> None:
    pytest.importorskip("waitress")
    closes = StreamCloses(emulator) if ingress == "stream" else None
    serve, url = start_serve(tmp_path, emulator, ingress, GRACE_S)
    try:
        if ingress == "stream":
            (connection,) = wait_until(
                lambda: [c for c in stream_connections(url) if c["status"] == "connected"],
                WAIT,
                0.05,
                what="/healthz to report the Stream connection connected",
            )
            assert connection["attempt"] == 0 and connection["last_error"] is None
            # the client reports the handshake done a moment before the gateway's own
            # handler marks the connection: wait for the gateway's view too
            assert emulator.emulator.stream.wait_connected(WAIT)
        status, report = healthz(url)
        assert status == 200 and report["ok"] is True, report
        _, ack = emulator.emulator.send_user_message("please take your time")
        assert ack.status == 200, ack
        (robot,) = [c for c in emulator_callbacks(emulator) if c["kind"] == "robot"]
        assert robot["transport"] == ingress and robot["status"] == 200, robot
        wait_until(
            lambda: any("Working on it." in c["content"] for c in status_cards(emulator)),
            WAIT,
            what="the live run's status card streaming",
        )
        (card,) = status_cards(emulator)
        assert card["state"] not in ("cancelled", "completed"), card
        started = time.monotonic()
        serve.signal(signum)
        code = serve.wait(timeout=GRACE_S + 20)
        elapsed = time.monotonic() - started
        assert code == 0, (serve.stdout, serve.stderr)
        assert elapsed < GRACE_S, elapsed
        (final,) = status_cards(emulator)
        assert final["state"] == "cancelled", final
        assert "Traceback" not in "".join(serve.stderr), serve.stderr
        if closes is not None:
            # the one Stream connection was closed by the shutdown with a close frame
            # (1000), not dropped with the process (1006), and the gateway saw it end
            codes = wait_until(
                lambda: [c for c in closes.codes() if c is not None],
                WAIT,
                what="the gateway to see the Stream connection closed",
            )
            assert codes == [1000] and closes.codes() == [1000], closes.codes()
            assert not emulator.emulator.stream.connected
            assert emulator.emulator.stream.counts["connections"] == 1
    finally:
        serve.kill()

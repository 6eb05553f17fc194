"""A real server on 127.0.0.1 that accepts and never answers: the call fails in time."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from types import ModuleType

import pytest
from channelkit.errors import TransportError
from channelkit.http.retry import RetryPolicy


@pytest.fixture()
def silent_server() -> Iterator[str]:
    """Accepts connections, reads the request, never writes a byte."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.1)
    stop = threading.Event()
    conns: list[socket.socket] = []

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            conns.append(conn)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(timeout=2)
        for conn in conns:
            conn.close()
        listener.close()


def test_server_that_never_answers_raises_transport_error_in_time(
    acme: ModuleType, silent_server: str
) -> None:
    client = acme.AcmeClient(token="t", base_url=silent_server, retry=RetryPolicy.never())
    started = time.monotonic()
    with pytest.raises(TransportError) as caught:
        client.get_card(card_id="c1", view="full", timeout=(1.0, 0.3))
    elapsed = time.monotonic() - started
    assert caught.value.timeout is True
    assert elapsed < 1.5
    client.close()


def test_http_server_module_variant(acme: ModuleType) -> None:
    """Same with the stdlib http.server: the handler blocks until the test ends."""
    import http.server

    release = threading.Event()

    class Stuck(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            release.wait(timeout=5)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Stuck)
    server.daemon_threads = True
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    try:
        client = acme.AcmeClient(
            token="t",
            base_url=f"http://127.0.0.1:{server.server_address[1]}",
            retry=RetryPolicy.never(),
            timeout=(1.0, 0.25),
        )
        started = time.monotonic()
        with pytest.raises(TransportError):
            client.get_card(card_id="c1", view="full")
        assert time.monotonic() - started < 1.5
    finally:
        release.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=2)

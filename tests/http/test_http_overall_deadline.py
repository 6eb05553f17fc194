"""Every platform call has one overall deadline, even against a peer that trickles its
answer one byte at a time; a malformed or absurdly nested answer is a failed call."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from types import ModuleType

import pytest
from channelkit.errors import DeserializationError, ReadTimeout
from channelkit.http.retry import RetryPolicy
from channelkit.http.transport import Transport


def _serve(body_source) -> Iterator[str]:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.1)
    stop = threading.Event()

    def handle(conn: socket.socket) -> None:
        try:
            conn.recv(65536)
            body_source(conn, stop)
        except OSError:
            pass
        finally:
            conn.close()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            threading.Thread(target=handle, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(timeout=2)
        listener.close()


@pytest.fixture()
def trickling_server() -> Iterator[str]:
    """Answers 200 with a long body, one byte every 50 ms (each read is quick)."""

    def trickle(conn: socket.socket, stop: threading.Event) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n")
        conn.sendall(b"Content-Length: 100000\r\n\r\n")
        while not stop.wait(0.05):
            conn.sendall(b" ")

    yield from _serve(trickle)


@pytest.fixture()
def deep_json_server() -> Iterator[str]:
    body = b"[" * 200_000 + b"]" * 200_000

    def answer(conn: socket.socket, stop: threading.Event) -> None:
        head = (
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        )
        conn.sendall(head.encode() + body)

    yield from _serve(answer)


def test_a_trickling_peer_fails_at_the_overall_deadline(trickling_server: str) -> None:
    transport = Transport()
    try:
        with pytest.raises(ReadTimeout) as caught:
            # per read 0.3 s never trips (a byte every 50 ms); the whole call has 0.6 s
            transport.request("GET", trickling_server + "/x", timeout=(0.3, 0.3))
        assert caught.value.timeout is True and "overall deadline" in str(caught.value)
    finally:
        transport.close()


def test_a_200000_deep_json_answer_is_a_failed_call_not_a_recursion_error(
    acme: ModuleType, deep_json_server: str
) -> None:
    client = acme.AcmeClient(token="t", base_url=deep_json_server, retry=RetryPolicy.never())
    try:
        with pytest.raises(DeserializationError):
            client.get_card(card_id="c1", view="full", timeout=(2.0, 5.0))
    finally:
        client.close()

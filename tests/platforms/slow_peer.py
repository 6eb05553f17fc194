"""A tiny HTTP/1.1 peer on 127.0.0.1 for slow-drip and malformed-answer tests.

Each request is answered by ``answer(method, path, body)``: a JSON-able object (200), a
``Reply`` (status, raw bytes, drip), on its own thread. A dripped reply is sent one byte per
``drip_interval`` seconds, status line and headers included; the peer notices at once
when the client hangs up (``hangups`` records how long each dripped exchange lasted).
"""

from __future__ import annotations

import json
import select
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

#: thread-name prefix of everything the peer runs (left out of thread-leak checks)
THREAD_PREFIX = "slow-peer"


@dataclass
class Reply:
    status: int = 200
    body: bytes = b"{}"
    drip: bool = False


Answer = Callable[[str, str, Any], Any]


class SlowPeer:
    def __init__(self, answer: Answer, *, drip_interval: float = 1.0) -> None:
        self.answer = answer
        self.drip_interval = drip_interval
        self.requests: list[tuple[str, str, Any]] = []
        #: seconds each dripped exchange lasted before the client hung up
        self.hangups: list[float] = []
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self._listener.settimeout(0.05)
        self._threads: list[threading.Thread] = []
        self._conns: list[socket.socket] = []
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._accepting = threading.Thread(
            target=self._accept, name=f"{THREAD_PREFIX}-accept", daemon=True
        )
        self._accepting.start()

    def paths(self, suffix: str) -> list[Any]:
        """Bodies of the requests whose path ends with ``suffix``."""
        with self.lock:
            return [body for _m, path, body in self.requests if path.split("?")[0].endswith(suffix)]

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:
                continue
            with self.lock:
                self._conns.append(conn)
            thread = threading.Thread(
                target=self._serve, args=(conn,), name=f"{THREAD_PREFIX}-conn", daemon=True
            )
            self._threads.append(thread)
            thread.start()

    def _read_request(self, conn: socket.socket, buffer: bytes) -> tuple[Any, bytes] | None:
        while b"\r\n\r\n" not in buffer:
            chunk = conn.recv(65536)
            if not chunk:
                return None
            buffer += chunk
        head, _, rest = buffer.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, path, _version = lines[0].split(" ", 2)
        length = 0
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value.strip())
        while len(rest) < length:
            chunk = conn.recv(65536)
            if not chunk:
                return None
            rest += chunk
        raw, rest = rest[:length], rest[length:]
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        return (method, path, body), rest

    def _serve(self, conn: socket.socket) -> None:
        buffer = b""
        conn.settimeout(5.0)
        try:
            while not self._stop.is_set():
                got = self._read_request(conn, buffer)
                if got is None:
                    return
                (method, path, body), buffer = got
                with self.lock:
                    self.requests.append((method, path, body))
                reply = self.answer(method, path, body)
                if not isinstance(reply, Reply):
                    reply = Reply(body=json.dumps(reply).encode())
                data = (
                    f"HTTP/1.1 {reply.status} X\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {len(reply.body)}\r\n\r\n"
                ).encode() + reply.body
                if not reply.drip:
                    conn.sendall(data)
                    continue
                self._drip(conn, data)
                return
        except OSError:
            pass
        finally:
            conn.close()

    def _drip(self, conn: socket.socket, data: bytes) -> None:
        started = time.monotonic()
        for i in range(len(data)):
            conn.sendall(data[i : i + 1])
            ready, _, _ = select.select([conn], [], [], self.drip_interval)
            if self._stop.is_set():
                return
            if ready and not conn.recv(1):  # the client hung up
                with self.lock:
                    self.hangups.append(time.monotonic() - started)
                return

    def close(self) -> None:
        self._stop.set()
        self._accepting.join(timeout=2)
        self._listener.close()
        with self.lock:
            conns = list(self._conns)
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for thread in self._threads:
            thread.join(timeout=2)


def serve(answer: Answer, **options: Any) -> Iterator[SlowPeer]:
    peer = SlowPeer(answer, **options)
    try:
        yield peer
    finally:
        peer.close()

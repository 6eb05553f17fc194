"""A small local Discord gateway for the tests: it plays Discord's side, one script per
connection, on 127.0.0.1."""

from __future__ import annotations

import json
import socket as socketlib
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from websockets.sync.server import ServerConnection, serve

Script = Callable[["Peer", ServerConnection], None]


class Peer:
    """Runs ``scripts[n]`` for the n-th connection; records what each connection received."""

    def __init__(self, scripts: list[Script]) -> None:
        self.scripts = scripts
        self.paths: list[str] = []
        self.received: list[list[dict[str, Any]]] = []
        self.lock = threading.Lock()
        self.done = threading.Event()  # set by the test: connections may end
        self.port = 0

    @property
    def resume_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/resume"

    def handle(self, ws: ServerConnection) -> None:
        with self.lock:
            index = len(self.paths)
            self.paths.append(ws.request.path if ws.request is not None else "")
            self.received.append([])
        if index >= len(self.scripts):
            ws.close(4999)
            return
        self.scripts[index](self, ws)

    def expect(self, ws: ServerConnection, op: int, timeout: float = 5.0) -> dict[str, Any]:
        """The next frame with ``op`` (heartbeats before it are recorded and skipped)."""
        while True:
            frame = json.loads(ws.recv(timeout=timeout))
            with self.lock:
                self.received[-1].append(frame)
            if frame["op"] == op:
                return frame

    def hello(self, ws: ServerConnection, interval_ms: int = 41_250) -> None:
        ws.send(json.dumps({"op": 10, "d": {"heartbeat_interval": interval_ms}}))

    def dispatch(self, ws: ServerConnection, seq: int, name: str, data: dict[str, Any]) -> None:
        ws.send(json.dumps({"op": 0, "s": seq, "t": name, "d": data}))

    def ready(self, ws: ServerConnection, seq: int = 1, session: str = "sess-1") -> None:
        self.dispatch(
            ws, seq, "READY", {"session_id": session, "resume_gateway_url": self.resume_url}
        )

    def message(self, ws: ServerConnection, seq: int, message_id: str) -> None:
        self.dispatch(
            ws, seq, "MESSAGE_CREATE", {"id": message_id, "channel_id": "1", "content": "hi"}
        )

    def hold(self, ws: ServerConnection) -> None:
        """Keep the connection open (reading) until the test ends."""
        while not self.done.is_set():
            try:
                frame = json.loads(ws.recv(timeout=0.2))
            except TimeoutError:
                continue
            except Exception:
                return
            with self.lock:
                self.received[-1].append(frame)

    @staticmethod
    def drop(ws: ServerConnection) -> None:
        """End the TCP connection without a close frame (a dropped socket)."""
        ws.socket.shutdown(socketlib.SHUT_RDWR)


@contextmanager
def running(scripts: list[Script]) -> Iterator[Peer]:
    peer = Peer(scripts)
    with serve(peer.handle, "127.0.0.1", 0) as server:
        peer.port = server.socket.getsockname()[1]
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield peer
        finally:
            peer.done.set()
            server.shutdown()
            thread.join(5.0)

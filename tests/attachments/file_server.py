"""A real HTTP server on 127.0.0.1 serving attachment downloads, counting what it sends."""

from __future__ import annotations

import socket
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler

from requests.adapters import HTTPAdapter


@dataclass
class Route:
    """What the server answers on one path."""

    body: bytes = b""
    content_type: str = "application/octet-stream"
    send_length: bool = True  # False: no Content-Length, the body ends with the connection
    declared_length: int | None = None  # a Content-Length other than len(body)
    repeat: int = 1  # the body is sent this many times
    redirect: str | None = None
    status: int = 200
    wait_for_close: bool = False  # headers first; body only if the client stays


@dataclass
class FileServer:
    """The server's routes and the body bytes it managed to send per path."""

    port: int
    routes: dict[str, Route] = field(default_factory=dict)
    sent: dict[str, int] = field(default_factory=dict)
    requests: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"


def handler(server: FileServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            path = self.path
            with server.lock:
                server.requests.append((self.headers.get("Host", ""), dict(self.headers)))
            route = server.routes.get(path)
            if route is None:
                self.send_error(404)
                return
            if route.redirect is not None:
                self.send_response(302)
                self.send_header("Location", route.redirect)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            # a small send buffer keeps what the kernel holds for the client small, so
            # the count below is close to what the client actually read
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16 * 1024)
            self.send_response(route.status)
            self.send_header("Content-Type", route.content_type)
            total = len(route.body) * route.repeat
            if route.send_length:
                length = route.declared_length if route.declared_length is not None else total
                self.send_header("Content-Length", str(length))
            self.end_headers()
            self.wfile.flush()
            if route.wait_for_close:
                self.connection.settimeout(5.0)
                try:
                    if self.connection.recv(1) == b"":
                        return  # the client hung up after the headers
                except (TimeoutError, OSError):
                    pass
            for _ in range(route.repeat):
                try:
                    self.wfile.write(route.body)
                    self.wfile.flush()
                except OSError:
                    return
                with server.lock:
                    server.sent[path] = server.sent.get(path, 0) + len(route.body)

    return Handler


class SmallBuffers(HTTPAdapter):
    """A client whose receive buffer is small, so bytes sent ~ bytes read."""

    def init_poolmanager(self, *args: object, **kwargs: object) -> None:
        kwargs["socket_options"] = [(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)]
        super().init_poolmanager(*args, **kwargs)  # type: ignore[arg-type]

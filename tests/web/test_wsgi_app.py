"""channelkit.web.create_wsgi_app: routing, limits, pass-through of adapter answers."""

from __future__ import annotations

import io
import socket
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from channelkit.playground import LocalServer, dingtalk_robot_sign
from channelkit.web import (
    MAX_BODY_BYTES,
    IngressDispatcher,
    IngressRequest,
    IngressResponse,
    IngressRoute,
    create_wsgi_app,
    read_body,
)
from dingtalk_conversation import APP_SECRET, make_channel


class _Echo:
    def __init__(self) -> None:
        self.seen: list[IngressRequest] = []

    def handle(self, request: IngressRequest) -> IngressResponse:
        self.seen.append(request)
        return IngressResponse.json(200, {"len": len(request.body), "q": dict(request.query)})

    def ingress_routes(self) -> list[IngressRoute]:
        return [
            IngressRoute("/echo", self.handle, ("POST", "PUT")),
            IngressRoute("/boom", self._boom, ("POST",)),
        ]

    def _boom(self, request: IngressRequest) -> IngressResponse:
        raise RuntimeError("handler bug")


def _call(
    app: Any, method: str, path: str, body: bytes = b"", **extra: Any
) -> tuple[int, dict[str, str], bytes]:
    environ: dict[str, Any] = {
        "REQUEST_METHOD": method,
        "PATH_INFO": path,
        "QUERY_STRING": extra.pop("query", ""),
        "wsgi.input": extra.pop("stream", io.BytesIO(body)),
        "CONTENT_LENGTH": extra.pop("content_length", str(len(body)) if body else ""),
        "CONTENT_TYPE": "application/json",
        **extra,
    }
    captured: dict[str, Any] = {}

    def start_response(status: str, headers: list[tuple[str, str]]) -> None:
        captured["status"] = int(status.split()[0])
        captured["headers"] = dict(headers)

    data = b"".join(app(environ, start_response))
    return captured["status"], captured["headers"], data


class _Exploding(io.RawIOBase):
    def read(self, n: int = -1) -> bytes:  # pragma: no cover - must never be called
        raise AssertionError("the body must not be read")


def test_routes_methods_and_unknown_paths() -> None:
    echo = _Echo()
    app = create_wsgi_app([echo])
    status, _, body = _call(app, "POST", "/echo", b'{"a":1}', query="x=1&x=2&y=")
    assert status == 200 and body == b'{"len":7,"q":{"x":"1","y":""}}'
    assert echo.seen[0].headers["content-type"] == "application/json"
    assert _call(app, "PUT", "/echo/", b"{}")[0] == 200  # trailing slash tolerated
    status, headers, _ = _call(app, "GET", "/echo")
    assert status == 405 and headers["Allow"] == "POST, PUT"
    assert _call(app, "POST", "/nope", b"{}")[0] == 404
    status, _, body = _call(app, "GET", "/healthz")
    assert status == 200 and body == b'{"ok":true}'
    status, _, body = _call(app, "HEAD", "/healthz")
    assert status == 200 and body == b""


def test_oversized_bodies_are_refused_before_reading() -> None:
    app = create_wsgi_app([_Echo()])
    status, _, _ = _call(
        app, "POST", "/echo", stream=_Exploding(), content_length=str(MAX_BODY_BYTES + 1)
    )
    assert status == 413
    # exactly the limit is fine
    status, _, body = _call(app, "POST", "/echo", b"x" * MAX_BODY_BYTES)
    assert status == 200 and body.startswith(b'{"len":1048576')
    # chunked input without Content-Length: read at most limit + 1 bytes
    stream = io.BytesIO(b"y" * (MAX_BODY_BYTES + 10))
    status = _call(
        app, "POST", "/echo", stream=stream, content_length="", **{"wsgi.input_terminated": True}
    )[0]
    assert status == 413
    assert stream.tell() <= MAX_BODY_BYTES + 1
    assert _call(app, "POST", "/echo", content_length="abc")[0] == 400
    # no Content-Length and no terminated input: an empty body, nothing read
    status, _, body = _call(app, "POST", "/echo", stream=_Exploding(), content_length="")
    assert status == 200 and body.startswith(b'{"len":0')


def test_handler_errors_never_reach_the_server() -> None:
    app = create_wsgi_app([_Echo()])
    status, _, body = _call(app, "POST", "/boom", b"{}")
    assert status == 500 and body == b'{"error":"internal_error"}'


def test_duplicate_routes_and_bad_channels_are_rejected() -> None:
    with pytest.raises(ValueError, match="mounted twice"):
        IngressDispatcher([_Echo(), _Echo()])
    with pytest.raises(TypeError, match="ingress_routes"):
        IngressDispatcher([object()])  # type: ignore[list-item]


def test_read_body_limits() -> None:
    assert read_body(io.BytesIO(b"abc"), "3") == b"abc"
    assert read_body(io.BytesIO(b""), None) == b""


@pytest.fixture()
def served_channel() -> Iterator[str]:
    channel = make_channel("http://127.0.0.1:9")  # never called: requests are rejected
    try:
        with LocalServer() as server:
            server.start(create_wsgi_app([channel]))
            yield server.url
    finally:
        channel.close()


def test_signature_rejections_pass_through_over_http(served_channel: str) -> None:
    url = served_channel
    missing = requests.post(f"{url}/dingtalk/robot", json={"msgId": "m"}, timeout=5)
    assert missing.status_code == 401
    bad = requests.post(
        f"{url}/dingtalk/robot",
        json={"msgId": "m"},
        headers={"timestamp": "1700000000000", "sign": "bad"},
        timeout=5,
    )
    assert bad.status_code == 403
    import time

    ts = str(int(time.time() * 1000))
    signed_garbage = requests.post(
        f"{url}/dingtalk/robot",
        data=b"not json",
        headers={"timestamp": ts, "sign": dingtalk_robot_sign(ts, APP_SECRET)},
        timeout=5,
    )
    assert signed_garbage.status_code == 400
    card = requests.post(f"{url}/dingtalk/card", json={}, timeout=5)
    assert card.status_code == 401
    assert requests.get(f"{url}/dingtalk/card", timeout=5).status_code == 405
    assert requests.get(f"{url}/healthz", timeout=5).json() == {"ok": True}


def test_real_server_refuses_a_declared_oversized_body(served_channel: str) -> None:
    host, port = served_channel.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(
            b"POST /dingtalk/robot HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {50 * 1024 * 1024}\r\nConnection: close\r\n\r\n".encode()
        )
        reply = sock.recv(4096)
    assert reply.startswith((b"HTTP/1.0 413", b"HTTP/1.1 413"))

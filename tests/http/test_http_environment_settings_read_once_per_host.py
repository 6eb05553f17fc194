"""The transport honours the environment's proxy settings, reading them once per host.

``requests`` scans the whole environment on every call to find ``HTTPS_PROXY``,
``NO_PROXY`` and the CA bundle; the transport's sessions read them at the first request to
a host and reuse them, so a burst of platform calls does not pay the scan each time. The
settings themselves keep working: a proxy named in the environment carries the calls, a
host in ``NO_PROXY`` is reached directly.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import requests.sessions
from channelkit.http.transport import Transport

TIMEOUT = (3.0, 10.0)


class _Recorder(BaseHTTPRequestHandler):
    """Answers every GET with 200 and records the request target it was sent."""

    def do_GET(self) -> None:
        self.server.targets.append(self.path)  # type: ignore[attr-defined]
        body = b'{"ok": true}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[Any]:
    """An HTTP server on 127.0.0.1 that records each request's target (an absolute URL
    when it is used as a proxy, a path when reached directly)."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    httpd.targets = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield httpd
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


def _url(httpd: Any) -> str:
    return f"http://127.0.0.1:{httpd.server_address[1]}"


@pytest.fixture
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)


@pytest.mark.usefixtures("clean_environment")
def test_a_proxy_named_in_the_environment_carries_the_calls(
    server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTP_PROXY", _url(server))
    transport = Transport()
    try:
        for _ in range(3):
            response = transport.request("GET", "http://api.platform.test/v1/ping", timeout=TIMEOUT)
            assert response.status_code == 200
    finally:
        transport.close()
    assert server.targets == ["http://api.platform.test/v1/ping"] * 3


@pytest.mark.usefixtures("clean_environment")
def test_a_host_in_no_proxy_is_reached_directly(
    server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    transport = Transport()
    try:
        response = transport.request("GET", _url(server) + "/v1/ping", timeout=TIMEOUT)
    finally:
        transport.close()
    assert response.status_code == 200
    assert server.targets == ["/v1/ping"]


@pytest.mark.usefixtures("clean_environment")
def test_the_environment_is_read_once_per_host(
    server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    hosts: list[str] = []
    real = requests.sessions.get_environ_proxies

    def counting(url: str, no_proxy: Any = None) -> dict[str, str]:
        hosts.append(url)
        return real(url, no_proxy=no_proxy)

    monkeypatch.setattr(requests.sessions, "get_environ_proxies", counting)
    transport = Transport()
    other = _url(server).replace("127.0.0.1", "localhost")
    try:
        for _ in range(5):
            transport.request("GET", _url(server) + "/a?x=1", timeout=TIMEOUT)
            transport.request("GET", _url(server) + "/b", timeout=TIMEOUT)
        for _ in range(3):
            transport.request("GET", other + "/c", timeout=TIMEOUT)
    finally:
        transport.close()
    assert len(server.targets) == 13
    assert hosts == [_url(server) + "/a?x=1", other + "/c"]

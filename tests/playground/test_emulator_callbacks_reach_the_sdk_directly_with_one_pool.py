"""An emulator delivers its callbacks (a person's message, a click) straight to the SDK's
endpoint on this machine: a proxy configured in the environment is not in the way, and
the callbacks share one thread-safe connection pool instead of a session per call."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from channelkit.playground.emulator import http_deliver
from channelkit.playground.server import LocalServer, free_port


@pytest.fixture
def endpoint() -> Iterator[tuple[str, list[bytes]]]:
    bodies: list[bytes] = []
    lock = threading.Lock()

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        with lock:
            bodies.append(body)
        start_response("200 OK", [("Content-Type", "application/json")])
        return [b'{"ok": "\xe2\x9c\x93"}']

    with LocalServer() as server:
        server.start(app)
        yield server.url, bodies


def test_a_proxy_in_the_environment_is_not_in_the_way(
    endpoint: tuple[str, list[bytes]], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, bodies = endpoint
    dead = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(name, dead)
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    delivered = http_deliver(url + "/callback", {"Content-Type": "application/json"}, b"{}")
    assert (delivered.status, delivered.body) == (200, '{"ok": "\u2713"}')
    assert bodies == [b"{}"]


def test_many_callbacks_at_once_all_arrive(endpoint: tuple[str, list[bytes]]) -> None:
    url, bodies = endpoint
    results: list[int] = []
    lock = threading.Lock()

    def send(i: int) -> None:
        status = http_deliver(url + "/callback", {}, f'{{"n": {i}}}'.encode()).status
        with lock:
            results.append(status)

    threads = [threading.Thread(target=send, args=(i,)) for i in range(64)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert results == [200] * 64
    assert sorted(bodies) == sorted(f'{{"n": {i}}}'.encode() for i in range(64))


def test_an_unreachable_endpoint_is_status_0_with_the_reason() -> None:
    delivered = http_deliver(f"http://127.0.0.1:{free_port()}/callback", {}, b"{}")
    assert delivered.status == 0 and delivered.body  # the emulator says so, no exception

"""A platform API keeps a connection for every thread that may call it at once.

Up to ``max_workers`` hook workers and ``max_concurrent_runs`` run threads call the
platform together; a pool smaller than that closes the extra connections after each call
and the next burst opens them again (a TCP and TLS handshake each against the real
platform). Here 32 caller threads make two overlapping rounds of DingTalk card writes
through `CardApi.create` sized the way the adapter sizes it; the second round must reuse
every connection of the first.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from channelkit.core.config import MAX_API_POOL_SIZE, ChannelConfig
from channelkit.platforms.dingtalk.api import CardApi

CALLERS = 32
WAIT_S = 10.0


class _CountingServer(ThreadingHTTPServer):
    """Keep-alive HTTP/1.1 server counting the TCP connections it accepts; each request
    is held until `CALLERS` requests are in flight, so every round overlaps fully."""

    daemon_threads = True
    request_queue_size = 2 * CALLERS  # the listen backlog: every caller connects at once

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.lock = threading.Lock()
        self.accepted = 0
        self.requests = 0
        self.in_flight = threading.Barrier(CALLERS, timeout=WAIT_S)

    def get_request(self) -> tuple[Any, Any]:
        request = super().get_request()
        with self.lock:
            self.accepted += 1
        return request


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _CountingServer

    def do_PUT(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        with self.server.lock:
            self.server.requests += 1
        try:
            self.server.in_flight.wait()
            status = 200
        except threading.BrokenBarrierError:
            status = 500  # the callers did not overlap: the call fails loudly
        body = json.dumps({"success": status == 200}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[_CountingServer]:
    srv = _CountingServer()
    thread = threading.Thread(target=srv.serve_forever, name="pool-test-server", daemon=True)
    thread.start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join(WAIT_S)


def test_a_second_burst_of_calls_opens_no_new_connections(server: _CountingServer) -> None:
    # the adapter's sizing for 32 callers: 16 hook workers + 16 run threads
    config = ChannelConfig(name="dingtalk", max_workers=16, max_concurrent_runs=16)
    assert config.api_pool_size == CALLERS
    api = CardApi.create(
        "ding-app",
        "secret",
        base_url=f"http://127.0.0.1:{server.server_address[1]}",
        timeout=WAIT_S,
        token_provider=lambda: "token",
        pool_size=config.api_pool_size,
    )
    start = threading.Barrier(CALLERS, timeout=WAIT_S)
    accepted_after: list[int] = []
    errors: list[BaseException] = []

    def caller(index: int) -> None:
        try:
            start.wait()
            api.update_instance(f"track-{index}-1", {"content": "first"})
            start.wait()  # every first-round call has returned its connection
            if index == 0:
                with server.lock:
                    accepted_after.append(server.accepted)
            start.wait()
            api.update_instance(f"track-{index}-2", {"content": "second"})
        except BaseException as exc:
            errors.append(exc)
            start.abort()

    threads = [threading.Thread(target=caller, args=(i,)) for i in range(CALLERS)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(WAIT_S * 3)
        assert not any(thread.is_alive() for thread in threads), "a caller did not finish"
    finally:
        api.close()
    assert errors == []
    assert server.requests == CALLERS * 2
    assert accepted_after == [CALLERS]  # the first round really overlapped
    assert (
        server.accepted == CALLERS
    ), f"the second round opened {server.accepted - CALLERS} new connections"


def test_the_pool_size_is_hook_workers_plus_run_threads_bounded() -> None:
    assert ChannelConfig(name="c").api_pool_size == 16 + 64
    assert ChannelConfig(name="c", max_workers=1, max_concurrent_runs=2).api_pool_size == 3
    big = ChannelConfig(name="c", max_workers=100, max_concurrent_runs=500)
    assert big.api_pool_size == MAX_API_POOL_SIZE == 128

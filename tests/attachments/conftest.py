"""Fixtures: a real HTTP server on 127.0.0.1 and a client session with small buffers."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests

from tests.attachments.file_server import FileServer, SmallBuffers, handler


@pytest.fixture
def file_server() -> Iterator[FileServer]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    state = FileServer(port=httpd.server_address[1])
    httpd.RequestHandlerClass = handler(state)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


@pytest.fixture
def session() -> Iterator[requests.Session]:
    with requests.Session() as s:
        s.mount("http://", SmallBuffers())
        yield s

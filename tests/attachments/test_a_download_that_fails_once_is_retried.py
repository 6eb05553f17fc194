"""A person's file whose download fails once in a way a retry may mend (a 429, a 500, a
reset connection) still reaches the run, byte for byte: the core asks the platform for
the download again after a pause. A refusal (404) is not retried, at most three attempts
are made, and a Stop during the pause ends the retries (issue 25)."""

from __future__ import annotations

import hashlib
import socket
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from channelkit.attachments import Workspaces
from channelkit.attachments.fetch import DownloadLimits
from channelkit.attachments.model import Attachment, AttachmentKind
from channelkit.core.inbound_files import RETRY_DELAYS, AttachmentSource, InboundFiles
from channelkit.errors import AttachmentFailed, ConfigurationError

BODY = b"%PDF-1.7\n" + bytes(range(256)) * 64


class Flaky:
    """A server on 127.0.0.1 whose first `failures` GETs fail with `how` (an HTTP status,
    or "reset": the connection is closed without an answer); later ones serve BODY."""

    def __init__(self) -> None:
        self.failures = 0
        self.how: int | str = 500
        self.hits = 0
        self.lock = threading.Lock()
        flaky = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                with flaky.lock:
                    flaky.hits += 1
                    failing = flaky.hits <= flaky.failures
                if failing and flaky.how == "reset":
                    self.connection.setsockopt(
                        socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00"
                    )
                    self.connection.close()
                    return
                status = int(flaky.how) if failing else 200
                body = b"busy" if failing else BODY
                self.send_response(status)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/report.pdf"


@pytest.fixture(scope="module")
def flaky() -> Iterator[Flaky]:
    server = Flaky()
    thread = threading.Thread(target=server.httpd.serve_forever, daemon=True)
    thread.start()
    yield server
    server.httpd.shutdown()
    server.httpd.server_close()
    thread.join(10)


@pytest.fixture
def setup(flaky: Flaky, tmp_path: Path) -> Iterator[tuple[Flaky, list[float], list[int]]]:
    flaky.hits = 0
    waits: list[float] = []
    asked: list[int] = []
    yield flaky, waits, asked


def _files(
    flaky: Flaky,
    tmp_path: Path,
    waits: list[float],
    asked: list[int],
    on_wait: Callable[[], None] = lambda: None,
) -> InboundFiles:
    def source(attachment: Attachment) -> AttachmentSource:
        asked.append(1)  # the platform is asked again for every attempt
        return AttachmentSource(flaky.url)

    def wait(seconds: float, cancelled: Callable[[], bool]) -> None:
        waits.append(seconds)  # no real pause: the test runs at once
        on_wait()

    return InboundFiles(
        source,
        Workspaces(tmp_path / "runs", remove_at_exit=False),
        DownloadLimits(),
        wait=wait,
    )


REPORT = Attachment(AttachmentKind.FILE, "report.pdf", "ref-1")


@pytest.mark.parametrize("how", [429, 500, 503, "reset"])
def test_a_download_that_fails_once_arrives_on_the_second_attempt(
    setup: tuple[Flaky, list[float], list[int]], tmp_path: Path, how: int | str
) -> None:
    flaky, waits, asked = setup
    flaky.failures, flaky.how = 1, how
    received = _files(flaky, tmp_path, waits, asked).receive("run-1", [REPORT])
    try:
        assert received.problems == ()
        [got] = received.files
        assert hashlib.sha256(got.path.read_bytes()).digest() == hashlib.sha256(BODY).digest()
        assert flaky.hits == 2 and len(asked) == 2
        assert waits == [RETRY_DELAYS[0]]
    finally:
        received.close()
    assert list((tmp_path / "runs").iterdir()) == []


def test_a_refusal_is_not_retried(
    setup: tuple[Flaky, list[float], list[int]], tmp_path: Path
) -> None:
    flaky, waits, asked = setup
    flaky.failures, flaky.how = 5, 404
    received = _files(flaky, tmp_path, waits, asked).receive("run-2", [REPORT])
    received.close()
    [problem] = received.problems
    assert isinstance(problem.error, AttachmentFailed) and problem.error.status == 404
    assert flaky.hits == 1 and waits == []


def test_at_most_three_attempts_then_the_person_is_told(
    setup: tuple[Flaky, list[float], list[int]], tmp_path: Path
) -> None:
    flaky, waits, asked = setup
    flaky.failures, flaky.how = 10, 500
    received = _files(flaky, tmp_path, waits, asked).receive("run-3", [REPORT])
    received.close()
    [problem] = received.problems
    assert isinstance(problem.error, AttachmentFailed) and problem.error.status == 500
    assert flaky.hits == 1 + len(RETRY_DELAYS) == 3
    assert waits == list(RETRY_DELAYS)


def test_a_stop_during_the_pause_ends_the_retries(
    setup: tuple[Flaky, list[float], list[int]], tmp_path: Path
) -> None:
    flaky, waits, asked = setup
    flaky.failures, flaky.how = 10, 503
    stopped = threading.Event()
    files = _files(flaky, tmp_path, waits, asked, on_wait=stopped.set)
    received = files.receive("run-4", [REPORT], cancelled=stopped.is_set)
    received.close()
    [problem] = received.problems
    assert isinstance(problem.error, AttachmentFailed)
    assert flaky.hits == 1 and len(waits) == 1


def test_retry_delays_must_be_seconds(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError) as caught:
        InboundFiles(
            lambda a: AttachmentSource("http://127.0.0.1:9/"),
            Workspaces(tmp_path, remove_at_exit=False),
            DownloadLimits(),
            retry_delays=(0.5, -1.0),
        )
    assert caught.value.path == "retry_delays"

"""The core downloads a person's attachments for their run, on the run's worker, through
the platform's `attachment_source()`, and removes the run's workspace when it ends: a
FunctionAgent gets the files (`turn.attachments`), a text-only bridge a line naming
each path, and a file over the cap is told to the person once while the run goes on."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import requests
from channelkit.agents.function import FunctionAgent, Turn
from channelkit.attachments import Attachment, AttachmentKind, DownloadLimits, Workspaces
from channelkit.core import ChannelBase, ChannelConfig, InboundMessage
from channelkit.core.inbound_files import AttachmentSource
from channelkit.errors import ConfigurationError
from channelkit.runtime import FakeClock

from tests.attachments.file_server import FileServer, Route, SmallBuffers, handler

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 40
PDF = b"%PDF-1.7\n" + b"report " * 5000
CHUNK = 16 * 1024
KERNEL_SLACK = 512 * 1024


class FileChannel(ChannelBase):
    """Attachments are served by a local file server; `reference` is the path."""

    def __init__(self, server: FileServer, root: Path, bridge, **kwargs) -> None:
        super().__init__(ChannelConfig(name="files"), bridge, clock=FakeClock(), **kwargs)
        self.server = server
        self.workspaces = Workspaces(root, remove_at_exit=False)
        self.sent: list[str] = []
        self.cond = threading.Condition()
        self.sources_on: list[str] = []
        # a small receive buffer: what the server sent is close to what was read
        self.session = requests.Session()
        self.session.mount("http://", SmallBuffers())

    def attachment_source(self, attachment: Attachment) -> AttachmentSource:
        self.sources_on.append(threading.current_thread().name)
        return AttachmentSource(self.server.url(attachment.reference), session=self.session)

    def on_close(self) -> None:
        self.session.close()

    def send_message(self, chat_id: str, text: str, *, thread_id: str | None = None) -> None:
        with self.cond:
            self.sent.append(text)
            self.cond.notify_all()


@pytest.fixture
def server() -> Iterator[FileServer]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    state = FileServer(port=httpd.server_address[1])
    httpd.RequestHandlerClass = handler(state)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    state.routes["/photo"] = Route(body=PNG, content_type="image/png")
    state.routes["/report"] = Route(body=PDF, content_type="application/pdf")
    yield state
    httpd.shutdown()
    httpd.server_close()
    thread.join(timeout=5)


def photo(name: str = "photo.png", path: str = "/photo") -> Attachment:
    return Attachment(AttachmentKind.IMAGE, name, path, content_type="image/png")


def report() -> Attachment:
    return Attachment(AttachmentKind.FILE, "report.pdf", "/report", "application/pdf")


def message(text: str, *attachments: Attachment) -> InboundMessage:
    return InboundMessage("files", "chat1", "alice", text, message_id="m1", attachments=attachments)


def _files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()] if root.exists() else []


def test_an_image_and_a_file_reach_the_function_agent_byte_for_byte(
    server: FileServer, tmp_path: Path
) -> None:
    seen: dict[str, object] = {}

    def agent(turn: Turn) -> str:
        seen["text"] = turn.text
        seen["files"] = [
            (f.name, f.content_type, f.size, hashlib.sha256(f.open().read()).hexdigest())
            for f in turn.attachments
        ]
        seen["paths"] = [f.path for f in turn.attachments]
        seen["on_disk"] = all(f.path.is_file() for f in turn.attachments)
        return "thanks"

    ch = FileChannel(server, tmp_path, FunctionAgent(agent))
    try:
        result = ch.handle_inbound(message("look", photo(), report())).result(timeout=10)
        assert result.status == "completed", result
        assert seen["text"] == "look"
        assert seen["files"] == [
            ("photo.png", "image/png", len(PNG), hashlib.sha256(PNG).hexdigest()),
            ("report.pdf", "application/pdf", len(PDF), hashlib.sha256(PDF).hexdigest()),
        ]
        assert seen["on_disk"] is True
        # downloaded on the run's worker, never on the caller's (ingress) thread
        assert threading.current_thread().name not in ch.sources_on
        # the run's workspace is gone once the run ended
        assert all(not Path(p).exists() for p in seen["paths"])  # type: ignore[attr-defined]
        assert _files(tmp_path) == [] and ch.workspaces.live == 0
    finally:
        ch.close(timeout=5)


def test_a_message_with_only_an_attachment_starts_a_run(server: FileServer, tmp_path: Path) -> None:
    got: list[tuple[str, int]] = []
    ch = FileChannel(
        server, tmp_path, FunctionAgent(lambda t: got.append((t.text, len(t.attachments))) or "ok")
    )
    try:
        result = ch.handle_inbound(message("", photo())).result(timeout=10)
        assert result.status == "completed"
        assert got == [("", 1)]
    finally:
        ch.close(timeout=5)


def test_a_text_only_bridge_gets_a_line_naming_each_local_path(
    server: FileServer, tmp_path: Path
) -> None:
    class TextBridge(FunctionAgent):
        prompt_with_attachments = None  # type: ignore[assignment]  # like an ACP agent

    seen: list[str] = []

    def agent(turn: Turn) -> str:
        seen.append(turn.text)
        path = turn.text.rsplit(" saved at ", 1)[1].rstrip("]")
        seen.append(hashlib.sha256(Path(path).read_bytes()).hexdigest())
        return "ok"

    ch = FileChannel(server, tmp_path, TextBridge(agent))
    try:
        assert ch.handle_inbound(message("what is it?", photo())).result(timeout=10).status == (
            "completed"
        )
        assert seen[0].startswith("what is it?\n\n[Attachment 'photo.png' (image/png, ")
        assert seen[1] == hashlib.sha256(PNG).hexdigest()
        assert _files(tmp_path) == []
    finally:
        ch.close(timeout=5)


def test_a_file_over_the_cap_is_told_once_read_no_further_and_the_run_still_starts(
    server: FileServer, tmp_path: Path
) -> None:
    cap = 256 * 1024
    server.routes["/endless"] = Route(body=b"z" * CHUNK, send_length=False, repeat=2000)
    texts: list[str] = []
    ch = FileChannel(server, tmp_path, FunctionAgent(lambda t: texts.append(t.text) or "done"))
    ch.attachment_limits = DownloadLimits(per_file=cap, chunk_size=CHUNK)
    try:
        big = Attachment(AttachmentKind.FILE, "huge.bin", "/endless")
        result = ch.handle_inbound(message("see both", big, photo())).result(timeout=20)
        assert result.status == "completed"
        assert ch.wait_idle(10)
        notices = [s for s in ch.sent if "huge.bin" in s]
        assert notices == ["huge.bin was not received: it is larger than the limit of 256 KB."]
        assert texts == [
            "see both\n\n[The person also sent 'huge.bin', which was not received: it is "
            "larger than the limit of 256 KB]"
        ]
        assert server.sent.get("/endless", 0) <= cap + CHUNK + KERNEL_SLACK
        assert _files(tmp_path) == [] and ch.workspaces.live == 0
    finally:
        ch.close(timeout=5)


def test_a_platform_that_cannot_download_tells_the_person_and_runs_with_the_text(
    tmp_path: Path,
) -> None:
    class NoFiles(ChannelBase):
        def __init__(self) -> None:
            super().__init__(
                ChannelConfig(name="files"), FunctionAgent(lambda t: t.text), clock=FakeClock()
            )
            self.workspaces = Workspaces(tmp_path, remove_at_exit=False)
            self.sent: list[str] = []

        def send_message(self, chat_id: str, text: str, *, thread_id: str | None = None) -> None:
            self.sent.append(text)

    ch = NoFiles()
    try:
        result = ch.handle_inbound(message("hi", photo())).result(timeout=10)
        assert result.status == "completed"
        assert "photo.png" in result.response and "NoFiles does not download" in result.response
        assert ch.wait_idle(10)
        assert "photo.png could not be received." in ch.sent
    finally:
        ch.close(timeout=5)


def test_stop_during_the_turn_removes_the_workspace(server: FileServer, tmp_path: Path) -> None:
    inside = threading.Event()
    paths: list[Path] = []

    def agent(turn: Turn) -> str:
        paths.extend(f.path for f in turn.attachments)
        inside.set()
        while not turn.cancelled:
            turn.wait_steered(0.05)
        return ""

    ch = FileChannel(server, tmp_path, FunctionAgent(agent))
    try:
        handle = ch.handle_inbound(message("work on it", photo()))
        assert inside.wait(10)
        assert paths and paths[0].is_file()
        assert ch.cancel_run(handle.session_id, handle.run_id)
        assert handle.result(timeout=10).status == "cancelled"
        assert not paths[0].exists() and _files(tmp_path) == []
    finally:
        ch.close(timeout=5)


def test_close_removes_the_workspace_of_a_live_run(server: FileServer, tmp_path: Path) -> None:
    inside = threading.Event()
    paths: list[Path] = []

    def agent(turn: Turn) -> str:
        paths.extend(f.path for f in turn.attachments)
        inside.set()
        while not turn.cancelled:
            turn.wait_steered(0.05)
        return ""

    ch = FileChannel(server, tmp_path, FunctionAgent(agent))
    handle = ch.handle_inbound(message("", report()))
    assert inside.wait(10)
    ch.close(timeout=5)
    assert handle.result(timeout=10).status == "cancelled"
    assert paths and not paths[0].exists() and _files(tmp_path) == []


def test_attachments_must_be_a_tuple_of_attachments(server: FileServer, tmp_path: Path) -> None:
    ch = FileChannel(server, tmp_path, FunctionAgent(lambda t: "ok"))
    try:
        with pytest.raises(ConfigurationError, match=r"msg\.attachments\[0\]"):
            ch.handle_inbound(message("x", "photo.png"))  # type: ignore[arg-type]
        with pytest.raises(ConfigurationError, match=r"msg\.attachments"):
            ch.handle_inbound(
                InboundMessage("files", "c", "a", "x", attachments=[photo()])  # type: ignore[arg-type]
            )
    finally:
        ch.close(timeout=5)

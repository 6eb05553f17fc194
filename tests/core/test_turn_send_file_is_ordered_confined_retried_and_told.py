"""``Turn.send_file`` / ``send_image`` on the platform contract (issue 25, outbound):
the file follows the text said before it (the segment ends first) and precedes later
text; the channel's ``upload_file`` returns the message id the turn gets; a path outside
the agent's root is refused before it is opened; a refused upload tells the person one
line naming the file and raises ``FileNotDelivered``; a 500 / 429 / broken connection is
retried on the channel's scheduler (fake clock) with the file reopened each attempt; the
default ``upload_file`` (a platform not wired) is the text fallback."""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path
from typing import Any

import pytest
from channelkit.agents import FunctionAgent, Turn
from channelkit.attachments import OutboundFile
from channelkit.core import SegmentEndReason
from channelkit.errors import (
    AttachmentRefused,
    AttachmentTooLarge,
    BadRequest,
    FileNotDelivered,
    RateLimited,
    ServerError,
    TransportError,
)
from channelkit.runtime import FakeClock
from channelkit.testing import inbound, make_channel, wait_until

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8


def _wait(predicate: Any, what: str, tick: Any = None) -> None:
    """State no event signals (a retry booked on the scheduler); fake time via ``tick``."""
    wait_until(predicate, what=what, tick=tick)


class _Uploads:
    """A platform's ``upload_file``: records each attempt (bytes read), fails on cue."""

    def __init__(self, failures: list[BaseException] | None = None) -> None:
        self.failures = list(failures or [])
        self.attempts: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def __call__(self, target: Any, file: Any, *, image: bool, caption: str | None) -> str:
        with file.open() as stream:
            data = stream.read()
        with self.lock:
            self.attempts.append(
                {
                    "name": file.name,
                    "sha": hashlib.sha256(data).hexdigest(),
                    "image": image,
                    "caption": caption,
                    "chat": target.chat_id,
                }
            )
            if self.failures:
                raise self.failures.pop(0)
            return f"m{len(self.attempts)}"


def _ordered(channel: Any) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for name, args in channel.records:
        if name == "on_response_chunk":
            out.append(("chunk", args[1]))
        elif name == "on_output_segment_end":
            out.append(("segment_end", args[3]))
        elif name == "send_message":
            out.append(("send", args[1]))
        elif name == "upload_file":
            out.append(("upload", args[1].name))
    return out


def _channel(agent: Any, uploads: _Uploads | None, **options: Any) -> Any:
    channel = make_channel(agent, **options)
    if uploads is not None:

        def upload(target: Any, file: Any, *, image: bool = False, caption: Any = None) -> str:
            channel.records.append(("upload_file", (target, file)))
            return uploads(target, file, image=image, caption=caption)

        channel.upload_file = upload
    return channel


def test_the_file_follows_the_text_before_it_and_its_message_id_comes_back(
    tmp_path: Path,
) -> None:
    (tmp_path / "chart.png").write_bytes(PNG)
    got: list[str] = []

    def fn(turn: Turn) -> str:
        turn.say("Here is the chart.")
        got.append(turn.send_image("chart.png", caption="Q3"))
        turn.say("Anything else?")
        return ""

    uploads = _Uploads()
    channel = _channel(FunctionAgent(fn, files_root=tmp_path), uploads)
    try:
        assert channel.handle_inbound(inbound("chart")).result(timeout=10).status == "completed"
        assert channel.wait_idle(10)
        assert got == ["m1"]
        assert uploads.attempts[0]["sha"] == hashlib.sha256(PNG).hexdigest()
        assert uploads.attempts[0]["image"] is True and uploads.attempts[0]["caption"] == "Q3"
        events = _ordered(channel)
        kinds = [kind for kind, _ in events]
        assert kinds[:4] == ["chunk", "segment_end", "upload", "chunk"], events
        assert events[1][1] is SegmentEndReason.RESPONSE_BOUNDARY
        assert "Anything else?" in events[3][1]
    finally:
        channel.close()


def test_a_path_outside_the_root_is_refused_before_it_is_opened(tmp_path: Path) -> None:
    root = tmp_path / "work"
    root.mkdir()
    secret = tmp_path / "secret.txt"
    secret.write_bytes(b"not yours")
    os.mkfifo(root / "pipe")  # opening a FIFO for reading would block: proves no open
    (root / "escape").symlink_to(secret)
    errors: list[BaseException] = []

    def fn(turn: Turn) -> str:
        for path in (str(secret), "../secret.txt", "escape", "pipe", str(root)):
            try:
                turn.send_file(path)
            except (AttachmentRefused, AttachmentTooLarge) as exc:
                errors.append(exc)
        return "done"

    uploads = _Uploads()
    channel = _channel(FunctionAgent(fn, files_root=root), uploads)
    try:
        assert channel.handle_inbound(inbound("leak")).result(timeout=10).status == "completed"
        assert len(errors) == 5 and all(isinstance(e, AttachmentRefused) for e in errors)
        reasons = [e.reason for e in errors]  # type: ignore[attr-defined]
        assert reasons[0] == "is outside the allowed root"
        assert "'..'" in reasons[1]
        assert reasons[2] == "is outside the allowed root"
        assert reasons[3] == reasons[4] == "is not a regular file"
        assert uploads.attempts == []
        assert channel.wait_idle(10)
        assert [args[1] for args in channel.calls("send_message")] == ["done"]
    finally:
        channel.close()


def test_a_file_over_the_agents_limit_is_refused_unread(tmp_path: Path) -> None:
    (tmp_path / "big.bin").write_bytes(b"x" * 2048)
    errors: list[BaseException] = []

    def fn(turn: Turn) -> str:
        try:
            turn.send_file("big.bin")
        except AttachmentTooLarge as exc:
            errors.append(exc)
        return "done"

    uploads = _Uploads()
    channel = _channel(FunctionAgent(fn, files_root=tmp_path, max_file_size=1024), uploads)
    try:
        assert channel.handle_inbound(inbound("big")).result(timeout=10).status == "completed"
        assert errors and errors[0].limit == 1024  # type: ignore[attr-defined]
        assert uploads.attempts == []
    finally:
        channel.close()


def test_a_refused_upload_tells_the_person_once_and_raises(tmp_path: Path) -> None:
    raised: list[FileNotDelivered] = []

    def fn(turn: Turn) -> str:
        try:
            turn.send_file(b"%PDF-1.7\n...", name="report.pdf")
        except FileNotDelivered as exc:
            raised.append(exc)
        return "after"

    refusal = BadRequest("Bad Request: file is too big", status=400)
    uploads = _Uploads([refusal])
    channel = _channel(FunctionAgent(fn, files_root=tmp_path), uploads)
    try:
        assert channel.handle_inbound(inbound("pdf")).result(timeout=10).status == "completed"
        assert channel.wait_idle(10)
        assert len(uploads.attempts) == 1  # a 400 is not retried
        error = raised[0]
        assert error.told is True and error.attempts == 1 and error.name == "report.pdf"
        sent = [args[1] for args in channel.calls("send_message")]
        assert sent[0] == (
            "The agent's file report.pdf could not be sent here: the platform refused it "
            "(HTTP 400: Bad Request: file is too big)."
        )
        assert sent[1:] == ["after"]
    finally:
        channel.close()


def test_the_default_upload_is_the_text_fallback(tmp_path: Path) -> None:
    raised: list[FileNotDelivered] = []

    def fn(turn: Turn) -> str:
        try:
            turn.send_file(b"hello", name="note.txt")
        except FileNotDelivered as exc:
            raised.append(exc)
        return ""

    channel = _channel(FunctionAgent(fn, files_root=tmp_path), None)
    try:
        assert channel.handle_inbound(inbound("note")).result(timeout=10).status == "completed"
        assert channel.wait_idle(10)
        assert raised and raised[0].told is True and raised[0].attempts == 1
        assert [args[1] for args in channel.calls("send_message")] == [
            "The agent's file note.txt could not be sent here: this platform does not take "
            "files from the bot yet."
        ]
    finally:
        channel.close()


@pytest.mark.parametrize(
    "failure",
    [
        ServerError("Internal Server Error", status=500, retryable=True),
        RateLimited("Too Many Requests", status=429, retry_after=3),
        TransportError("POST /sendDocument: ConnectionResetError"),
    ],
    ids=["500", "429", "reset"],
)
def test_an_upload_failing_once_is_retried_with_the_file_read_again(
    tmp_path: Path, failure: BaseException
) -> None:
    (tmp_path / "data.csv").write_bytes(b"a,b\n1,2\n")
    got: list[str] = []

    def fn(turn: Turn) -> str:
        got.append(turn.send_file("data.csv"))
        return ""

    clock = FakeClock()
    uploads = _Uploads([failure])
    channel = _channel(FunctionAgent(fn, files_root=tmp_path), uploads, clock=clock)
    try:
        handle = channel.handle_inbound(inbound("csv"))
        _wait(lambda: channel.files.waiting == 1, "a retry booked on the scheduler")
        assert len(uploads.attempts) == 1
        _wait(lambda: bool(got), "the retried upload", tick=lambda: clock.advance(1.0))
        assert handle.result(timeout=10).status == "completed"
        assert got == ["m2"]
        shas = {a["sha"] for a in uploads.attempts}
        assert len(uploads.attempts) == 2 and shas == {hashlib.sha256(b"a,b\n1,2\n").hexdigest()}
        assert channel.calls("send_message") == []  # nothing told: it arrived
    finally:
        channel.close()


def test_channel_send_file_sends_outside_a_run_and_confines_to_its_root(tmp_path: Path) -> None:
    (tmp_path / "out.txt").write_bytes(b"report")
    uploads = _Uploads()
    channel = _channel(FunctionAgent(lambda turn: ""), uploads)
    try:
        assert channel.send_file("chat-1", "out.txt", root=tmp_path) == "m1"
        assert uploads.attempts[0]["chat"] == "chat-1"
        with pytest.raises(AttachmentRefused):
            channel.send_file("chat-1", str(tmp_path / "out.txt"), root=tmp_path / "nowhere")
        assert len(uploads.attempts) == 1
    finally:
        channel.close()


def test_outbound_file_is_reopened_for_every_read(tmp_path: Path) -> None:
    from channelkit.attachments import confine

    (tmp_path / "a.bin").write_bytes(b"12345")
    file = confine("a.bin", tmp_path)
    assert isinstance(file, OutboundFile)
    assert file.open().read() == file.open().read() == b"12345"

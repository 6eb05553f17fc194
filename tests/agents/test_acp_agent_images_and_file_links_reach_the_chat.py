"""An ACP agent's own ``image`` content blocks and ``file://`` resource links in its
``agent_message_chunk`` updates reach the chat through the channel's file delivery
(``upload_file``, as ``Turn.send_image`` / ``send_file`` do): the image after the text
streamed before it and before the text after it, holding the bytes the agent sent; a
link to a file inside the bridge's ``files_root`` goes as a file; one outside it, a
file over ``max_file_size`` or data that is not base64 is never uploaded (nor opened)
and the person reads one line naming it instead (issue 25, outbound)."""

from __future__ import annotations

import base64
import hashlib
import os
import threading
from pathlib import Path
from typing import Any

import pytest
from acp_testkit import WAIT, RecordingSink, fake_agent_command
from channelkit.agents.acp import AcpBridge
from channelkit.errors import ConfigurationError
from channelkit.testing import inbound, make_channel

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8
PDF = b"%PDF-1.7\n" + b"quarterly figures " * 100


class _Uploads:
    """The platform's ``upload_file``: records what it was given (bytes read)."""

    def __init__(self) -> None:
        self.attempts: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def __call__(self, target: Any, file: Any, *, image: bool, caption: str | None) -> str:
        with file.open() as stream:
            data = stream.read()
        with self.lock:
            self.attempts.append(
                {"name": file.name, "sha": hashlib.sha256(data).hexdigest(), "image": image}
            )
            return f"m{len(self.attempts)}"


def _channel(bridge: AcpBridge, uploads: _Uploads) -> Any:
    channel = make_channel(bridge)

    def upload(target: Any, file: Any, *, image: bool = False, caption: Any = None) -> str:
        channel.records.append(("upload_file", (target, file)))
        return uploads(target, file, image=image, caption=caption)

    channel.upload_file = upload
    return channel


def _ordered(channel: Any) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for name, args in channel.records:
        if name == "on_response_chunk":
            out.append(("chunk", args[1]))
        elif name == "upload_file":
            out.append(("upload", args[1].name))
    return out


def _run(bridge: AcpBridge, uploads: _Uploads, text: str) -> Any:
    channel = _channel(bridge, uploads)
    try:
        result = channel.handle_inbound(inbound(text)).result(timeout=WAIT * 2)
        assert result.status == "completed", result
        assert channel.wait_idle(WAIT)
        return _ordered(channel), [args[1] for args in channel.calls("send_message")]
    finally:
        channel.close()


@pytest.fixture
def bridge(tmp_path: Path) -> Any:
    root = tmp_path / "work"
    root.mkdir()
    made = AcpBridge(fake_agent_command(), cwd=root, request_timeout=WAIT, max_file_size=4096)
    yield made
    made.close()


def test_an_agents_image_block_is_uploaded_as_an_image_in_order(bridge: AcpBridge) -> None:
    uploads = _Uploads()
    events, _ = _run(bridge, uploads, "picture " + base64.b64encode(PNG).decode())
    assert uploads.attempts == [
        {"name": "image.png", "sha": hashlib.sha256(PNG).hexdigest(), "image": True}
    ]
    kinds = [kind for kind, _ in events]
    upload = kinds.index("upload")
    assert "Here it is." in "".join(str(v) for k, v in events[:upload] if k == "chunk")
    assert "Anything else?" in "".join(str(v) for k, v in events[upload:] if k == "chunk")


def test_a_link_to_a_file_in_the_root_is_uploaded_as_a_file(bridge: AcpBridge) -> None:
    report = Path(bridge.files_root) / "q3 report.pdf"
    report.write_bytes(PDF)
    uploads = _Uploads()
    _run(bridge, uploads, "link " + report.as_uri())
    assert uploads.attempts == [
        {"name": "q3 report.pdf", "sha": hashlib.sha256(PDF).hexdigest(), "image": False}
    ]


def test_what_cannot_be_sent_is_named_to_the_person_and_never_uploaded(
    bridge: AcpBridge, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_bytes(b"not yours")
    fifo = Path(bridge.files_root) / "pipe"
    os.mkfifo(fifo)  # opening it would block: proves it is refused unopened
    big = base64.b64encode(PNG * 3).decode()  # over max_file_size (4096) once decoded
    cases = [
        ("link " + secret.as_uri(), "secret.txt", "is outside the allowed root"),
        ("link " + fifo.as_uri(), "pipe", "is not a regular file"),
        ("picture " + big, "image.png", "it is larger than the limit of 4 KB"),
        ("picture not*base64", "image.png", "its data is not base64"),
    ]
    for text, name, reason in cases:
        uploads = _Uploads()
        events, sent = _run(bridge, uploads, text)
        assert uploads.attempts == []
        shown = "".join(sent)
        assert f"The agent's file {name} could not be sent here: {reason}." in shown, shown


def test_a_sink_that_cannot_send_files_gets_the_line(bridge: AcpBridge) -> None:
    sink = RecordingSink()  # no file() method
    text = bridge.prompt("s", "picture " + base64.b64encode(PNG).decode(), sink)
    assert "could not be sent here: this channel does not send files" in text
    assert text.startswith("Here it is.") and text.endswith("Anything else?")


def test_bad_file_settings_are_refused_naming_the_field() -> None:
    for value in (0, -1, 1.5, True):
        with pytest.raises(ConfigurationError, match="^max_file_size: "):
            AcpBridge(fake_agent_command(), max_file_size=value)  # type: ignore[arg-type]

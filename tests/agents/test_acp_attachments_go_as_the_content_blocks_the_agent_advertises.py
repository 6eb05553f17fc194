"""A person's files reach an ACP agent as the ``session/prompt`` content blocks its
``initialize`` result advertises (``agentCapabilities.promptCapabilities``): an image as an
``image`` block, audio as an ``audio`` block, a small text file as an embedded
``resource``, anything else as a ``resource_link`` (with the line naming its local path);
an agent that takes no such block gets the line alone, as before. What is inlined is
bounded per file and per prompt. Driven against our fake ACP agent, whose ``blocks``
turn streams back the blocks it received (base64 payloads as sha256 and size); the last
test goes through the Telegram playground: a photo sent in the chat arrives as an image
block holding the bytes sent (issue 25)."""

from __future__ import annotations

import base64
import hashlib
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import requests
from acp_testkit import WAIT, RecordingSink, fake_agent_command
from channelkit.agents.acp import AcpBridge, ContentLimits, PromptCapabilities
from channelkit.agents.acp.content import prompt_blocks
from channelkit.attachments import ReceivedFile, Workspaces
from channelkit.core.inbound_files import file_lines
from channelkit.errors import ConfigurationError

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8
JPEG = b"\xff\xd8\xff\xe0" + b"\x10" * 900
OGG = b"OggS" + b"\x00" * 700
PDF = b"%PDF-1.7\n" + b"quarterly figures " * 100
NOTES = "line one\nline two: caf\u00e9\n".encode()

ALL = {"image": True, "audio": True, "embeddedContext": True}


def _file(tmp_path: Path, name: str, data: bytes, content_type: str) -> ReceivedFile:
    path = tmp_path / name
    path.write_bytes(data)
    digest = hashlib.sha256(data).hexdigest()
    return ReceivedFile(path, name, content_type, len(data), digest)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _blocks(bridge: AcpBridge, files: list[ReceivedFile], text: str = "blocks") -> list[Any]:
    """The content blocks the fake agent received for one turn, as it summarized them."""
    sink = RecordingSink()
    answer = bridge.prompt_with_attachments("s", text, files, sink)
    return list(json.loads(answer))


@pytest.fixture
def bridge_with(make_fake_bridge: Callable[..., AcpBridge]) -> Callable[..., AcpBridge]:
    """``bridge_with(capabilities, **bridge_kwargs)``: the fake agent advertising
    ``capabilities`` as its promptCapabilities (None: it advertises none)."""

    def make(capabilities: dict[str, Any] | None, **kwargs: Any) -> AcpBridge:
        env = {}
        if capabilities is not None:
            env["FAKE_ACP_PROMPT_CAPABILITIES"] = json.dumps(capabilities)
        return make_fake_bridge(agent_env=env, **kwargs)

    return make


def test_an_image_goes_as_an_image_block_when_the_agent_advertises_image(
    bridge_with: Callable[..., AcpBridge], tmp_path: Path
) -> None:
    bridge = bridge_with({"image": True})
    photo = _file(tmp_path, "photo.png", PNG, "image/png")
    blocks = _blocks(bridge, [photo])
    assert blocks == [
        {"type": "text", "text": "blocks"},  # no path line: the image is in the prompt
        {
            "type": "image",
            "mimeType": "image/png",
            "sha256": _sha(PNG),
            "bytes": len(PNG),
            "uri": photo.path.as_uri(),
        },
    ]
    assert bridge.prompt_capabilities() == PromptCapabilities(image=True)


def test_an_image_goes_as_the_path_line_when_the_agent_does_not_advertise_image(
    bridge_with: Callable[..., AcpBridge], tmp_path: Path
) -> None:
    photo = _file(tmp_path, "photo.png", PNG, "image/png")
    voice = _file(tmp_path, "voice.ogg", OGG, "audio/ogg")
    for capabilities in (None, {"image": False, "audio": False}, {"image": "yes"}):
        bridge = bridge_with(capabilities)
        blocks = _blocks(bridge, [photo, voice])
        # exactly the lines every text-only bridge gets
        assert blocks == [{"type": "text", "text": "blocks\n\n" + file_lines([photo, voice])}]
        assert str(photo.path) in blocks[0]["text"]
        bridge.close()


def test_a_pdf_goes_as_a_resource_link_to_the_local_file_with_its_path_line(
    bridge_with: Callable[..., AcpBridge], tmp_path: Path
) -> None:
    report = _file(tmp_path, "q3 report.pdf", PDF, "application/pdf")
    for capabilities in (None, ALL):  # a resource link needs no capability
        bridge = bridge_with(capabilities)
        blocks = _blocks(bridge, [report])
        assert blocks == [
            {"type": "text", "text": "blocks\n\n" + file_lines([report])},
            {
                "type": "resource_link",
                "uri": report.path.as_uri(),
                "name": "q3 report.pdf",
                "mimeType": "application/pdf",
                "size": len(PDF),
            },
        ]
        assert blocks[1]["uri"].startswith("file:///") and "%20" in blocks[1]["uri"]
        bridge.close()


def test_audio_goes_as_an_audio_block_and_mixed_files_keep_their_order(
    bridge_with: Callable[..., AcpBridge], tmp_path: Path
) -> None:
    bridge = bridge_with({"audio": True})
    voice = _file(tmp_path, "voice.ogg", OGG, "audio/ogg")
    photo = _file(tmp_path, "photo.png", PNG, "image/png")
    report = _file(tmp_path, "q3.pdf", PDF, "application/pdf")
    blocks = _blocks(bridge, [voice, photo, report])
    assert blocks[0] == {"type": "text", "text": "blocks\n\n" + file_lines([photo, report])}
    assert blocks[1] == {
        "type": "audio",
        "mimeType": "audio/ogg",
        "sha256": _sha(OGG),
        "bytes": len(OGG),
    }
    assert [b["type"] for b in blocks[2:]] == ["resource_link"]
    assert blocks[2]["name"] == "q3.pdf"


def test_a_small_text_file_is_embedded_only_when_the_agent_takes_embedded_context(
    bridge_with: Callable[..., AcpBridge], tmp_path: Path
) -> None:
    notes = _file(tmp_path, "notes.txt", NOTES, "text/plain; charset=utf-8")
    embedding = bridge_with(
        {"embeddedContext": True}, content_limits=ContentLimits(embedded_text_bytes=len(NOTES))
    )
    assert _blocks(embedding, [notes]) == [
        {"type": "text", "text": "blocks"},
        {
            "type": "resource",
            "resource": {
                "uri": notes.path.as_uri(),
                "mimeType": "text/plain",
                "text": NOTES.decode(),
            },
        },
    ]
    # one byte over the bound, or an agent without embeddedContext: a resource link
    tight = bridge_with(ALL, content_limits=ContentLimits(embedded_text_bytes=len(NOTES) - 1))
    plain = bridge_with({"image": True})
    for bridge in (tight, plain):
        blocks = _blocks(bridge, [notes])
        assert [b["type"] for b in blocks] == ["text", "resource_link"]
        assert blocks[0]["text"] == "blocks\n\n" + file_lines([notes])
    # text the sniffer took for UTF-8 from its first bytes but that is not: linked
    broken = _file(tmp_path, "broken.txt", b"fine start " * 60 + b"\xff\xfe", "text/plain")
    assert [b["type"] for b in _blocks(embedding, [broken])] == ["text", "resource_link"]


def test_an_image_over_the_inline_bound_goes_as_a_resource_link(
    bridge_with: Callable[..., AcpBridge], tmp_path: Path
) -> None:
    bridge = bridge_with(ALL, content_limits=ContentLimits(inline_bytes=len(PNG) - 1))
    photo = _file(tmp_path, "photo.png", PNG, "image/png")
    blocks = _blocks(bridge, [photo])
    assert blocks == [
        {"type": "text", "text": "blocks\n\n" + file_lines([photo])},
        {
            "type": "resource_link",
            "uri": photo.path.as_uri(),
            "name": "photo.png",
            "mimeType": "image/png",
            "size": len(PNG),
        },
    ]


def test_a_file_larger_than_recorded_is_never_inlined(tmp_path: Path) -> None:
    photo = _file(tmp_path, "photo.png", PNG, "image/png")
    # the file grew after it was received: its recorded size is under the bound, its
    # bytes are not; reading stops one byte past the bound and the image is linked
    grown = ReceivedFile(photo.path, photo.name, photo.content_type, 100, photo.sha256)
    limits = ContentLimits(inline_bytes=len(PNG) - 1)
    blocks = prompt_blocks("", [grown], PromptCapabilities(image=True), limits)
    assert [b["type"] for b in blocks] == ["text", "resource_link"]
    assert blocks[0]["text"] == file_lines([grown])


def test_what_one_prompt_inlines_is_bounded_in_total(
    bridge_with: Callable[..., AcpBridge], tmp_path: Path
) -> None:
    first = _file(tmp_path, "first.png", PNG, "image/png")
    second = _file(tmp_path, "second.jpg", JPEG, "image/jpeg")
    third = _file(tmp_path, "third.png", PNG[:100], "image/png")
    # room for the first and the third together, not for the second as well
    limits = ContentLimits(inline_total_bytes=len(PNG) + 100)
    bridge = bridge_with({"image": True}, content_limits=limits)
    blocks = _blocks(bridge, [first, second, third])
    assert [b["type"] for b in blocks] == ["text", "image", "resource_link", "image"]
    assert blocks[0]["text"] == "blocks\n\n" + file_lines([second])
    assert [b.get("sha256") for b in blocks[1::2]] == [_sha(PNG), _sha(PNG[:100])]
    assert blocks[2]["name"] == "second.jpg"


def test_a_file_alone_sends_no_empty_text_block(tmp_path: Path) -> None:
    photo = _file(tmp_path, "photo.png", PNG, "image/png")
    blocks = prompt_blocks("", [photo], PromptCapabilities(image=True), ContentLimits())
    assert [b["type"] for b in blocks] == ["image"]
    assert base64.b64decode(blocks[0]["data"]) == PNG
    # without the capability the path line is the whole prompt
    assert prompt_blocks("", [photo], PromptCapabilities(), ContentLimits()) == [
        {"type": "text", "text": file_lines([photo])}
    ]


def test_bad_limits_and_bad_files_are_refused_naming_the_field(
    bridge_with: Callable[..., AcpBridge], tmp_path: Path
) -> None:
    for name, value in (
        ("inline_bytes", -1),
        ("inline_total_bytes", 1.5),
        ("embedded_text_bytes", True),
    ):
        with pytest.raises(ConfigurationError, match=f"^{name}: must be an int >= 0"):
            ContentLimits(**{name: value})
    with pytest.raises(ConfigurationError, match="^content_limits: must be a ContentLimits"):
        AcpBridge(fake_agent_command(), content_limits={"inline_bytes": 1})  # type: ignore[arg-type]
    bridge = bridge_with({"image": True})
    photo = _file(tmp_path, "photo.png", PNG, "image/png")
    with pytest.raises(ConfigurationError, match=r"^attachments\[1\]: must be a ReceivedFile"):
        bridge.prompt_with_attachments("s", "blocks", [photo, str(photo.path)], RecordingSink())  # type: ignore[list-item]
    with pytest.raises(ConfigurationError, match="^text: must be a string"):
        bridge.prompt_with_attachments("s", None, [photo], RecordingSink())  # type: ignore[arg-type]
    assert bridge.pid is None  # refused before the agent was started


def test_inlining_turned_off_links_every_image(
    bridge_with: Callable[..., AcpBridge], tmp_path: Path
) -> None:
    bridge = bridge_with(ALL, content_limits=ContentLimits(inline_bytes=0, embedded_text_bytes=0))
    photo = _file(tmp_path, "photo.png", PNG, "image/png")
    notes = _file(tmp_path, "notes.txt", NOTES, "text/plain; charset=utf-8")
    blocks = _blocks(bridge, [photo, notes])
    assert [b["type"] for b in blocks] == ["text", "resource_link", "resource_link"]


# -- through a chat: the Telegram playground ------------------------------------------------


def _until(predicate: Callable[[], Any], what: str, timeout: float = WAIT * 2) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def test_a_photo_sent_in_the_chat_reaches_the_agent_as_an_image_block(tmp_path: Path) -> None:
    from channelkit.playground import Playground

    env = {"FAKE_ACP_PROMPT_CAPABILITIES": json.dumps({"image": True})}
    bridge = AcpBridge(fake_agent_command(), cwd=tmp_path, env=env, request_timeout=WAIT)
    root = tmp_path / "files"
    try:
        with Playground(platform="telegram", agent=bridge, ingress="webhook") as pg:
            pg.channel.workspaces = Workspaces(root, remove_at_exit=False)
            data = base64.b64encode(PNG).decode()
            photo = {"name": "cat.png", "contentType": "image/png", "base64": data}
            body = {"text": "blocks", "files": [photo]}
            response = requests.post(f"{pg.url}/_emulator/send", json=body, timeout=WAIT)
            assert response.status_code == 200, response.text

            def answer() -> list[Any] | None:
                state = requests.get(f"{pg.url}/_emulator/state", timeout=WAIT).json()
                for entry in state["timeline"]:
                    text = (
                        state["views"][entry["card"]].get("text", "")
                        if entry["kind"] == "card"
                        else ""
                    )
                    if text.startswith("[{"):
                        return list(json.loads(text))
                return None

            blocks = _until(answer, "the agent's answer naming the blocks it received")
            assert blocks[0] == {"type": "text", "text": "blocks"}
            assert len(blocks) == 2 and blocks[1]["type"] == "image"
            assert blocks[1]["mimeType"] == "image/png"
            assert (blocks[1]["sha256"], blocks[1]["bytes"]) == (_sha(PNG), len(PNG))
            assert blocks[1]["uri"].startswith(root.as_uri() + "/")
            _until(lambda: not any(p.is_file() for p in root.rglob("*")), "the run's files removed")
    finally:
        bridge.close()

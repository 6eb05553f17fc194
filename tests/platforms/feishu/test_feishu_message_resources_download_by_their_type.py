"""Feishu inbound images and files (issue 25), what only Feishu does: a message names
its resources by key (``image_key`` in image messages and in a post's ``img``
elements, ``file_key`` in file, audio and video messages); each is fetched from the
message resource API of that message, with ``type=image`` for an image key and
``type=file`` for a file key, and the tenant token. The emulator refuses a wrong type,
a key asked for under another message, and a call without a valid token."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import requests
from channelkit.attachments import DownloadLimits, download
from channelkit.attachments.model import AttachmentKind
from channelkit.clients.feishu import FeishuClient
from channelkit.errors import AttachmentFailed
from channelkit.platforms.feishu.files import resource_source, split_reference
from channelkit.platforms.feishu.ingress import parse_message_event
from channelkit.playground import CallbackDelivery, EmulatorServer
from channelkit.playground.emulator import EmulatedFile

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
PDF = b"%PDF-1.7\n" + b"feishu " * 400


@pytest.fixture(scope="module")
def emu() -> Iterator[tuple[EmulatorServer, list[Mapping[str, Any]]]]:
    events: list[Mapping[str, Any]] = []

    def deliver(url: str, headers: Mapping[str, str], body: bytes) -> CallbackDelivery:
        events.append(json.loads(body))
        return CallbackDelivery(status=200, body="{}")

    with EmulatorServer(
        platform="feishu", deliver=deliver, encrypt_key=None, ingress="http"
    ) as server:
        yield server, events


def _event(message_type: str, content: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "event": {
            "sender": {"sender_id": {"open_id": "ou_1"}, "sender_type": "user"},
            "message": {
                "message_id": "om_1",
                "chat_id": "oc_1",
                "chat_type": "p2p",
                "message_type": message_type,
                "content": json.dumps(content),
            },
        }
    }


def test_each_message_kind_names_its_resources() -> None:
    cases = {
        "image": ({"image_key": "img_v3_a"}, AttachmentKind.IMAGE, "image", "image"),
        "file": (
            {"file_key": "file_v3_b", "file_name": "q3.pdf"},
            AttachmentKind.FILE,
            "q3.pdf",
            "file",
        ),
        "audio": ({"file_key": "file_v3_c", "duration": 2500}, AttachmentKind.AUDIO, None, "file"),
        "media": (
            {"file_key": "file_v3_d", "image_key": "img_v3_cover", "file_name": "v.mp4"},
            AttachmentKind.VIDEO,
            "v.mp4",
            "file",
        ),
    }
    for message_type, (content, kind, name, resource_type) in cases.items():
        message = parse_message_event(_event(message_type, content))
        assert message is not None and message.text == ""
        (attachment,) = message.attachments
        assert attachment.kind == kind
        assert name is None or attachment.name == name
        parts = split_reference(attachment.reference)
        assert parts is not None and parts[:2] == ("om_1", resource_type)
    audio = parse_message_event(_event("audio", cases["audio"][0]))
    assert audio is not None and audio.attachments[0].duration == 2.5
    post = parse_message_event(
        _event(
            "post",
            {
                "title": "",
                "content": [
                    [{"tag": "text", "text": "look"}],
                    [{"tag": "img", "image_key": "img_v3_e"}],
                ],
            },
        )
    )
    assert post is not None and post.text == "look"
    assert [split_reference(a.reference) for a in post.attachments] == [
        ("om_1", "image", "img_v3_e")
    ]
    # a sticker (no downloadable resource) is still no message for the bot
    assert parse_message_event(_event("sticker", {"file_key": "x"})) is None


def test_resources_download_with_their_type_and_message_only(
    emu: tuple[EmulatorServer, list[Mapping[str, Any]]], tmp_path: Path
) -> None:
    server, events = emu
    server.emulator.send_user_files(
        "two files",
        (EmulatedFile("a.png", "image/png", PNG), EmulatedFile("b.pdf", "application/pdf", PDF)),
    )
    post, file_message = (parse_message_event(e) for e in events[-2:])
    assert post is not None and file_message is not None
    assert post.text == "two files" and file_message.text == ""
    (image,), (document,) = post.attachments, file_message.attachments
    assert document.name == "b.pdf"
    with FeishuClient(
        app_id=server.emulator.app_id, app_secret=server.emulator.app_secret, base_url=server.url
    ) as client:
        assert client.token_provider is not None
        token = client.token_provider.get_token()
    limits = DownloadLimits()
    with requests.Session() as session:

        def fetch(url: str, name: str, token: str = token) -> bytes:
            received = download(
                session,
                url,
                tmp_path,
                name=name,
                headers={"Authorization": f"Bearer {token}"},
                limits=limits,
            )
            return received.path.read_bytes()

        image_url = resource_source(image, server.url, token).url
        document_url = resource_source(document, server.url, token).url
        assert image_url.endswith("?type=image") and document_url.endswith("?type=file")
        assert fetch(image_url, "a.png") == PNG
        assert fetch(document_url, "b.pdf") == PDF
        refused = [
            image_url.replace("type=image", "type=file"),  # an image key needs type=image
            document_url.replace("type=file", "type=image"),
            document_url.replace(file_message.message_id, post.message_id),  # another message
        ]
        for url in refused:
            with pytest.raises(AttachmentFailed) as failed:
                fetch(url, "x.bin")
            assert failed.value.status == 400
        with pytest.raises(AttachmentFailed):
            fetch(image_url, "y.png", token="t-not-a-token")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.png", "b.pdf"]

"""DingTalk inbound pictures and files (issue 25), what only DingTalk does: a robot
message names its media by ``downloadCode`` (a picture, file, audio or video message,
and each picture of a richText message); the code and the robot code are exchanged
for a temporary ``downloadUrl`` (``POST /v1.0/robot/messageFiles/download``, with the
access token), which is fetched only from DingTalk's own hosts. The emulator refuses
another robot's code exchange and a changed or expired download URL."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import requests
from channelkit.attachments import DownloadLimits, download
from channelkit.attachments.model import Attachment, AttachmentKind
from channelkit.errors import AttachmentFailed, AttachmentRefused, BadRequest
from channelkit.platforms.dingtalk.api import CardApi
from channelkit.platforms.dingtalk.files import file_hosts, file_source, parse_media
from channelkit.platforms.dingtalk.ingress import parse_robot_message
from channelkit.playground import CallbackDelivery, EmulatorServer
from channelkit.playground.emulator import EmulatedFile

PDF = b"%PDF-1.7\n" + b"dingtalk " * 400


@pytest.fixture(scope="module")
def emu() -> Iterator[tuple[EmulatorServer, list[Mapping[str, Any]]]]:
    bodies: list[Mapping[str, Any]] = []

    def deliver(url: str, headers: Mapping[str, str], body: bytes) -> CallbackDelivery:
        bodies.append(json.loads(body))
        return CallbackDelivery(status=200, body='{"success": true}')

    with EmulatorServer(platform="dingtalk", deliver=deliver, ingress="http") as server:
        yield server, bodies


def test_each_message_kind_names_its_download_codes() -> None:
    (picture,) = parse_media("picture", {"downloadCode": "dc1"})
    (document,) = parse_media("file", {"downloadCode": "dc2", "fileName": "q3.pdf"})
    (voice,) = parse_media("audio", {"downloadCode": "dc3", "duration": 4200, "recognition": "hi"})
    (video,) = parse_media("video", {"downloadCode": "dc4", "duration": 1500, "videoType": "mp4"})
    assert (picture.kind, picture.reference) == (AttachmentKind.IMAGE, "dc1")
    assert (document.kind, document.name, document.reference) == (
        AttachmentKind.FILE,
        "q3.pdf",
        "dc2",
    )
    assert (voice.kind, voice.duration) == (AttachmentKind.AUDIO, 4.2)  # milliseconds
    assert (video.kind, video.duration) == (AttachmentKind.VIDEO, 1.5)
    rich = parse_media(
        "richText",
        {"richText": [{"text": "look"}, {"type": "picture", "downloadCode": "dc5"}]},
    )
    assert [(a.kind, a.reference) for a in rich] == [(AttachmentKind.IMAGE, "dc5")]
    assert parse_media("text", {"downloadCode": "x"}) == ()


def test_download_urls_only_from_dingtalks_hosts() -> None:
    item = Attachment(kind=AttachmentKind.FILE, name="a.pdf", reference="dc")
    for url in (
        "https://down.dingtalk.com/ddmedia/abc.file",
        "https://dingtalk.com/x",
    ):
        assert file_source(item, url, ()).url == url
        assert file_source(item, url, ()).headers == {}
    for url in (
        "https://down.dingtalk.com.evil.example/x",
        "https://evildingtalk.com/x",
        "http://down.dingtalk.com/x",
        "https://127.0.0.1/x",
    ):
        with pytest.raises(AttachmentRefused):
            file_source(item, url, ())
    assert file_hosts("https://api.dingtalk.com") == ()
    assert file_hosts("http://127.0.0.1:9") == ("127.0.0.1",)


def test_the_code_exchange_and_the_signed_url(
    emu: tuple[EmulatorServer, list[Mapping[str, Any]]], tmp_path: Path
) -> None:
    server, bodies = emu
    server.emulator.send_user_files("", (EmulatedFile("q3.pdf", "application/pdf", PDF),))
    message = parse_robot_message(bodies[-1])
    assert message is not None and message.text == "" and message.msgtype == "file"
    (document,) = message.attachments
    assert document.name == "q3.pdf"
    emulator = server.emulator
    api = CardApi.create(emulator.app_key, emulator.app_secret, base_url=server.url)
    other = CardApi.create(emulator.app_key, emulator.app_secret, base_url=server.url)
    other.robot_code = "another-robot"
    try:
        url = api.message_file_url(document.reference)
        with pytest.raises(BadRequest):
            other.message_file_url(document.reference)  # another robot's code: refused
        with pytest.raises(BadRequest):
            api.message_file_url("dc_not-a-code")
    finally:
        api.close()
        other.close()
    source = file_source(document, url, file_hosts(server.url))
    limits = DownloadLimits()
    with requests.Session() as session:
        received = download(session, source.url, tmp_path, name=document.name, limits=limits)
        assert received.path.read_bytes() == PDF
        for changed in (url.replace("expires=", "expires=9"), url[: url.index("&sig=")]):
            with pytest.raises(AttachmentFailed) as failed:
                download(session, changed, tmp_path, name="x.pdf", limits=limits)
            assert failed.value.status == 403
    assert [p.name for p in tmp_path.iterdir()] == ["q3.pdf"]

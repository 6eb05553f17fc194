"""Slack inbound files (issue 25), what only Slack does: a ``file_share`` message's
file objects become attachments referencing ``url_private_download``; the download
carries the bot token and goes only to Slack's file host (a URL on any other host is
refused before the token is sent); the emulator serves a file only with the bot token
and, like Slack, redirects anyone else to its sign-in page, which the download refuses."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
import requests
from channelkit.attachments import DownloadLimits, download
from channelkit.attachments.model import Attachment, AttachmentKind
from channelkit.errors import AttachmentRefused
from channelkit.platforms.slack.files import SLACK_FILE_HOSTS, file_hosts, file_source
from channelkit.platforms.slack.ingress import parse_message
from channelkit.playground import CallbackDelivery, EmulatorServer
from channelkit.playground.emulator import EmulatedFile

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4


@pytest.fixture(scope="module")
def emu() -> Iterator[tuple[EmulatorServer, list[Mapping[str, object]]]]:
    events: list[Mapping[str, object]] = []

    def deliver(url: str, headers: Mapping[str, str], body: bytes) -> CallbackDelivery:
        events.append(json.loads(body)["event"])
        return CallbackDelivery(status=200, body="{}")

    with EmulatorServer(platform="slack", deliver=deliver) as server:
        yield server, events


def test_a_file_share_message_becomes_attachments() -> None:
    event = {
        "type": "message",
        "subtype": "file_share",
        "channel": "D1",
        "user": "U1",
        "ts": "1.000001",
        "text": "",
        "files": [
            {
                "id": "F1",
                "name": "q3.pdf",
                "mimetype": "application/pdf",
                "size": 36009,
                "url_private": "https://files.slack.com/files-pri/T1-F1/q3.pdf",
                "url_private_download": "https://files.slack.com/files-pri/T1-F1/download/q3.pdf",
            },
            {"id": "F2", "name": "cat.png", "mimetype": "image/png", "mode": "external"},
        ],
    }
    message = parse_message(event)
    assert message is not None and message.text == ""
    pdf, png = message.attachments
    assert pdf == Attachment(
        kind=AttachmentKind.FILE,
        name="q3.pdf",
        reference="https://files.slack.com/files-pri/T1-F1/download/q3.pdf",
        content_type="application/pdf",
        size=36009,
    )
    # no download URL: kept (the person is told), never dropped
    assert (png.kind, png.name, png.reference) == (AttachmentKind.IMAGE, "cat.png", "")
    # another subtype is still not a person's message
    assert parse_message({**event, "subtype": "message_changed"}) is None


def test_the_download_goes_only_to_slacks_file_host_with_the_token() -> None:
    def attachment(url: str) -> Attachment:
        return Attachment(kind=AttachmentKind.FILE, name="a.pdf", reference=url)

    source = file_source(
        attachment("https://files.slack.com/files-pri/T1-F1/download/a.pdf"),
        "xoxb-secret",
        SLACK_FILE_HOSTS,
    )
    assert source.headers == {"Authorization": "Bearer xoxb-secret"}
    assert source.allowed_redirect_hosts == ()
    for foreign in (
        "https://files.slack.com.evil.example/files-pri/a.pdf",
        "https://evil.example/files-pri/T1-F1/download/a.pdf",
        "http://files.slack.com/files-pri/T1-F1/download/a.pdf",
        "",
    ):
        with pytest.raises(AttachmentRefused) as refused:
            file_source(attachment(foreign), "xoxb-secret", SLACK_FILE_HOSTS)
        assert refused.value.name == "a.pdf"
        assert "xoxb-secret" not in str(refused.value)
    # Slack's own API host: only files.slack.com; an emulator's host joins it
    assert file_hosts("https://slack.com/api") == SLACK_FILE_HOSTS
    assert file_hosts("http://127.0.0.1:8000") == (*SLACK_FILE_HOSTS, "127.0.0.1")


def test_the_emulator_serves_a_shared_file_only_with_the_bot_token(
    emu: tuple[EmulatorServer, list[Mapping[str, object]]], tmp_path: Path
) -> None:
    server, events = emu
    server.emulator.send_user_files("look", (EmulatedFile("a.png", "image/png", PNG),))
    message = parse_message(events[-1])
    assert message is not None and message.text == "look"
    (shared,) = message.attachments
    assert (shared.kind, shared.size, shared.content_type) == (
        AttachmentKind.IMAGE,
        len(PNG),
        "image/png",
    )
    hosts = file_hosts(server.url)
    limits = DownloadLimits()
    with requests.Session() as session:
        source = file_source(shared, server.emulator.bot_token, hosts)
        received = download(
            session, source.url, tmp_path, name=shared.name, headers=source.headers, limits=limits
        )
        assert received.path.read_bytes() == PNG
        assert received.content_type == "image/png"
        wrong = file_source(shared, "xoxb-not-the-bot", hosts)
        with pytest.raises(AttachmentRefused, match="slack.com"):
            download(
                session, wrong.url, tmp_path, name="b.png", headers=wrong.headers, limits=limits
            )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.png"]

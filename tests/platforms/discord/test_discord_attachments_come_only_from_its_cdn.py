"""Discord inbound attachments (issue 25), what only Discord does: a message's
``attachments`` become attachments referencing the signed CDN ``url`` (a voice
message's duration kept); the download sends no token and goes only to Discord's CDN
hosts; the emulated CDN serves a file only under its own unexpired signature (else
Discord's 404 "This content is no longer available.")."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit

import pytest
import requests
from channelkit.attachments import DownloadLimits, download
from channelkit.attachments.model import AttachmentKind
from channelkit.errors import AttachmentFailed, AttachmentRefused
from channelkit.platforms.discord.files import (
    DISCORD_FILE_HOSTS,
    file_hosts,
    file_source,
    parse_attachments,
)
from channelkit.playground import EmulatorServer
from channelkit.playground.emulator import EmulatedFile
from channelkit.runtime.clock import FakeClock

PDF = b"%PDF-1.7\n" + b"discord " * 500


@pytest.fixture(scope="module")
def emu() -> Iterator[EmulatorServer]:
    with EmulatorServer(platform="discord", clock=FakeClock(start=1_700_000_000.0)) as server:
        yield server


def test_message_attachments_parse_with_their_cdn_url() -> None:
    voice, pdf = parse_attachments(
        [
            {
                "id": "1",
                "filename": "voice-message.ogg",
                "content_type": "audio/ogg",
                "size": 5120,
                "duration_secs": 3.5,
                "url": "https://cdn.discordapp.com/attachments/9/1/voice-message.ogg?ex=1&is=2&hm=3",
                "proxy_url": "https://media.discordapp.net/attachments/9/1/voice-message.ogg",
            },
            {"id": "2", "filename": "q3.pdf", "size": 10},
        ]
    )
    assert (voice.kind, voice.name, voice.duration, voice.size) == (
        AttachmentKind.AUDIO,
        "voice-message.ogg",
        3.5,
        5120,
    )
    assert voice.reference.startswith("https://cdn.discordapp.com/attachments/9/1/")
    # no content type: a file; no url: kept (the person is told), never dropped
    assert (pdf.kind, pdf.reference, pdf.content_type) == (AttachmentKind.FILE, "", None)


def test_only_discords_cdn_hosts_and_no_credentials() -> None:
    (good,) = parse_attachments(
        [{"filename": "a.png", "url": "https://cdn.discordapp.com/attachments/9/1/a.png"}]
    )
    source = file_source(good, DISCORD_FILE_HOSTS)
    assert source.headers == {} and source.allowed_redirect_hosts == ()
    for url in (
        "https://cdn.discordapp.com.evil.example/attachments/9/1/a.png",
        "https://evil.example/attachments/9/1/a.png",
        "http://cdn.discordapp.com/attachments/9/1/a.png",
    ):
        (bad,) = parse_attachments([{"filename": "a.png", "url": url}])
        with pytest.raises(AttachmentRefused):
            file_source(bad, DISCORD_FILE_HOSTS)
    assert file_hosts("https://discord.com/api/v10") == DISCORD_FILE_HOSTS
    assert file_hosts("http://127.0.0.1:9/api/v10") == (*DISCORD_FILE_HOSTS, "127.0.0.1")


def test_the_emulated_cdn_serves_only_its_signed_unexpired_url(
    emu: EmulatorServer, tmp_path: Path
) -> None:
    objects = emu.emulator.attachment_objects((EmulatedFile("q3.pdf", "application/pdf", PDF),))
    (attachment,) = parse_attachments(objects)
    source = file_source(attachment, file_hosts(f"{emu.url}/api/v10"))
    limits = DownloadLimits()
    with requests.Session() as session:
        received = download(session, source.url, tmp_path, name="q3.pdf", limits=limits)
        assert received.path.read_bytes() == PDF
        parts = urlsplit(source.url)
        query = dict(parse_qsl(parts.query))
        tampered = {**query, "ex": f"{int(query['ex'], 16) + 1:x}"}
        for url in (
            parts._replace(query=urlencode(tampered)).geturl(),
            parts._replace(query="").geturl(),
        ):
            with pytest.raises(AttachmentFailed) as failed:
                download(session, url, tmp_path, name="x.pdf", limits=limits)
            assert failed.value.status == 404
        emu.emulator.clock.advance(86_401)  # the signature expired
        with pytest.raises(AttachmentFailed):
            download(session, source.url, tmp_path, name="y.pdf", limits=limits)
    assert [p.name for p in tmp_path.iterdir()] == ["q3.pdf"]

"""Telegram uploads (issue 25, outbound): an image Telegram shows as a photo goes as
``sendPhoto`` with a ``photo`` file part, an Ogg audio file (a voice note) as
``sendVoice`` with a ``voice`` part, anything else as ``sendDocument`` with a
``document`` part (its name and content type on the part), the chat id, the caption
(cut to 1,024 characters) and the forum topic as form fields; the body has a
Content-Length (no chunked encoding) and a retried call reads the file again."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
import requests_mock
from channelkit.attachments import confine, outbound_source
from channelkit.core import SessionTarget
from channelkit.errors import ServerError
from channelkit.http import RetryPolicy
from channelkit.platforms.telegram.api import TelegramApi
from channelkit.platforms.telegram.files import upload
from channelkit.playground.bot_files import parse_multipart

BASE = "https://api.telegram.test"
TOKEN = "123:abc"
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
OK = {"ok": True, "result": {"message_id": 77, "date": 0, "chat": {"id": 5, "type": "private"}}}


def _parts(request: Any) -> tuple[dict[str, str], dict[str, Any]]:
    body = request.body
    data = body.read() if hasattr(body, "read") else body
    assert int(request.headers["Content-Length"]) == len(data)
    assert "Transfer-Encoding" not in request.headers
    return parse_multipart(data, request.headers["Content-Type"])


def test_an_image_goes_as_send_photo_with_a_photo_part_and_the_topic(tmp_path: Path) -> None:
    (tmp_path / "chart.png").write_bytes(PNG)
    api = TelegramApi(TOKEN, base_url=BASE)
    target = SessionTarget("tg", "5", "-100123", "42", is_group=True)
    with requests_mock.Mocker() as mock:
        route = mock.post(f"{BASE}/bot{TOKEN}/sendPhoto", json=OK)
        message_id = upload(api, target, confine("chart.png", tmp_path), image=True, caption="Q3")
    assert message_id == "77"
    fields, files = _parts(route.last_request)
    assert fields == {"chat_id": "-100123", "caption": "Q3", "message_thread_id": "42"}
    assert set(files) == {"photo"}
    assert files["photo"].name == "chart.png" and files["photo"].content_type == "image/png"
    assert hashlib.sha256(files["photo"].data).digest() == hashlib.sha256(PNG).digest()


@pytest.mark.parametrize("image", [False, True], ids=["file", "image-not-a-photo-type"])
def test_other_files_go_as_send_document_with_a_document_part(image: bool) -> None:
    api = TelegramApi(TOKEN, base_url=BASE)
    pdf = outbound_source(b"%PDF-1.7\n" + b"x" * 5000, ".", name="r/../report.pdf")
    with requests_mock.Mocker() as mock:
        route = mock.post(f"{BASE}/bot{TOKEN}/sendDocument", json=OK)
        upload(api, SessionTarget("tg", "5", "5"), pdf, image=image, caption="c" * 2000)
    fields, files = _parts(route.last_request)
    assert fields == {"chat_id": "5", "caption": "c" * 1024}
    document = files["document"]
    assert document.name == "report.pdf" and document.content_type == "application/pdf"
    assert document.data == pdf.read_bytes()


def test_a_retried_upload_sends_the_whole_file_again(tmp_path: Path) -> None:
    (tmp_path / "data.bin").write_bytes(b"\x00\x01" * 3000)
    api = TelegramApi(TOKEN, base_url=BASE, retry=RetryPolicy(max_attempts=1))
    file = confine("data.bin", tmp_path)
    sent: list[bytes] = []

    def answer(request: Any, context: Any) -> dict[str, Any]:
        sent.append(_parts(request)[1]["document"].data)
        if len(sent) == 1:
            context.status_code = 500
            return {"ok": False, "error_code": 500, "description": "Internal Server Error"}
        return OK

    with requests_mock.Mocker() as mock:
        mock.post(f"{BASE}/bot{TOKEN}/sendDocument", json=answer)
        with pytest.raises(ServerError):
            upload(api, SessionTarget("tg", "5", "5"), file)
        assert upload(api, SessionTarget("tg", "5", "5"), file) == "77"
    assert sent == [b"\x00\x01" * 3000, b"\x00\x01" * 3000]


OGG = b"OggS\x00\x02" + b"\x00" * 20 + b"OpusHead" + bytes(range(200))


def test_an_ogg_voice_note_goes_as_send_voice_with_a_voice_part() -> None:
    api = TelegramApi(TOKEN, base_url=BASE)
    note = outbound_source(OGG, ".", name="note.ogg")
    with requests_mock.Mocker() as mock:
        route = mock.post(f"{BASE}/bot{TOKEN}/sendVoice", json=OK)
        assert upload(api, SessionTarget("tg", "5", "5"), note, caption="listen") == "77"
    fields, files = _parts(route.last_request)
    assert fields == {"chat_id": "5", "caption": "listen"}
    assert set(files) == {"voice"}
    assert files["voice"].name == "note.ogg" and files["voice"].content_type == "audio/ogg"
    assert files["voice"].data == OGG

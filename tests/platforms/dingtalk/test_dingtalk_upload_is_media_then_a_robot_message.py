"""DingTalk uploads (issue 25, outbound): ``POST /media/upload`` with the token and
``type`` in the query and the file as the multipart ``media`` part, then the robot's
``sampleImageMsg`` ``{"photoURL": media_id}`` (an image) or ``sampleFile``
``{"mediaId", "fileName", "fileType"}`` (any other file) to the group or the 1:1 chat;
a caption follows as Markdown; a file over the cap is refused before anything is sent."""

from __future__ import annotations

import json
from typing import Any

import pytest
from channelkit.attachments import outbound_source
from channelkit.clients.dingtalk import (
    BatchSendOtoRequest,
    MediaUploadRequest,
    MediaUploadResponse,
    OrgGroupSendRequest,
)
from channelkit.errors import AttachmentTooLarge, AuthError
from channelkit.http.multipart import MultipartBody
from channelkit.platforms.dingtalk.files import UPLOAD_MAX_BYTES, upload
from channelkit.playground.bot_files import parse_multipart

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 100


class _Tokens:
    def get_token(self) -> str:
        return "tok-1"


class _Answer:
    def __init__(self, key: str) -> None:
        self.process_query_key = key


class _Client:
    def __init__(self) -> None:
        self.token_provider = _Tokens()
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def upload_media(self, **kwargs: Any) -> MediaUploadResponse:
        self.calls.append(("upload", kwargs))
        return MediaUploadResponse(errcode=0, media_id="@media-1")

    def send_robot_group_message(self, **kwargs: Any) -> _Answer:
        self.calls.append(("group", kwargs))
        return _Answer(f"pqk-{len(self.calls)}")

    def batch_send_robot_oto_messages(self, **kwargs: Any) -> _Answer:
        self.calls.append(("direct", kwargs))
        return _Answer(f"pqk-{len(self.calls)}")


def _wire(body: MediaUploadRequest) -> tuple[dict[str, str], dict[str, Any]]:
    multipart = MultipartBody(body.to_dict())
    return parse_multipart(multipart.read(), multipart.content_type)


def test_an_image_is_uploaded_as_media_then_sent_as_sample_image_msg_to_the_group() -> None:
    client = _Client()
    png = outbound_source(PNG, ".", name="chart.png")
    message_id = upload(client, "ding-robot", (True, "cid-1"), png, image=True)  # type: ignore[arg-type]
    assert message_id == "pqk-2"
    (kind, sent), (kind2, message) = client.calls
    assert kind == "upload" and sent["access_token"] == "tok-1" and sent["type"] == "image"
    fields, files = _wire(sent["body"])
    assert fields == {} and set(files) == {"media"}
    assert (files["media"].name, files["media"].content_type) == ("chart.png", "image/png")
    assert files["media"].data == PNG
    body = message["body"]
    assert kind2 == "group" and isinstance(body, OrgGroupSendRequest)
    assert (body.robot_code, body.open_conversation_id) == ("ding-robot", "cid-1")
    assert body.msg_key == "sampleImageMsg"
    assert json.loads(body.msg_param) == {"photoURL": "@media-1"}


def test_a_file_is_sent_as_sample_file_to_the_person_with_its_caption_after() -> None:
    client = _Client()
    pdf = outbound_source(b"%PDF-1.7\n" + b"x" * 50, ".", name="Q3 report.PDF")
    assert upload(client, "ding-robot", (False, "user-7"), pdf, caption="weekly") == "pqk-2"  # type: ignore[arg-type]
    (_, sent), (kind, message), (kind3, caption) = client.calls
    assert sent["type"] == "file"
    assert _wire(sent["body"])[1]["media"].name == "Q3 report.PDF"
    body = message["body"]
    assert kind == "direct" and isinstance(body, BatchSendOtoRequest)
    assert body.user_ids == ["user-7"] and body.msg_key == "sampleFile"
    assert json.loads(body.msg_param) == {
        "mediaId": "@media-1",
        "fileName": "Q3 report.PDF",
        "fileType": "pdf",
    }
    assert kind3 == "direct" and caption["body"].msg_key == "sampleMarkdown"
    assert json.loads(caption["body"].msg_param)["text"] == "weekly"


def test_an_image_dingtalk_cannot_show_goes_as_a_file() -> None:
    client = _Client()
    webp = outbound_source(b"RIFF\x00\x00\x00\x00WEBPVP8 " + b"\x00" * 40, ".", name="a.webp")
    upload(client, "ding-robot", (True, "cid-1"), webp, image=True)  # type: ignore[arg-type]
    (_, sent), (_, message) = client.calls
    assert sent["type"] == "file" and message["body"].msg_key == "sampleFile"


def test_a_file_over_the_cap_is_refused_before_anything_is_sent() -> None:
    client = _Client()
    big = outbound_source(
        b"x" * (UPLOAD_MAX_BYTES + 1), ".", name="big.bin", max_size=UPLOAD_MAX_BYTES + 1
    )
    with pytest.raises(AttachmentTooLarge):
        upload(client, "ding-robot", (True, "cid-1"), big)  # type: ignore[arg-type]
    assert client.calls == []


class _ExpiringTokens:
    def __init__(self) -> None:
        self.tokens = ["old", "new"]
        self.invalidated: list[str | None] = []

    def get_token(self) -> str:
        return self.tokens[0]

    def invalidate(self, token: str | None = None) -> None:
        self.invalidated.append(token)
        self.tokens.pop(0)


class _RefusingOldToken(_Client):
    def upload_media(self, **kwargs: Any) -> MediaUploadResponse:
        if kwargs["access_token"] == "old":
            self.calls.append(("refused", kwargs))
            raise AuthError("access_token expired", status=200, code=42001)
        return super().upload_media(**kwargs)


def test_a_refused_token_is_refreshed_and_the_file_read_again_once() -> None:
    client = _RefusingOldToken()
    tokens = _ExpiringTokens()
    client.token_provider = tokens  # type: ignore[assignment]
    pdf = outbound_source(b"%PDF-1.7\n" + b"y" * 50, ".", name="a.pdf")
    assert upload(client, "ding-robot", (True, "cid-1"), pdf) == "pqk-3"  # type: ignore[arg-type]
    kinds = [kind for kind, _ in client.calls]
    assert kinds == ["refused", "upload", "group"]
    assert tokens.invalidated == ["old"] and client.calls[1][1]["access_token"] == "new"
    assert _wire(client.calls[1][1]["body"])[1]["media"].data == pdf.read_bytes()

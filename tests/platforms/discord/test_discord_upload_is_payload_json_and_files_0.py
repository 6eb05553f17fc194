"""Discord uploads (issue 25, outbound): one ``POST /channels/{id}/messages`` as
multipart/form-data, ``payload_json`` (the caption as content, nobody pinged,
``attachments: [{"id": 0, "filename"}]``) beside the ``files[0]`` part named by the
file; to the thread when the target has one; a file over 10 MiB refused unsent; a
body the rate limiter sends again after a 429 is read again from its first byte."""

from __future__ import annotations

import json
from typing import Any

import pytest
from channelkit.attachments import outbound_source
from channelkit.clients.discord import CreateMessageFilesRequest, DiscordClient
from channelkit.core import SessionTarget
from channelkit.errors import AttachmentTooLarge
from channelkit.http.multipart import MultipartBody, UploadFile
from channelkit.platforms.discord.files import MAX_BYTES, upload
from channelkit.playground.bot_files import parse_multipart


class _Message:
    id = "555"


class _Client:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def create_message_with_files(self, **kwargs: Any) -> _Message:
        self.calls.append(kwargs)
        return _Message()


class _Api:
    def __init__(self) -> None:
        self.client = _Client()


def test_the_message_carries_payload_json_and_the_file_as_files_0() -> None:
    api = _Api()
    png = outbound_source(b"\x89PNG\r\n\x1a\n" + b"\x00" * 100, ".", name="chart.png")
    target = SessionTarget("dc", "1", "100", "200", is_group=True)
    assert upload(api, target, png, image=True, caption="@everyone Q3") == "555"  # type: ignore[arg-type]
    call = api.client.calls[0]
    assert call["channel_id"] == "200"  # the thread
    body = call["body"]
    assert isinstance(body, CreateMessageFilesRequest)
    payload = json.loads(body.payload_json)
    assert payload == {
        "allowed_mentions": {"parse": []},
        "attachments": [{"id": 0, "filename": "chart.png"}],
        "content": "@everyone Q3",
    }
    part = body.files_0
    assert isinstance(part, UploadFile)
    assert (part.name, part.content_type, part.size) == ("chart.png", "image/png", 108)
    # on the wire: the two parts, the file's under files[0] with its filename
    fields, files = _wire(body)
    assert set(fields) == {"payload_json"} and set(files) == {"files[0]"}
    assert files["files[0]"].name == "chart.png" and files["files[0]"].data == png.read_bytes()


def _wire(body: CreateMessageFilesRequest) -> tuple[dict[str, str], dict[str, Any]]:
    multipart = MultipartBody(body.to_dict())
    return parse_multipart(multipart.read(), multipart.content_type)


def test_a_file_over_the_limit_is_refused_before_anything_is_sent() -> None:
    api = _Api()
    big = outbound_source(b"x" * (MAX_BYTES + 1), ".", name="big.bin", max_size=MAX_BYTES + 1)
    with pytest.raises(AttachmentTooLarge):
        upload(api, SessionTarget("dc", "1", "100"), big)  # type: ignore[arg-type]
    assert api.client.calls == []


def test_a_body_sent_again_reads_the_file_again() -> None:
    opened: list[int] = []
    data = b"abc" * 1000

    def reopen() -> Any:
        import io

        opened.append(1)
        return io.BytesIO(data)

    first = MultipartBody(
        {"payload_json": "{}", "files[0]": UploadFile("a.bin", "", len(data), reopen)}
    )
    once = first.read()
    again = first.again()
    assert len(again) == len(first) and again.read() == once
    assert len(opened) == 2
    assert DiscordClient.__name__  # the generated client exposes the upload method
    assert callable(DiscordClient.create_message_with_files)

"""multipart/form-data request bodies (issue 25, outbound uploads): the generator turns a
``multipart/form-data`` body into a method whose ``format: binary`` fields are
`UploadFile` parts (and ``x-channelkit-multipart-operationId`` into a second method of a
JSON operation); `MultipartBody` has an exact length (so requests sends a
Content-Length, never chunked), encodes fields as Telegram and Discord read them, reads
the file in chunks, fails on a file whose size changed, and every client attempt
(a retry) opens the file again."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
import requests.utils
import requests_mock
from channelkit.http import RetryPolicy
from channelkit.http.multipart import MultipartBody, UploadFile
from channelkit.playground.bot_files import parse_multipart

from codegen.render import render
from codegen.spec import load

SPEC: dict[str, Any] = {
    "openapi": "3.1.0",
    "info": {"title": "Upload test API", "version": "1"},
    "servers": [{"url": "https://upload.test"}],
    "x-channelkit-auth": {"kind": "none"},
    "paths": {
        "/send": {
            "post": {
                "operationId": "send",
                "x-channelkit-multipart-operationId": "sendWithFile",
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {"schema": {"$ref": "#/components/schemas/Msg"}},
                        "multipart/form-data": {"schema": {"$ref": "#/components/schemas/MsgFile"}},
                    },
                },
                "responses": {"200": {"description": "ok"}},
            }
        }
    },
    "components": {
        "schemas": {
            "Msg": {"type": "object", "properties": {"text": {"type": "string"}}},
            "MsgFile": {
                "type": "object",
                "required": ["file"],
                "properties": {
                    "text": {"type": "string"},
                    "meta": {"type": "object"},
                    "file": {"type": "string", "format": "binary"},
                },
            },
        }
    },
}


def test_the_generator_makes_a_multipart_method_with_upload_file_fields(tmp_path: Path) -> None:
    path = tmp_path / "uploadtest.json"
    path.write_text(json.dumps(SPEC), encoding="utf-8")
    files = render(load(path))
    client = next(text for name, text in files.items() if name.endswith("client.py"))
    models = next(text for name, text in files.items() if name.endswith("models.py"))
    assert "def send(" in client and "def send_with_file(" in client
    assert 'body_format="multipart"' in client
    assert client.count('body_format="multipart"') == 1  # the JSON method stays JSON
    assert 'file: UploadFile = field(metadata=wire("file", UPLOAD, required=True))' in models
    assert "from channelkit.http.multipart import UPLOAD, UploadFile" in models


def _opener(data: bytes, opened: list[int]) -> Any:
    def open_() -> io.BytesIO:
        opened.append(1)
        return io.BytesIO(data)

    return open_


def test_the_body_has_an_exact_length_and_fields_as_platforms_read_them() -> None:
    data = bytes(range(256)) * 300
    opened: list[int] = []
    body = MultipartBody(
        {
            "chat_id": 5,
            "silent": True,
            "reply_markup": {"inline_keyboard": []},
            "skipped": None,
            "doc": UploadFile(
                "r\u00e9sum\u00e9.pdf", "application/pdf", len(data), _opener(data, opened)
            ),
        }
    )
    assert requests.utils.super_len(body) == len(body)  # requests sends Content-Length
    raw = body.read()
    assert len(raw) == len(body) and opened == [1]
    fields, files = parse_multipart(raw, body.content_type)
    assert fields == {"chat_id": "5", "silent": "true", "reply_markup": '{"inline_keyboard":[]}'}
    assert files["doc"].name == "r\u00e9sum\u00e9.pdf" and files["doc"].data == data


def test_a_file_whose_size_changed_fails_the_read() -> None:
    body = MultipartBody({"f": UploadFile("a.bin", "", 10, lambda: io.BytesIO(b"x" * 11))})
    with pytest.raises(OSError, match="longer than"):
        body.read()
    short = MultipartBody({"f": UploadFile("a.bin", "", 10, lambda: io.BytesIO(b"x" * 9))})
    with pytest.raises(OSError, match="expected 10"):
        short.read()


def test_upload_file_refuses_names_that_break_the_header() -> None:
    from channelkit.errors import ConfigurationError

    for name in ('a"b.txt', "a\r\nb.txt", ""):
        with pytest.raises(ConfigurationError):
            UploadFile(name, "text/plain", 1, lambda: io.BytesIO(b"x"))


def test_every_client_attempt_opens_the_file_again() -> None:
    from channelkit.clients.telegram import SendDocumentRequest, TelegramClient

    data = b"%PDF-1.7\n" + b"z" * 4000
    opened: list[int] = []
    seen: list[bytes] = []
    client = TelegramClient(
        token="1:t", base_url="https://tg.test", retry=RetryPolicy(max_attempts=1)
    )

    def answer(request: Any, context: Any) -> dict[str, Any]:
        raw = request.body.read() if hasattr(request.body, "read") else request.body
        seen.append(parse_multipart(raw, request.headers["Content-Type"])[1]["document"].data)
        return {
            "ok": True,
            "result": {"message_id": len(seen), "date": 0, "chat": {"id": 1, "type": "private"}},
        }

    part = UploadFile("r.pdf", "application/pdf", len(data), _opener(data, opened))
    with requests_mock.Mocker() as mock:
        mock.post("https://tg.test/bot1:t/sendDocument", json=answer)
        for _ in range(2):
            client.send_document(body=SendDocumentRequest(chat_id=1, document=part))
    assert seen == [data, data] and len(opened) == 2

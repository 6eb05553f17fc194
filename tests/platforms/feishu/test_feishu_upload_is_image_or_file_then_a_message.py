"""Feishu outbound files (issue 25), the request shapes only Feishu has: an image is
uploaded to ``im/v1/images`` as multipart ``image_type=message`` plus an ``image``
part and sent as an ``image`` message ``{"image_key"}``; any other file goes to
``im/v1/files`` as ``file_type`` (``pdf``/``doc``/``xls``/``ppt`` by the name, else
``stream``), ``file_name`` and a ``file`` part, then a ``file`` message
``{"file_key"}``; the caption follows as a text message; an empty file is refused
before any call. (Bytes, ordering, faults and retries are in the contract suite.)"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from channelkit.attachments.outbound import OutboundBytes
from channelkit.errors import AttachmentRefused
from channelkit.platforms.feishu.api import FeishuApi
from channelkit.platforms.feishu.files import file_type, upload
from channelkit.playground import EmulatorServer

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
PDF = b"%PDF-1.7\n" + b"feishu " * 400
IMAGES, FILES, MESSAGES = (
    "/open-apis/im/v1/images",
    "/open-apis/im/v1/files",
    "/open-apis/im/v1/messages",
)


@pytest.fixture(scope="module")
def server() -> Iterator[EmulatorServer]:
    with EmulatorServer(platform="feishu", encrypt_key=None, ingress="http") as emulator:
        yield emulator


@pytest.fixture
def api(server: EmulatorServer) -> Iterator[FeishuApi]:
    server.emulator.reset()
    emulator = server.emulator
    feishu = FeishuApi.create(emulator.app_id, emulator.app_secret, base_url=server.url)
    yield feishu
    feishu.close()


def _send(api: FeishuApi, server: EmulatorServer, **options: Any) -> str:
    chat = server.emulator.chat_id
    file = options.pop("file")
    return upload(
        api.client,
        lambda msg_type, content: api.send_content(chat, msg_type, content),
        file,
        send_caption=lambda text: api.send_text(chat, text),
        **options,
    )


def _body(server: EmulatorServer, path: str) -> dict[str, Any]:
    (call,) = server.emulator.calls(path, "POST")
    body: dict[str, Any] = call["body"]
    return body


def _content(server: EmulatorServer) -> list[tuple[str, dict[str, Any]]]:
    sent = server.emulator.calls(MESSAGES, "POST")
    return [(c["body"]["msg_type"], json.loads(c["body"]["content"])) for c in sent]


def test_an_image_is_an_image_upload_then_an_image_message_then_its_caption(
    api: FeishuApi, server: EmulatorServer
) -> None:
    message_id = _send(
        api, server, file=OutboundBytes("chart.png", PNG), image=True, caption="Q3 revenue"
    )
    assert message_id.startswith("om_")
    body = _body(server, IMAGES)
    assert body == {
        "image_type": "message",
        "image": {"name": "chart.png", "contentType": "image/png", "size": len(PNG)},
    }
    assert server.emulator.calls(FILES) == []
    (image, caption) = _content(server)
    assert image[0] == "image" and set(image[1]) == {"image_key"}
    assert image[1]["image_key"].startswith("img_")
    assert caption == ("text", {"text": "Q3 revenue"})


def test_a_document_is_a_file_upload_typed_by_its_name_then_a_file_message(
    api: FeishuApi, server: EmulatorServer
) -> None:
    _send(api, server, file=OutboundBytes("report.pdf", PDF))
    body = _body(server, FILES)
    assert body == {
        "file_type": "pdf",
        "file_name": "report.pdf",
        "file": {"name": "report.pdf", "contentType": "application/pdf", "size": len(PDF)},
    }
    assert server.emulator.calls(IMAGES) == []
    ((msg_type, content),) = _content(server)
    assert msg_type == "file" and set(content) == {"file_key"}
    assert content["file_key"].startswith("file_")


def test_an_image_not_asked_for_as_one_and_an_unknown_type_go_as_stream_files(
    api: FeishuApi, server: EmulatorServer
) -> None:
    _send(api, server, file=OutboundBytes("chart.png", PNG))  # send_file, not send_image
    assert _body(server, FILES)["file_type"] == "stream"
    assert server.emulator.calls(IMAGES) == []
    assert [file_type(n) for n in ("a.DOCX", "b.xlsx", "c.ppt", "d.bin", "noext")] == [
        "doc",
        "xls",
        "ppt",
        "stream",
        "stream",
    ]


def test_an_empty_file_is_refused_before_any_call(api: FeishuApi, server: EmulatorServer) -> None:
    with pytest.raises(AttachmentRefused) as refused:
        _send(api, server, file=OutboundBytes("empty.txt", b""))
    assert refused.value.name == "empty.txt" and "empty" in refused.value.reason
    assert server.emulator.calls(FILES) == [] and server.emulator.calls(MESSAGES) == []

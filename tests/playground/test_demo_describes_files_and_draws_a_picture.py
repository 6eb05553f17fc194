"""The playground's demo agent over the Telegram emulator: a file the person sends is
described in the answer (name, content type, size in bytes, one line per file);
``picture`` sends back a PNG the demo draws in memory, listed in the message view and
served with the PNG signature."""

from __future__ import annotations

import base64
import struct
import zlib
from collections.abc import Iterator

import pytest
import requests
from channelkit.playground import Playground
from channelkit.playground.demo import DEMO_PICTURE_NAME, demo_png
from playground_helpers import state, views, wait

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def pg() -> Iterator[Playground]:
    with Playground(platform="telegram", demo_delay=0.0) as playground:
        yield playground


def _send(pg: Playground, text: str, files: list[tuple[str, str, bytes]]) -> None:
    body = {
        "text": text,
        "files": [
            {"name": n, "contentType": t, "base64": base64.b64encode(d).decode()}
            for n, t, d in files
        ],
    }
    response = requests.post(f"{pg.url}/_emulator/send", json=body, timeout=10)
    assert response.status_code == 200, response.text
    assert response.json()["status"] == 200, response.text


def _texts(pg: Playground) -> str:
    return "\n".join(str(v.get("text") or "") for v in views(pg))


def test_each_file_sent_is_named_with_its_content_type_and_size(pg: Playground) -> None:
    notes = b"release notes, version 7\n" * 9  # 225 bytes
    _send(pg, "", [("notes.txt", "text/plain", notes)])
    answer = wait(
        lambda: next((v["text"] for v in views(pg) if "notes.txt" in str(v.get("text"))), None),
        "the demo's description of notes.txt",
    )
    assert "text/plain" in answer
    assert f"{len(notes)} bytes" in answer
    assert "picture" in answer  # the files answer, not the greeting before the form


def test_picture_sends_a_png_the_page_can_show(pg: Playground) -> None:
    _send(pg, "picture", [])
    sent = wait(
        lambda: next((f for v in views(pg) for f in v.get("files") or ()), None),
        "the picture in a message view",
    )
    assert sent["name"] == DEMO_PICTURE_NAME
    assert sent["contentType"] == "image/png"
    served = requests.get(pg.url + sent["url"], timeout=10)
    assert served.status_code == 200
    data = served.content
    assert data.startswith(PNG_SIGNATURE)
    assert len(data) == sent["size"]
    # a well-formed PNG: IHDR gives the size, the pixels decompress to exactly that many rows
    width, height = struct.unpack(">II", data[16:24])
    idat_length = struct.unpack(">I", data[33:37])[0]
    assert data[37:41] == b"IDAT"
    pixels = zlib.decompress(data[41 : 41 + idat_length])
    assert len(pixels) == height * (1 + 3 * width)
    assert data.endswith(b"IEND\xaeB`\x82")
    assert "picture I drew" in _texts(pg)
    assert state(pg)["platform"] == "telegram"


def test_demo_png_refuses_a_size_out_of_range() -> None:
    assert demo_png(1, 1).startswith(PNG_SIGNATURE)
    with pytest.raises(ValueError, match="width and height"):
        demo_png(0, 10)

"""Names are made safe to create on disk; types come from the leading bytes only."""

from __future__ import annotations

import unicodedata
from pathlib import Path, PurePosixPath

import pytest
from channelkit.attachments import (
    Attachment,
    AttachmentKind,
    sanitize_name,
    sniff_content_type,
    unique_path,
)
from channelkit.attachments.names import MAX_NAME_LENGTH
from hypothesis import given
from hypothesis import strategies as st


@pytest.mark.parametrize(
    ("raw", "safe"),
    [
        ("report.pdf", "report.pdf"),
        ("../../etc/passwd", "passwd"),
        ("C:\\Users\\me\\photo.jpg", "photo.jpg"),
        (".bashrc", "bashrc"),
        ("..", "attachment"),
        ("", "attachment"),
        (None, "attachment"),
        ("a\x00b\x1fc\u202e.txt", "abc.txt"),
        ("what?<is>:this*.png", "whatisthis.png"),
    ],
)
def test_a_name_is_sanitized(raw: str | None, safe: str) -> None:
    assert sanitize_name(raw) == safe


def test_a_long_name_is_cut_keeping_its_extension() -> None:
    name = sanitize_name("x" * 500 + ".tar")
    assert len(name) == MAX_NAME_LENGTH and name.endswith("x.tar")


def test_a_taken_name_gets_a_unique_suffix(tmp_path: Path) -> None:
    first = unique_path(tmp_path, "a.png")
    second = unique_path(tmp_path, "a.png")
    assert first.name == "a.png" and second.name.startswith("a-") and second.suffix == ".png"
    assert first.exists() and second.exists()


@pytest.mark.parametrize(
    ("head", "kind"),
    [
        (b"\x89PNG\r\n\x1a\n....", "image/png"),
        (b"\xff\xd8\xff\xe0..JFIF", "image/jpeg"),
        (b"GIF89a....", "image/gif"),
        (b"RIFF\x00\x00\x00\x00WEBPVP8 ", "image/webp"),
        (b"%PDF-1.4", "application/pdf"),
        (b"OggS\x00\x02" + b"\x00" * 22 + b"OpusHead", "audio/ogg"),
        (b"ID3\x03\x00", "audio/mpeg"),
        (b"\xff\xfb\x90\x64", "audio/mpeg"),
        (b"\x00\x00\x00\x20ftypisom\x00\x00", "video/mp4"),
        (b"PK\x03\x04\x14\x00", "application/zip"),
        ("plain text, ünïcode\n".encode(), "text/plain; charset=utf-8"),
        ("é".encode() * 300, "text/plain; charset=utf-8"),  # cut mid-character at 512
        (b"\x00\x01\x02binary", "application/octet-stream"),
        (b"", "application/octet-stream"),
    ],
)
def test_the_type_is_sniffed_from_the_bytes(head: bytes, kind: str) -> None:
    assert sniff_content_type(head[:512]) == kind


def test_an_unknown_kind_is_a_file_and_bad_sizes_are_refused() -> None:
    assert AttachmentKind.parse("Image") is AttachmentKind.IMAGE
    assert AttachmentKind.parse("sticker") is AttachmentKind.FILE
    with pytest.raises(ValueError, match="size"):
        Attachment(kind=AttachmentKind.FILE, name="a", reference="r", size=-1)
    voice = Attachment(kind=AttachmentKind.AUDIO, name="v.ogg", reference="r", duration=3.5)
    assert voice.duration == 3.5


@given(st.text(max_size=400))
def test_any_name_becomes_one_plain_component(raw: str) -> None:
    name = sanitize_name(raw)
    assert name and len(name) <= MAX_NAME_LENGTH
    assert "/" not in name and "\\" not in name and not name.startswith(".")
    assert all(unicodedata.category(ch)[0] != "C" for ch in name)
    base = PurePosixPath("/work/run")
    assert (base / name).parent == base

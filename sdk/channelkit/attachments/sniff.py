"""The content type of a file, read from its first bytes (never from a declaration)."""

from __future__ import annotations

__all__ = ["OCTET_STREAM", "SNIFF_BYTES", "sniff_content_type"]

OCTET_STREAM = "application/octet-stream"
SNIFF_BYTES = 512
"""How many leading bytes `sniff_content_type` looks at."""

_SIGNATURES: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"%PDF-", "application/pdf"),
    (b"ID3", "audio/mpeg"),
    (b"PK\x03\x04", "application/zip"),
    (b"PK\x05\x06", "application/zip"),
)


def sniff_content_type(head: bytes) -> str:
    """The content type the leading bytes `head` show.

    Recognized: PNG, JPEG, GIF, WebP, PDF, Ogg (`audio/ogg`, Opus or Vorbis), MP3
    (ID3 tag or an MPEG audio frame header), MP4 (an `ftyp` box; `video/mp4`), ZIP and
    plain UTF-8 text (`text/plain; charset=utf-8`: decodes, no NUL, no control characters
    other than whitespace). Anything else is `application/octet-stream`.
    """
    for magic, content_type in _SIGNATURES:
        if head.startswith(magic):
            return content_type
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    if head.startswith(b"OggS"):
        return "audio/ogg"
    if len(head) >= 12 and head[4:8] == b"ftyp":
        return "video/mp4"
    if len(head) >= 2 and head[0] == 0xFF and head[1] & 0xE0 == 0xE0 and head[1] & 0x06:
        return "audio/mpeg"
    if head and _is_text(head[:SNIFF_BYTES]):
        return "text/plain; charset=utf-8"
    return OCTET_STREAM


def _is_text(head: bytes) -> bool:
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as exc:
        # a multi-byte character cut at the end of the sample is still text
        if exc.start < len(head) - 3 or exc.reason != "unexpected end of data":
            return False
        text = head[: exc.start].decode("utf-8")
    return all(ch.isprintable() or ch in "\t\n\r\f" for ch in text)

"""File names that are safe to create on disk and to show a person."""

from __future__ import annotations

import os
import unicodedata
import uuid
from pathlib import Path

__all__ = ["MAX_NAME_LENGTH", "sanitize_name", "unique_path"]

MAX_NAME_LENGTH = 120
"""The longest sanitized name, in characters (the extension is kept when cut)."""

_FALLBACK = "attachment"
_MAX_EXTENSION = 16


def sanitize_name(name: str | None, *, fallback: str = _FALLBACK) -> str:
    """A plain file name derived from `name`, safe to join to a directory.

    Only the last path component is kept (both `/` and `\\` separate), control and
    other non-printable characters are removed, leading dots and spaces are dropped
    (no hidden files, no `..`), and the result is at most `MAX_NAME_LENGTH`
    characters with its extension kept. An empty result becomes `fallback`.
    """
    text = unicodedata.normalize("NFC", name or "")
    text = text.replace("\\", "/").rsplit("/", 1)[-1]
    text = "".join(ch for ch in text if unicodedata.category(ch)[0] != "C" and ch not in '<>:"|?*')
    text = text.strip().lstrip(". ").rstrip(". ")
    if not text:
        return fallback
    if len(text) > MAX_NAME_LENGTH:
        stem, dot, extension = text.rpartition(".")
        if dot and stem and len(extension) <= _MAX_EXTENSION:
            keep = MAX_NAME_LENGTH - len(extension) - 1
            text = stem[:keep].rstrip(". ") + "." + extension
        else:
            text = text[:MAX_NAME_LENGTH].rstrip(". ")
    return text or fallback


def unique_path(directory: Path, name: str) -> Path:
    """Create and return a new empty file for `name` in `directory`.

    The file is created exclusively (`O_EXCL`), so two downloads of the same name never
    share a file: on a collision a short unique suffix goes before the extension
    (`photo-1a2b3c4d.png`). `name` must already be sanitized.
    """
    stem, dot, extension = name.rpartition(".")
    if not dot or not stem:
        stem, extension = name, ""
    candidate = name
    for _ in range(100):
        path = directory / candidate
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            suffix = uuid.uuid4().hex[:8]
            candidate = f"{stem}-{suffix}.{extension}" if extension else f"{stem}-{suffix}"
            continue
        os.close(fd)
        return path
    raise FileExistsError(f"{name}: no free name in {directory}")

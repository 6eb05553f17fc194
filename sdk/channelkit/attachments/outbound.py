"""Files an agent sends out: confined to an allowed root, refused before any byte is read."""

from __future__ import annotations

import io
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import BinaryIO

from channelkit.attachments.fetch import DEFAULT_PER_FILE
from channelkit.attachments.names import sanitize_name
from channelkit.attachments.sniff import SNIFF_BYTES, sniff_content_type
from channelkit.errors import AttachmentRefused, AttachmentTooLarge, ConfigurationError

__all__ = ["OutboundBytes", "OutboundFile", "OutboundSource", "confine", "outbound_source"]

_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_BINARY = getattr(os, "O_BINARY", 0)


@dataclass(frozen=True)
class OutboundFile:
    """A regular file inside the allowed root, checked but not yet read.

    `path` is the resolved path, `name` the sanitized name to show on the platform,
    `size` the size seen when it was checked. Every read opens the file without
    following a symlink and refuses it if it is no longer the file that was checked
    (another inode) or grew past `max_size`.
    """

    path: Path
    name: str
    size: int
    max_size: int
    device: int
    inode: int

    def open(self) -> BinaryIO:
        """Open the checked file for binary reading (the caller closes it)."""
        try:
            fd = os.open(self.path, os.O_RDONLY | _O_NOFOLLOW | _O_BINARY)
        except OSError as exc:
            raise AttachmentRefused(
                name=self.name, reason=f"cannot be opened ({exc.strerror})"
            ) from exc
        info = os.fstat(fd)
        if (info.st_dev, info.st_ino) != (self.device, self.inode) or not stat.S_ISREG(
            info.st_mode
        ):
            os.close(fd)
            raise AttachmentRefused(name=self.name, reason="changed after it was checked")
        if info.st_size > self.max_size:
            os.close(fd)
            raise AttachmentTooLarge(name=self.name, limit=self.max_size, size=info.st_size)
        return os.fdopen(fd, "rb")

    def read_bytes(self) -> bytes:
        """The whole file (at most `max_size` bytes), for uploads that need a body."""
        with self.open() as fh:
            data = fh.read(self.max_size + 1)
        if len(data) > self.max_size:
            raise AttachmentTooLarge(name=self.name, limit=self.max_size, size=len(data))
        return data

    def chunks(self, chunk_size: int = 64 * 1024) -> Iterator[bytes]:
        """The file in chunks of `chunk_size` bytes, for streamed uploads."""
        sent = 0
        with self.open() as fh:
            while chunk := fh.read(chunk_size):
                sent += len(chunk)
                if sent > self.max_size:
                    raise AttachmentTooLarge(name=self.name, limit=self.max_size, size=sent)
                yield chunk

    def content_type(self) -> str:
        """The type sniffed from the file's first bytes."""
        with self.open() as fh:
            return sniff_content_type(fh.read(SNIFF_BYTES))


def confine(
    path: str | os.PathLike[str],
    root: str | os.PathLike[str],
    *,
    name: str | None = None,
    max_size: int = DEFAULT_PER_FILE,
) -> OutboundFile:
    """Check that `path` names a regular file inside `root` and describe it.

    A relative `path` is taken relative to `root`. Refused with `AttachmentRefused`,
    before the file is opened or read: a path with a `..` component, an absolute path
    outside the root, a path whose symlinks resolve outside the root, anything but a
    regular file (a directory, a device, a FIFO), a missing file. A file larger than
    `max_size` bytes is refused with `AttachmentTooLarge` (from its size, unread).
    `name` (default: the file's own name) is sanitized for the platform.
    """
    if max_size <= 0:
        raise ConfigurationError(f"must be > 0 (got {max_size})", "max_size")
    raw = os.fspath(path)
    shown = sanitize_name(name or PurePath(raw.replace("\\", "/")).name)
    if not raw or "\x00" in raw:
        raise AttachmentRefused(name=shown, reason="is not a usable path")
    if ".." in PurePath(raw.replace("\\", "/")).parts:
        raise AttachmentRefused(name=shown, reason="has a '..' component (refused)")
    base = Path(os.path.realpath(os.fspath(root)))
    candidate = Path(raw) if os.path.isabs(raw) else base / raw
    resolved = Path(os.path.realpath(candidate))
    if resolved != base and base not in resolved.parents:
        raise AttachmentRefused(name=shown, reason="is outside the allowed root")
    try:
        info = os.stat(resolved, follow_symlinks=False)
    except OSError as exc:
        raise AttachmentRefused(name=shown, reason=f"cannot be read ({exc.strerror})") from exc
    if not stat.S_ISREG(info.st_mode):
        raise AttachmentRefused(name=shown, reason="is not a regular file")
    if info.st_size > max_size:
        raise AttachmentTooLarge(name=shown, limit=max_size, size=info.st_size)
    return OutboundFile(
        path=resolved,
        name=shown,
        size=info.st_size,
        max_size=max_size,
        device=info.st_dev,
        inode=info.st_ino,
    )


@dataclass(frozen=True)
class OutboundBytes:
    """Bytes an agent sends as a file (`Turn.send_file(b"...", name="report.pdf")`).

    The same reading interface as `OutboundFile` (`open()`, `read_bytes()`, `chunks()`,
    `content_type()`, `name`, `size`), so a platform uploads either the same way.
    """

    name: str
    data: bytes

    @property
    def size(self) -> int:
        """The length in bytes."""
        return len(self.data)

    def open(self) -> BinaryIO:
        """A new stream over the bytes (every upload attempt opens its own)."""
        return io.BytesIO(self.data)

    def read_bytes(self) -> bytes:
        """The bytes."""
        return self.data

    def chunks(self, chunk_size: int = 64 * 1024) -> Iterator[bytes]:
        """The bytes in chunks of `chunk_size`."""
        for start in range(0, len(self.data), chunk_size):
            yield self.data[start : start + chunk_size]

    def content_type(self) -> str:
        """The type sniffed from the first bytes."""
        return sniff_content_type(self.data[:SNIFF_BYTES])


#: What a platform uploads: a confined file on disk, or bytes held by the caller.
OutboundSource = OutboundFile | OutboundBytes


def outbound_source(
    path_or_bytes: str | os.PathLike[str] | bytes | bytearray | memoryview,
    root: str | os.PathLike[str],
    *,
    name: str | None = None,
    max_size: int = DEFAULT_PER_FILE,
) -> OutboundSource:
    """An `OutboundSource` for what an agent wants to send.

    A path goes through `confine()` (inside `root`, a regular file, at most
    `max_size` bytes; refused before it is opened). Bytes need `name` (sanitized) and
    are refused over `max_size`. Anything else is a `ConfigurationError` naming the
    argument.
    """
    if isinstance(path_or_bytes, bytes | bytearray | memoryview):
        data = bytes(path_or_bytes)
        if not name or not isinstance(name, str):
            raise ConfigurationError("is required when sending bytes", "name")
        shown = sanitize_name(name)
        if max_size <= 0:
            raise ConfigurationError(f"must be > 0 (got {max_size})", "max_size")
        if len(data) > max_size:
            raise AttachmentTooLarge(name=shown, limit=max_size, size=len(data))
        if not data:
            raise AttachmentRefused(name=shown, reason="is empty")
        return OutboundBytes(shown, data)
    if isinstance(path_or_bytes, str | os.PathLike):
        return confine(path_or_bytes, root, name=name, max_size=max_size)
    raise ConfigurationError(
        f"must be a path or bytes, got {type(path_or_bytes).__name__}", "path_or_bytes"
    )

"""``multipart/form-data`` request bodies, streamed from files that can be reopened.

A generated operation whose OpenAPI request body is ``multipart/form-data`` takes its
body as a model (or a dict) like a JSON operation; a ``format: binary`` property is an
`UploadFile` there: a name, a content type, a size and an ``open()`` that returns a
fresh binary stream each time. `MultipartBody` turns such a dict into the request body:

- a string part is sent as it is, a number or a boolean as its text (``true``/``false``),
  an object or an array as its JSON text (Telegram's ``reply_markup``);
- an `UploadFile` part carries ``filename`` and its ``Content-Type``; its bytes are read
  chunk by chunk while the request is sent (never held whole in memory), and the body's
  length is known in advance (``Content-Length``), so no chunked encoding is needed.

Every attempt of a call builds a new `MultipartBody` and so opens the file again: a
retried upload sends the whole file again from its first byte.
"""

from __future__ import annotations

import io
import json
import secrets
from collections.abc import Callable, Mapping
from typing import Any, BinaryIO

from channelkit.errors import ConfigurationError, DeserializationError
from channelkit.http.model import Codec

__all__ = ["UPLOAD", "MultipartBody", "UploadFile"]

_CHUNK = 64 * 1024


class UploadFile:
    """A file part of a multipart body: ``name`` (the part's ``filename``),
    ``content_type``, ``size`` in bytes and ``open`` (returns a new binary stream
    positioned at the first byte; called once per attempt, the stream is closed after)."""

    __slots__ = ("content_type", "name", "open", "size")

    def __init__(
        self, name: str, content_type: str, size: int, open: Callable[[], BinaryIO]
    ) -> None:
        if not isinstance(name, str) or not name:
            raise ConfigurationError("must be a non-empty file name", "name")
        if "\r" in name or "\n" in name or '"' in name:
            raise ConfigurationError("must not contain quotes or line breaks", "name")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise ConfigurationError("must be a byte count >= 0", "size")
        if not callable(open):
            raise ConfigurationError("must be callable", "open")
        self.name = name
        self.content_type = content_type or "application/octet-stream"
        self.size = size
        self.open = open

    @classmethod
    def from_bytes(cls, name: str, content_type: str, data: bytes) -> UploadFile:
        """An upload of ``data`` (held by the caller already)."""
        payload = bytes(data)
        return cls(name, content_type, len(payload), lambda: io.BytesIO(payload))

    def __repr__(self) -> str:
        return f"UploadFile({self.name!r}, {self.content_type!r}, size={self.size})"


class _UploadCodec(Codec):
    """The codec of a ``format: binary`` property: an `UploadFile`, passed through."""

    description = "file"

    def accepts(self, value: Any) -> bool:
        return isinstance(value, UploadFile)

    def decode(self, value: Any, path: str) -> Any:
        raise DeserializationError(path, value, "a file part is never decoded from JSON")

    def encode(self, value: Any, path: str) -> Any:
        if not isinstance(value, UploadFile):
            raise ConfigurationError(f"expected an UploadFile, got {type(value).__name__}", path)
        return value


#: The codec generated models use for ``format: binary`` properties.
UPLOAD: Codec = _UploadCodec()


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class MultipartBody(io.RawIOBase):
    """A readable ``multipart/form-data`` body of ``fields`` (see the module docstring).

    ``len(body)`` is its exact size; `content_type` carries the boundary. Each file is
    opened when reading reaches it and closed at its end (or by `close()`); a file
    that yields a different number of bytes than its ``size`` fails the read with
    ``OSError`` (the request then fails as a transport error).
    """

    def __init__(self, fields: Mapping[str, Any], *, boundary: str | None = None) -> None:
        super().__init__()
        self._fields = dict(fields)
        self.boundary = boundary or "channelkit-" + secrets.token_hex(16)
        self._parts: list[bytes | UploadFile] = []
        size = 0
        for name, value in fields.items():
            if value is None:
                continue
            if '"' in name or "\r" in name or "\n" in name:
                raise ConfigurationError("a part name must not contain quotes or breaks", name)
            if isinstance(value, UploadFile):
                head = (
                    f"--{self.boundary}\r\n"
                    f'Content-Disposition: form-data; name="{name}"; '
                    f'filename="{_header_value(value.name)}"\r\n'
                    f"Content-Type: {value.content_type}\r\n\r\n"
                ).encode()
                self._parts += [head, value, b"\r\n"]
                size += len(head) + value.size + 2
            else:
                part = (
                    (
                        f"--{self.boundary}\r\n"
                        f'Content-Disposition: form-data; name="{name}"\r\n\r\n'
                    ).encode()
                    + _text(value).encode("utf-8")
                    + b"\r\n"
                )
                self._parts.append(part)
                size += len(part)
        tail = f"--{self.boundary}--\r\n".encode()
        self._parts.append(tail)
        self._size = size + len(tail)
        self._index = 0
        self._offset = 0
        self._stream: BinaryIO | None = None
        self._streamed = 0
        self._position = 0

    def again(self) -> MultipartBody:
        """A new body of the same fields and boundary, read from the start (its files
        reopened when read): what a layer that sends a request again (a rate limiter
        honouring a 429) sends instead of this one."""
        return MultipartBody(self._fields, boundary=self.boundary)

    @property
    def content_type(self) -> str:
        """``multipart/form-data; boundary=...``."""
        return f"multipart/form-data; boundary={self.boundary}"

    def __len__(self) -> int:
        return self._size

    def readable(self) -> bool:
        return True

    def tell(self) -> int:
        """Bytes read so far (requests reads it to size the body)."""
        return self._position

    def readinto(self, buffer: Any) -> int:
        n = self._fill(memoryview(buffer).cast("B"))
        self._position += n
        return n

    def _fill(self, view: memoryview) -> int:
        while self._index < len(self._parts):
            part = self._parts[self._index]
            if isinstance(part, bytes):
                left = len(part) - self._offset
                if left <= 0:
                    self._next()
                    continue
                n = min(left, len(view))
                view[:n] = part[self._offset : self._offset + n]
                self._offset += n
                return n
            if self._stream is None:
                self._stream = part.open()
                self._streamed = 0
            chunk = self._stream.read(min(len(view), _CHUNK))
            if chunk:
                self._streamed += len(chunk)
                if self._streamed > part.size:
                    raise OSError(f"{part.name}: longer than its {part.size} bytes")
                view[: len(chunk)] = chunk
                return len(chunk)
            if self._streamed != part.size:
                raise OSError(f"{part.name}: {self._streamed} bytes, expected {part.size}")
            self._next()
        return 0

    def _next(self) -> None:
        if self._stream is not None:
            self._stream.close()
            self._stream = None
        self._index += 1
        self._offset = 0

    def close(self) -> None:
        if self._stream is not None:
            self._stream.close()
            self._stream = None
        super().close()


def _header_value(name: str) -> str:
    """A file name for a ``Content-Disposition`` header (non-ASCII kept as UTF-8, as
    browsers send it; quotes and breaks were refused by `UploadFile`)."""
    return name.replace("\\", "_")

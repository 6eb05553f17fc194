"""Prefix tracking of a run's output text in constant memory (length + SHA-256).

``ChannelBase`` hands ``on_response_complete`` the whole run's text: ``prompt`` returns
the concatenation of everything streamed, including the text from before a question.
An adapter that already showed part of it (a status card, a flushed message) records
that part here, chunk by chunk, and later drops exactly that prefix from the final text
(`StreamedText.remainder()`), without keeping the text itself.
"""

from __future__ import annotations

import hashlib
import threading

__all__ = ["StreamedText"]


def _encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


class StreamedText:
    """The length and digest of the text taken so far (thread-safe).

    ``add(chunk)`` appends; `after_prefix()` / `remainder()` remove the taken prefix
    from a later text; `copy()` freezes a checkpoint (e.g. "everything up to the
    last closed segment").
    """

    __slots__ = ("_digest", "_length", "_lock")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._length = 0
        self._digest = hashlib.sha256()

    @property
    def length(self) -> int:
        """Characters taken so far."""
        with self._lock:
            return self._length

    def add(self, chunk: str) -> None:
        """Record ``chunk`` as taken (appended to the prefix)."""
        if not chunk:
            return
        with self._lock:
            self._length += len(chunk)
            self._digest.update(_encode(chunk))

    def copy(self) -> StreamedText:
        """An independent checkpoint of the prefix taken so far."""
        clone = StreamedText()
        with self._lock:
            clone._length = self._length
            clone._digest = self._digest.copy()
        return clone

    def after_prefix(self, text: str) -> str | None:
        """``text`` after the taken prefix, or None when ``text`` does not start with it."""
        with self._lock:
            length = self._length
            digest = self._digest.copy().digest()
        if length == 0:
            return text
        if len(text) < length:
            return None
        head = _encode(text[:length])
        return text[length:] if hashlib.sha256(head).digest() == digest else None

    def remainder(self, text: str) -> str:
        """``text`` without the taken prefix; all of ``text`` if it does not start with it."""
        rest = self.after_prefix(text)
        return text if rest is None else rest

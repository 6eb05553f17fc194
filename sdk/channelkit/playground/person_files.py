"""The files an emulated person sends (``files`` of ``POST /_emulator/send``), kept by an
emulator so that its platform's download API can serve them byte for byte.

Every emulator that takes files (Slack, Discord, Feishu, DingTalk) keeps them in one
`PersonFiles` store: bounded (the oldest file is dropped past `MAX_FILES`), locked, and
counting the bytes each download served (``served``) so a test can tell what the bot
fetched. `media_kind()` is how the emulators decide which kind of message a file
becomes (an image message or a file message), the way the platforms' clients do.
"""

from __future__ import annotations

import secrets
import threading
from collections import OrderedDict

from channelkit.playground.emulator import EmulatedFile

__all__ = ["MAX_FILES", "PersonFiles", "media_kind"]

#: Files one emulator keeps for download (the oldest is dropped past this many).
MAX_FILES = 100


def media_kind(content_type: str) -> str:
    """``image``, ``audio``, ``video`` or ``file`` for a declared media type."""
    major = content_type.split("/", 1)[0].lower()
    return major if major in ("image", "audio", "video") else "file"


class PersonFiles:
    """Files a person sent, by key (thread-safe; at most ``max_files``)."""

    def __init__(self, max_files: int = MAX_FILES) -> None:
        self._max = max_files
        self._lock = threading.Lock()
        self._files: OrderedDict[str, EmulatedFile] = OrderedDict()
        #: key -> the body bytes the last download of it served
        self.served: dict[str, int] = {}

    def keep(self, file: EmulatedFile, prefix: str = "F") -> str:
        """Store ``file`` under a new random key starting with ``prefix``; the key."""
        key = f"{prefix}{secrets.token_hex(8)}"
        with self._lock:
            self._files[key] = file
            while len(self._files) > self._max:
                old, _ = self._files.popitem(last=False)
                self.served.pop(old, None)
        return key

    def get(self, key: str) -> EmulatedFile | None:
        """The file stored under ``key`` (None when unknown or dropped)."""
        with self._lock:
            return self._files.get(key)

    def serve(self, key: str) -> bytes | None:
        """The bytes of ``key`` for a download, counted in ``served`` (None: unknown)."""
        with self._lock:
            file = self._files.get(key)
            if file is None:
                return None
            self.served[key] = len(file.data)
            return file.data

    def clear(self) -> None:
        """Forget every file (an emulator reset)."""
        with self._lock:
            self._files.clear()
            self.served.clear()

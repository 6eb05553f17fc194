"""The files the bot uploads to an emulator (the outbound half of issue 25).

An emulator whose platform takes uploads (Telegram ``sendPhoto`` / ``sendDocument``,
Discord attachments, Slack's external upload) keeps each file in one `BotFiles` store:
bounded (the oldest dropped past `MAX_BOT_FILES`), locked, each under a random key. A
message view lists them as ``"files": [{"name", "contentType", "size", "url"}]`` and
``GET /_emulator/files/<key>`` serves the bytes back, so a test can compare sha256.

``POST /_emulator/files/fail {"status": 400, "description": "...", "times": 1}`` makes
the next ``times`` uploads fail with that status (a refusal, a 429 or a 5xx), so the
SDK's text fallback and retries can be seen. `parse_multipart()` reads a
``multipart/form-data`` body (the form fields as text, the file parts as bytes).
"""

from __future__ import annotations

import email.parser
import email.policy
import secrets
import threading
from collections import OrderedDict, deque
from dataclasses import dataclass
from typing import Any

from channelkit.playground.emulator import EmulatedFile, HttpReply

__all__ = ["MAX_BOT_FILES", "BotFiles", "Fault", "parse_multipart"]

#: Uploaded files one emulator keeps (the oldest is dropped past this many).
MAX_BOT_FILES = 100
#: Injected upload failures queued at most.
MAX_FAULTS = 20
_PREFIX = "/_emulator/files/"


@dataclass(frozen=True)
class Fault:
    """An injected failure of the next upload: HTTP ``status`` and ``description``."""

    status: int
    description: str


def parse_multipart(
    body: bytes, content_type: str
) -> tuple[dict[str, str], dict[str, EmulatedFile]]:
    """The text fields and the file parts (by part name) of a multipart body.

    ``ValueError`` when the body is not ``multipart/form-data``."""
    if not content_type.lower().startswith("multipart/form-data"):
        raise ValueError("not a multipart/form-data body")
    head = b"Content-Type: " + content_type.encode("latin-1") + b"\r\n\r\n"
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + body)
    if not message.is_multipart():
        raise ValueError("multipart body without parts")
    fields: dict[str, str] = {}
    files: dict[str, EmulatedFile] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        if not isinstance(name, str):
            continue
        payload = part.get_payload(decode=True)
        data = payload if isinstance(payload, bytes) else b""
        filename = part.get_filename()
        if filename is not None:
            files[name] = EmulatedFile(filename, part.get_content_type(), data)
        else:
            fields[name] = data.decode("utf-8", "replace")
    return fields, files


class BotFiles:
    """Files the bot uploaded, by key (thread-safe; at most ``max_files``)."""

    def __init__(self, max_files: int = MAX_BOT_FILES) -> None:
        self._max = max_files
        self._lock = threading.Lock()
        self._files: OrderedDict[str, EmulatedFile] = OrderedDict()
        self._faults: deque[Fault] = deque(maxlen=MAX_FAULTS)
        self._failed = 0

    def keep(self, file: EmulatedFile) -> str:
        """Store ``file``; its new key."""
        key = "B" + secrets.token_hex(8)
        with self._lock:
            self._files[key] = file
            while len(self._files) > self._max:
                self._files.popitem(last=False)
        return key

    @property
    def failed(self) -> int:
        """Uploads answered with an injected fault since the last reset."""
        with self._lock:
            return self._failed

    @property
    def count(self) -> int:
        """Files kept now."""
        with self._lock:
            return len(self._files)

    def get(self, key: str) -> EmulatedFile | None:
        """The file under ``key`` (None: unknown or dropped)."""
        with self._lock:
            return self._files.get(key)

    def view(self, key: str) -> dict[str, Any]:
        """``{"name", "contentType", "size", "url"}`` of ``key`` (size 0 once dropped)."""
        file = self.get(key)
        if file is None:
            return {"name": "", "contentType": "", "size": 0, "url": _PREFIX + key}
        return {
            "name": file.name,
            "contentType": file.content_type,
            "size": len(file.data),
            "url": _PREFIX + key,
        }

    def take_fault(self) -> Fault | None:
        """The next injected failure, if any (used up by this upload)."""
        with self._lock:
            if not self._faults:
                return None
            self._failed += 1
            return self._faults.popleft()

    def control(self, method: str, path: str, data: Any) -> HttpReply | None:
        """``GET /_emulator/files/<key>`` and ``POST /_emulator/files/fail``; None for
        any other path."""
        if not path.startswith(_PREFIX):
            return None
        key = path[len(_PREFIX) :]
        if method == "POST" and key == "fail":
            return self._inject(data)
        if method != "GET":
            return HttpReply(405, {"error": "method not allowed"})
        file = self.get(key)
        if file is None:
            return HttpReply(404, {"error": f"no file {key}"})
        return HttpReply(200, None, content_type=file.content_type, raw=file.data)

    def _inject(self, data: Any) -> HttpReply:
        body = data if isinstance(data, dict) else {}
        status, description = body.get("status", 400), body.get("description", "refused")
        times = body.get("times", 1)
        if isinstance(status, bool) or not isinstance(status, int) or not 400 <= status <= 599:
            return HttpReply(400, {"error": "status: must be an HTTP error status (400-599)"})
        if not isinstance(description, str) or not description:
            return HttpReply(400, {"error": "description: must be a non-empty string"})
        if isinstance(times, bool) or not isinstance(times, int) or not 1 <= times <= MAX_FAULTS:
            return HttpReply(400, {"error": f"times: must be 1-{MAX_FAULTS}"})
        with self._lock:
            for _ in range(times):
                self._faults.append(Fault(status, description))
        return HttpReply(200, {"ok": True, "queued": times})

    def clear(self) -> None:
        """Forget every file and fault (an emulator reset)."""
        with self._lock:
            self._files.clear()
            self._faults.clear()
            self._failed = 0

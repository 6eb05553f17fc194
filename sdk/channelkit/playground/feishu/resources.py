"""The Feishu emulator's message resources: files a person sends and their download.

``POST /_emulator/send`` with ``files`` sends what a Feishu client sends: images with
text as one ``post`` (a text line, then an ``img`` element per image), an image alone
as an ``image`` message, and every other file as its own ``file`` / ``audio`` /
``media`` message (Feishu has no caption on those; any text then goes first as a
``post`` or ``text`` message). ``GET /open-apis/im/v1/messages/{message_id}/resources/
{file_key}?type=image|file`` serves them with a valid tenant token, only for the
message that carries the key and with the type its key needs (``image`` for an
``image_key``, ``file`` for a ``file_key``), answering Feishu's errors otherwise.

The bot's uploads: ``POST /open-apis/im/v1/images`` (multipart: ``image_type=message``
and a non-empty ``image`` part of at most 10 MB) answers ``{"image_key"}`` and
``POST /open-apis/im/v1/files`` (multipart: ``file_type`` among Feishu's seven,
``file_name`` and a non-empty ``file`` part of at most 30 MB) answers ``{"file_key"}``;
both keep the bytes in `BotFiles` (``/_emulator/files/<key>`` serves them and
``/_emulator/files/fail`` makes the next upload fail). An ``image`` / ``file`` message
naming such a key shows the file in its view's ``"files"``.
"""

from __future__ import annotations

import secrets
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from channelkit.playground.bot_files import BotFiles, parse_multipart
from channelkit.playground.emulator import CallbackDelivery, EmulatedFile, HttpReply, Origin
from channelkit.playground.feishu.callbacks import FeishuCallbacks
from channelkit.playground.feishu.chat import error, ok
from channelkit.playground.person_files import MAX_FILES, PersonFiles, media_kind

__all__ = ["FeishuResources"]

#: message_type of a file that is not an image, by its kind
_FILE_MESSAGE = {"audio": "audio", "video": "media", "file": "file"}
IMAGES_PATH = "/open-apis/im/v1/images"
FILES_PATH = "/open-apis/im/v1/files"
_FILE_TYPES = frozenset({"opus", "mp4", "pdf", "doc", "xls", "ppt", "stream"})
_IMAGE_MAX = 10 * 1024 * 1024
_FILE_MAX = 30 * 1024 * 1024
#: Feishu's code of an injected failure, by HTTP status (rate limit, server error)
_FAULT_CODES = {429: 99991400, 500: 234002}


class FeishuResources(FeishuCallbacks):
    """Files a person sends as Feishu messages, and the message resource download."""

    accepts_files = True

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        #: the files people sent, by resource key
        self.person_files = PersonFiles()
        #: resource key -> the message carrying it (at most `MAX_FILES`; the lock held)
        self._resource_owner: OrderedDict[str, str] = OrderedDict()
        #: the files the bot uploaded, and image_key / file_key -> their `BotFiles` key
        self.bot_files = BotFiles()
        self._uploads: OrderedDict[str, str] = OrderedDict()

    def reset(self) -> None:
        """Forget the files too."""
        with self._lock:
            self._resource_owner.clear()
            self._uploads.clear()
        self.person_files.clear()
        self.bot_files.clear()
        super().reset()

    def handle_control(self, method: str, path: str, data: Any) -> HttpReply | None:
        return self.bot_files.control(method, path, data)

    # -- the bot's uploads -----------------------------------------------------------------
    def _auth_error(self, headers: Mapping[str, str]) -> HttpReply | None:
        """The tenant token check of an API call (`FeishuEmulator` answers it)."""
        raise NotImplementedError

    def handle_api(
        self,
        method: str,
        path: str,
        query: Mapping[str, str],
        headers: Mapping[str, str],
        body: bytes,
    ) -> HttpReply | None:
        if method != "POST" or path not in (IMAGES_PATH, FILES_PATH):
            return super().handle_api(method, path, query, headers, body)
        recorded: dict[str, Any] | None = None
        reply = self._auth_error(headers)
        if reply is None:
            try:
                fields, parts = parse_multipart(body, headers.get("content-type", ""))
            except ValueError:
                reply = error(400, 99992402, "field validation failed: the body must be multipart")
            else:
                recorded = {
                    **fields,
                    **{
                        k: {"name": f.name, "contentType": f.content_type, "size": len(f.data)}
                        for k, f in parts.items()
                    },
                }
                reply = self._upload(path == IMAGES_PATH, fields, parts)
        self._record(method, path, query, recorded, reply)
        return reply

    def _upload(
        self, image: bool, fields: Mapping[str, str], parts: Mapping[str, EmulatedFile]
    ) -> HttpReply:
        part_name, limit = ("image", _IMAGE_MAX) if image else ("file", _FILE_MAX)
        if image and fields.get("image_type") != "message":
            return error(400, 99992402, "field validation failed: image_type must be message")
        if not image and fields.get("file_type") not in _FILE_TYPES:
            return error(400, 99992402, "field validation failed: file_type")
        if not image and not fields.get("file_name"):
            return error(400, 99992402, "field validation failed: file_name is required")
        file = parts.get(part_name)
        if file is None:
            return error(400, 99992402, f"field validation failed: {part_name} is required")
        if not file.data:
            return error(400, 234010, "File size must be greater than 0.")
        if len(file.data) > limit:
            return error(400, 234006, "The file size exceeds the limit.")
        fault = self.bot_files.take_fault()
        if fault is not None:
            return error(fault.status, _FAULT_CODES.get(fault.status, 234001), fault.description)
        if not image:  # the message shows the file under the name it was uploaded with
            file = EmulatedFile(fields["file_name"], file.content_type, file.data)
        stored = self.bot_files.keep(file)
        key = ("img_v3_" if image else "file_v3_") + secrets.token_hex(12)
        with self._lock:
            self._uploads[key] = stored
            while len(self._uploads) > MAX_FILES:
                self._uploads.popitem(last=False)
        return ok({"image_key" if image else "file_key": key})

    def _uploaded_view(self, msg_type: str, content: Mapping[str, Any]) -> dict[str, Any] | None:
        """The view of the bot's upload an ``image`` / ``file`` message names (None: the
        key is not one the bot uploaded; the lock held)."""
        key = content.get("image_key" if msg_type == "image" else "file_key")
        stored = self._uploads.get(key) if isinstance(key, str) else None
        return None if stored is None else self.bot_files.view(stored)

    def _keep(self, file: EmulatedFile, message_id: str, image: bool) -> str:
        key = self.person_files.keep(file, prefix="img_v3_" if image else "file_v3_")
        with self._lock:
            self._resource_owner[key] = message_id
            while len(self._resource_owner) > MAX_FILES:
                self._resource_owner.popitem(last=False)
        return key

    def send_user_files(
        self, text: str, files: tuple[EmulatedFile, ...], *, origin: Origin | None = None
    ) -> tuple[str, CallbackDelivery]:
        """The person sends ``files`` (and ``text``) the way a Feishu client does (see the
        module docstring); the first message's id and the first failed delivery's answer
        (else the last one's)."""
        images = [f for f in files if media_kind(f.content_type) == "image"]
        others = [f for f in files if media_kind(f.content_type) != "image"]
        sent: list[tuple[str, CallbackDelivery]] = []

        def view(group: list[EmulatedFile]) -> list[dict[str, Any]]:
            return [
                {"name": f.name, "contentType": f.content_type, "size": len(f.data)} for f in group
            ]

        mention = origin is not None and origin.mentions_bot
        if images and (text or mention or len(images) > 1):

            def post(message_id: str, body: str) -> Mapping[str, Any]:
                lines: list[list[dict[str, Any]]] = (
                    [[{"tag": "text", "text": body}]] if body else []
                )
                lines += [
                    [{"tag": "img", "image_key": self._keep(f, message_id, True)}] for f in images
                ]
                return {"title": "", "content": lines}

            sent.append(
                self.send_user_message(
                    text, origin=origin, message_type="post", content_of=post, files=view(images)
                )
            )
        elif images:
            image = images[0]
            sent.append(
                self.send_user_message(
                    "",
                    origin=origin,
                    message_type="image",
                    content_of=lambda mid, _b: {"image_key": self._keep(image, mid, True)},
                    files=view(images),
                )
            )
        elif text:
            sent.append(self.send_user_message(text, origin=origin))
        for file in others:
            kind = _FILE_MESSAGE[media_kind(file.content_type)]

            def content(
                message_id: str, _body: str, file: EmulatedFile = file, kind: str = kind
            ) -> dict[str, Any]:
                found: dict[str, Any] = {
                    "file_key": self._keep(file, message_id, False),
                    "file_name": file.name,
                }
                if kind in ("audio", "media"):
                    found["duration"] = 1000
                return found

            sent.append(
                self.send_user_message(
                    "", origin=origin, message_type=kind, content_of=content, files=view([file])
                )
            )
        failed = next((result for _, result in sent if result.status >= 400), None)
        return sent[0][0], failed or sent[-1][1]

    def _get_resource(
        self, query: Mapping[str, str], data: Mapping[str, Any], message_id: str, key: str
    ) -> HttpReply:
        """``GET .../messages/{message_id}/resources/{file_key}?type=`` (token checked)."""
        kind = query.get("type")
        if kind not in ("image", "file"):
            return error(400, 234001, "Invalid request param: type must be image or file.")
        with self._lock:
            owner = self._resource_owner.get(key)
        if owner is None or owner != message_id:  # the key and the message go together
            return error(400, 234003, "File not in msg.")
        if (kind == "image") != key.startswith("img_"):
            return error(400, 234001, f"Invalid request param: {key} is not of type {kind}.")
        data_bytes = self.person_files.serve(key)
        if data_bytes is None:
            return error(400, 234003, "File not in msg.")
        return HttpReply(200, None, content_type="application/octet-stream", raw=data_bytes)

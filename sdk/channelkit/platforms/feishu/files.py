"""Feishu / Lark images and files a person sends (inbound attachments, issue 25).

An ``im.message.receive_v1`` event's ``content`` names its resources by key:
``image`` messages ``{"image_key"}``, ``file`` messages ``{"file_key", "file_name"}``,
``audio`` messages ``{"file_key", "duration"}`` (milliseconds), ``media`` (video)
messages ``{"file_key", "file_name", "duration"}``, and a ``post`` may hold images
(``{"tag": "img", "image_key"}``) between its lines. `parse_resources()` turns them
into `Attachment`s whose reference is `resource_reference()` of the message id, the
resource type and the key; `resource_source()` answers how to fetch one:
``GET /open-apis/im/v1/messages/{message_id}/resources/{file_key}?type=image|file``
on the configured Open Platform host with the tenant access token as Bearer (an
``image_key`` is fetched with ``type=image``, every ``file_key`` with ``type=file``).
No redirect is followed.

`upload()` is `FeishuChannel.upload_file` (the agent's files out): an image Feishu shows
as one (`IMAGE_TYPES`, at most `IMAGE_MAX_BYTES`) is uploaded with
``POST /open-apis/im/v1/images`` (multipart: ``image_type=message`` and the ``image``
part) and sent as an ``image`` message ``{"image_key"}``; any other file with
``POST /open-apis/im/v1/files`` (multipart: ``file_type``, ``file_name`` and the
``file`` part, at most `FILE_MAX_BYTES`, never empty) and sent as a ``file`` message
``{"file_key"}``. ``file_type`` is `file_type()` of the name: ``pdf``, ``doc``,
``xls``, ``ppt`` for those documents, ``stream`` for anything else (audio and video go
as plain files too: an ``audio`` / ``media`` message needs an OPUS / MP4 with its
duration and a cover image). Feishu's image and file messages carry no caption: a
caption follows as a text message in the same place. One attempt; the part is
reopened by every attempt the core makes.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from channelkit.attachments.model import Attachment, AttachmentKind
from channelkit.attachments.names import sanitize_name
from channelkit.clients.feishu import UploadFileRequest, UploadImageRequest
from channelkit.core.inbound_files import AttachmentSource
from channelkit.errors import AttachmentRefused, AttachmentTooLarge, DeserializationError
from channelkit.http.model import UNSET
from channelkit.http.multipart import UploadFile

if TYPE_CHECKING:
    from channelkit.attachments.outbound import OutboundSource
    from channelkit.clients.feishu import FeishuClient

__all__ = [
    "FILE_MAX_BYTES",
    "IMAGE_MAX_BYTES",
    "IMAGE_TYPES",
    "RESOURCE_PATH",
    "UPLOAD_TIMEOUT_S",
    "file_type",
    "parse_resources",
    "resource_reference",
    "resource_source",
    "split_reference",
    "upload",
]

logger = logging.getLogger(__name__)

#: The message resource download: its body is the file, streamed to disk by
#: `channelkit.attachments.download` (not a JSON call of the generated client).
RESOURCE_PATH = "/open-apis/im/v1/messages/{message_id}/resources/{file_key}"
#: Resources read from one message.
MAX_RESOURCES = 20
#: What a message id and a resource key look like (they go into the URL path).
_ID = re.compile(r"[A-Za-z0-9_.-]{1,200}")

#: Feishu's limits for uploads: an image (for an image message), any other file.
IMAGE_MAX_BYTES = 10 * 1024 * 1024
FILE_MAX_BYTES = 30 * 1024 * 1024
#: What ``im/v1/images`` takes and an image message shows (anything else is a file).
IMAGE_TYPES = frozenset(
    {
        "image/jpeg",
        "image/png",
        "image/webp",
        "image/gif",
        "image/bmp",
        "image/tiff",
        "image/x-icon",
        "image/vnd.microsoft.icon",
        "image/heic",
    }
)
#: The overall deadline of one upload call (the body may be megabytes).
UPLOAD_TIMEOUT_S = 120.0
#: A name's extension -> the upload's ``file_type`` (``stream`` for any other).
_FILE_TYPES = {
    "pdf": "pdf",
    "doc": "doc",
    "docx": "doc",
    "xls": "xls",
    "xlsx": "xls",
    "ppt": "ppt",
    "pptx": "ppt",
}

#: message_type -> (attachment kind, name when it has none); fetched with ``type=file``
_FILE_MESSAGES = {
    "file": (AttachmentKind.FILE, "file"),
    "audio": (AttachmentKind.AUDIO, "audio.opus"),
    "media": (AttachmentKind.VIDEO, "video.mp4"),
}


def resource_reference(message_id: str, resource_type: str, key: str) -> str:
    """The opaque `Attachment.reference` of one resource of a message."""
    return f"{message_id}/{resource_type}/{key}"


def split_reference(reference: str) -> tuple[str, str, str] | None:
    """``(message_id, type, key)`` of a `resource_reference()`, None when malformed."""
    parts = reference.split("/")
    if len(parts) != 3 or parts[1] not in ("image", "file"):
        return None
    message_id, kind, key = parts
    if not _ID.fullmatch(message_id) or not _ID.fullmatch(key):
        return None
    return message_id, kind, key


def parse_resources(
    message_id: str, message_type: str, content: Mapping[str, Any]
) -> tuple[Attachment, ...]:
    """The resources of one message's parsed ``content``, in order."""
    found: list[Attachment] = []
    if message_type == "image":
        key = _str(content.get("image_key"))
        if key:
            found.append(_image(message_id, key))
    elif message_type in _FILE_MESSAGES:
        kind, default = _FILE_MESSAGES[message_type]
        key = _str(content.get("file_key"))
        if key:
            duration = content.get("duration")
            found.append(
                Attachment(
                    kind=kind,
                    name=_str(content.get("file_name")) or default,
                    reference=resource_reference(message_id, "file", key),
                    duration=duration / 1000.0
                    if isinstance(duration, int) and duration >= 0
                    else None,
                )
            )
    elif message_type == "post":
        found.extend(_image(message_id, key) for key in _post_images(content))
    return tuple(found[:MAX_RESOURCES])


def resource_source(attachment: Attachment, base_url: str, token: str) -> AttachmentSource:
    """How to download ``attachment``: the message resource URL on ``base_url`` (the
    Open Platform host the channel talks to) with the tenant token; `AttachmentRefused`
    for a reference that is not a Feishu resource."""
    parts = split_reference(attachment.reference)
    if parts is None:
        raise AttachmentRefused(
            name=sanitize_name(attachment.name), reason="it is not a Feishu message resource"
        )
    message_id, kind, key = parts
    path = RESOURCE_PATH.format(message_id=quote(message_id), file_key=quote(key))
    return AttachmentSource(
        f"{base_url.rstrip('/')}{path}?type={kind}",
        headers={"Authorization": f"Bearer {token}"},
    )


def _image(message_id: str, key: str) -> Attachment:
    return Attachment(
        kind=AttachmentKind.IMAGE,
        name="image",
        reference=resource_reference(message_id, "image", key),
    )


def _post_images(content: Mapping[str, Any]) -> Iterator[str]:
    blocks = content.get("content")
    if not isinstance(blocks, list):
        for value in content.values():  # locale-wrapped {"zh_cn": {...}}
            if isinstance(value, Mapping):
                yield from _post_images(value)
                return
        return
    for line in blocks:
        for item in line if isinstance(line, list) else ():
            if isinstance(item, Mapping) and item.get("tag") == "img":
                key = _str(item.get("image_key"))
                if key:
                    yield key


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def file_type(name: str) -> str:
    """The ``file_type`` of an ``im/v1/files`` upload of a file called ``name``."""
    _, dot, extension = name.rpartition(".")
    return _FILE_TYPES.get(extension.lower(), "stream") if dot else "stream"


def upload(
    client: FeishuClient,
    send: Callable[[str, str], str],
    file: OutboundSource,
    *,
    image: bool = False,
    caption: str | None = None,
    send_caption: Callable[[str], object] | None = None,
) -> str:
    """Upload ``file`` and send it as an image or file message; that message's id.

    ``send(msg_type, content)`` sends the message where it belongs (the chat, or a
    reply in the target's thread) and returns its id; ``send_caption(text)`` sends the
    caption after it (a failure there is logged: the file was delivered)."""
    content_type = file.content_type()
    timeout = (3.05, UPLOAD_TIMEOUT_S)
    if file.size == 0:
        raise AttachmentRefused(name=file.name, reason="is empty (Feishu takes no empty file)")
    if image and content_type in IMAGE_TYPES and file.size <= IMAGE_MAX_BYTES:
        part = UploadFile(file.name, content_type, file.size, file.open)
        uploaded = client.upload_image(
            body=UploadImageRequest(image_type="message", image=part), timeout=timeout
        )
        key = None if uploaded.data is UNSET else uploaded.data.image_key
        if not isinstance(key, str) or not key:
            raise DeserializationError("data.image_key", key, "missing image key")
        msg_type, content = "image", {"image_key": key}
    else:
        if file.size > FILE_MAX_BYTES:
            raise AttachmentTooLarge(name=file.name, limit=FILE_MAX_BYTES, size=file.size)
        part = UploadFile(file.name, content_type, file.size, file.open)
        request = UploadFileRequest(file_type=file_type(file.name), file_name=file.name, file=part)
        stored = client.upload_file(body=request, timeout=timeout)
        key = None if stored.data is UNSET else stored.data.file_key
        if not isinstance(key, str) or not key:
            raise DeserializationError("data.file_key", key, "missing file key")
        msg_type, content = "file", {"file_key": key}
    message_id = send(msg_type, json.dumps(content, separators=(",", ":")))
    if caption and send_caption is not None:
        try:
            send_caption(caption)
        except Exception as exc:
            logger.warning("the caption of %r was not sent: %s", file.name, exc)
    return message_id

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
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import quote

from channelkit.attachments.model import Attachment, AttachmentKind
from channelkit.attachments.names import sanitize_name
from channelkit.core.inbound_files import AttachmentSource
from channelkit.errors import AttachmentRefused

__all__ = [
    "RESOURCE_PATH",
    "parse_resources",
    "resource_reference",
    "resource_source",
    "split_reference",
]

#: The message resource download: its body is the file, streamed to disk by
#: `channelkit.attachments.download` (not a JSON call of the generated client).
RESOURCE_PATH = "/open-apis/im/v1/messages/{message_id}/resources/{file_key}"
#: Resources read from one message.
MAX_RESOURCES = 20
#: What a message id and a resource key look like (they go into the URL path).
_ID = re.compile(r"[A-Za-z0-9_.-]{1,200}")

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

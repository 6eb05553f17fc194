"""An agent's files and images to Discord: one message with an attachment.

`upload()` is `DiscordChannel.upload_file`: one ``POST /channels/{id}/messages`` as
``multipart/form-data`` (`DiscordClient.create_message_with_files`): ``payload_json``
carries the message (the caption as its content, nobody pinged, ``attachments: [{"id":
0, "filename"}]``) and ``files[0]`` the file, streamed and reopened by every attempt
(also when the REST rate limiter sends it again after a 429). Discord shows an image
attachment inline by itself, so an image and a file are sent the same way. A file over
`MAX_BYTES` (a bot's upload limit in a server without boosts) is refused before a byte
is sent.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from channelkit.clients.discord import CreateMessageFilesRequest
from channelkit.errors import AttachmentTooLarge
from channelkit.http.multipart import UploadFile
from channelkit.platforms.discord.api import NO_MENTIONS

if TYPE_CHECKING:
    from channelkit.attachments.outbound import OutboundSource
    from channelkit.core.types import SessionTarget
    from channelkit.platforms.discord.api import DiscordApi

__all__ = ["CAPTION_MAX", "MAX_BYTES", "UPLOAD_TIMEOUT_S", "upload"]

#: The largest file a bot uploads where the server has no boosts (10 MiB).
MAX_BYTES = 10 * 1024 * 1024
#: A message's content limit (the caption is cut to it).
CAPTION_MAX = 2000
#: The overall deadline of one upload.
UPLOAD_TIMEOUT_S = 120.0


def upload(
    api: DiscordApi,
    target: SessionTarget,
    file: OutboundSource,
    *,
    image: bool = False,
    caption: str | None = None,
) -> str:
    """Post ``file`` to the target's channel (its thread, when it has one); the new
    message's id."""
    if file.size > MAX_BYTES:
        raise AttachmentTooLarge(name=file.name, limit=MAX_BYTES, size=file.size)
    payload: dict[str, Any] = {
        "allowed_mentions": dict(NO_MENTIONS),
        "attachments": [{"id": 0, "filename": file.name}],
    }
    if caption:
        payload["content"] = caption[:CAPTION_MAX]
    part = UploadFile(file.name, file.content_type(), file.size, file.open)
    body = CreateMessageFilesRequest(
        payload_json=json.dumps(payload, ensure_ascii=False), files_0=part
    )
    message = api.client.create_message_with_files(
        channel_id=target.thread_id or target.chat_id,
        body=body,
        timeout=(5.0, UPLOAD_TIMEOUT_S),
    )
    return str(message.id)

"""Discord files both ways: a person's attachments in, the agent's files out.

## In

A ``MESSAGE_CREATE`` carries ``attachments``: objects with ``id``, ``filename``,
``content_type``, ``size``, ``url`` (Discord's CDN, ``cdn.discordapp.com``) and
``proxy_url`` (its media proxy), and for a voice message ``duration_secs``.
`parse_attachments()` turns them into `Attachment`s whose reference is the ``url``;
`file_source()` answers how to fetch one: a plain GET of that URL (the CDN URL is
signed by its ``ex`` / ``is`` / ``hm`` parameters; the bot token is never sent
there), and only when it is on Discord's own CDN hosts (plus the configured REST host
when it is not Discord's: an emulator or a proxy). Any other host is refused before
a request is made; no redirect is followed.

## Out

An agent's files and images to Discord: one message with an attachment.

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
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from channelkit.attachments.model import Attachment, AttachmentKind
from channelkit.attachments.names import sanitize_name
from channelkit.clients.discord import CreateMessageFilesRequest
from channelkit.core.inbound_files import AttachmentSource
from channelkit.errors import AttachmentRefused, AttachmentTooLarge
from channelkit.http.multipart import UploadFile
from channelkit.platforms.discord.api import NO_MENTIONS

if TYPE_CHECKING:
    from channelkit.attachments.outbound import OutboundSource
    from channelkit.core.types import SessionTarget
    from channelkit.platforms.discord.api import DiscordApi

__all__ = [
    "CAPTION_MAX",
    "DISCORD_FILE_HOSTS",
    "MAX_BYTES",
    "UPLOAD_TIMEOUT_S",
    "file_hosts",
    "file_source",
    "parse_attachments",
    "upload",
]

#: Where Discord serves message attachments: its CDN and its media proxy.
DISCORD_FILE_HOSTS = ("cdn.discordapp.com", "media.discordapp.net")
#: Attachments read from one message (Discord allows 10 per message).
MAX_ATTACHMENTS = 20


def parse_attachments(value: Any) -> tuple[Attachment, ...]:
    """A message's ``attachments`` as `Attachment`s, in order (an item without a
    ``url`` is kept with an empty reference: the person is told it was not received)."""
    if not isinstance(value, list):
        return ()
    found = []
    for item in value[:MAX_ATTACHMENTS]:
        if not isinstance(item, Mapping):
            continue
        content_type = _str(item.get("content_type"))
        size, duration = item.get("size"), item.get("duration_secs")
        seconds = duration if isinstance(duration, int | float) and duration >= 0 else None
        found.append(
            Attachment(
                kind=AttachmentKind.parse((content_type or "").split("/", 1)[0]),
                name=_str(item.get("title")) or _str(item.get("filename")) or "attachment",
                reference=_str(item.get("url")) or "",
                content_type=content_type,
                size=size if isinstance(size, int) and size >= 0 else None,
                duration=float(seconds) if seconds is not None else None,
            )
        )
    return tuple(found)


def file_hosts(api_base_url: str) -> tuple[str, ...]:
    """The hosts attachments may be fetched from: Discord's CDN hosts, and the REST
    host when the channel is configured with one that is not Discord's."""
    api_host = (urlsplit(api_base_url).hostname or "").lower()
    if not api_host or api_host == "discord.com" or api_host.endswith(".discord.com"):
        return DISCORD_FILE_HOSTS
    return (*DISCORD_FILE_HOSTS, api_host)


def file_source(attachment: Attachment, hosts: Iterable[str]) -> AttachmentSource:
    """How to download ``attachment``: its signed CDN URL, without credentials, when it
    is ``https`` on one of ``hosts`` (``http`` only to a configured non-Discord host);
    `AttachmentRefused` otherwise."""
    name = sanitize_name(attachment.name)
    url = attachment.reference
    if not url:
        raise AttachmentRefused(name=name, reason="Discord gave no URL for it")
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    if host not in tuple(h.lower() for h in hosts):
        raise AttachmentRefused(
            name=name, reason=f"its URL is on {host or 'no host'!r}, not Discord's CDN"
        )
    if parts.scheme != "https" and not (parts.scheme == "http" and host not in DISCORD_FILE_HOSTS):
        raise AttachmentRefused(name=name, reason="its URL is not https")
    return AttachmentSource(url)


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


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

"""Discord files a person attaches to a message (inbound attachments, issue 25).

A ``MESSAGE_CREATE`` carries ``attachments``: objects with ``id``, ``filename``,
``content_type``, ``size``, ``url`` (Discord's CDN, ``cdn.discordapp.com``) and
``proxy_url`` (its media proxy), and for a voice message ``duration_secs``.
`parse_attachments()` turns them into `Attachment`s whose reference is the ``url``;
`file_source()` answers how to fetch one: a plain GET of that URL (the CDN URL is
signed by its ``ex`` / ``is`` / ``hm`` parameters; the bot token is never sent
there), and only when it is on Discord's own CDN hosts (plus the configured REST host
when it is not Discord's: an emulator or a proxy). Any other host is refused before
a request is made; no redirect is followed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

from channelkit.attachments.model import Attachment, AttachmentKind
from channelkit.attachments.names import sanitize_name
from channelkit.core.inbound_files import AttachmentSource
from channelkit.errors import AttachmentRefused

__all__ = ["DISCORD_FILE_HOSTS", "file_hosts", "file_source", "parse_attachments"]

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

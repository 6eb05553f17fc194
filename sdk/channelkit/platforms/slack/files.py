"""Slack files a person shares with the bot (inbound attachments, issue 25).

A message with files arrives as a ``message`` event with subtype ``file_share`` (or an
``app_mention`` in a channel) carrying ``files``: file objects with ``id``, ``name``,
``mimetype``, ``size`` and ``url_private_download`` (``url_private`` when there is no
download URL). `parse_files()` turns them into `Attachment`s whose reference is that
URL; `file_source()` answers how to fetch one: a GET with the bot token as
``Authorization: Bearer``, and only on Slack's own file host (``files.slack.com``, plus
the configured Web API host when it is not Slack's: an emulator or a proxy). A URL on
any other host is refused before anything is sent to it, so the token never leaves
Slack; no redirect is followed (Slack answers a download without a valid token with a
redirect to its sign-in page, which is refused the same way).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

from channelkit.attachments.model import Attachment, AttachmentKind
from channelkit.attachments.names import sanitize_name
from channelkit.core.inbound_files import AttachmentSource
from channelkit.errors import AttachmentRefused

__all__ = ["SLACK_FILE_HOSTS", "file_hosts", "file_source", "parse_files"]

#: The host Slack serves ``url_private`` / ``url_private_download`` from.
SLACK_FILE_HOSTS = ("files.slack.com",)
#: Files read from one message (Slack allows 10 per message).
MAX_FILES = 20


def parse_files(value: Any) -> tuple[Attachment, ...]:
    """The ``files`` of a message event as `Attachment`s, in order. A file without a
    download URL (an external file, a tombstone) is kept with an empty reference, so
    the person is told it was not received instead of it vanishing."""
    if not isinstance(value, list):
        return ()
    found = []
    for item in value[:MAX_FILES]:
        if not isinstance(item, Mapping):
            continue
        url = _str(item.get("url_private_download")) or _str(item.get("url_private")) or ""
        mimetype = _str(item.get("mimetype"))
        size = item.get("size")
        name = _str(item.get("name")) or _str(item.get("title")) or _str(item.get("id")) or "file"
        found.append(
            Attachment(
                kind=_kind(mimetype),
                name=name,
                reference=url,
                content_type=mimetype,
                size=size if isinstance(size, int) and size >= 0 else None,
            )
        )
    return tuple(found)


def file_hosts(api_base_url: str) -> tuple[str, ...]:
    """The hosts file downloads may go to: Slack's file host, and the Web API's host
    when the channel is configured with another one (an emulator, a proxy)."""
    api_host = (urlsplit(api_base_url).hostname or "").lower()
    if not api_host or api_host == "slack.com" or api_host.endswith(".slack.com"):
        return SLACK_FILE_HOSTS
    return (*SLACK_FILE_HOSTS, api_host)


def file_source(attachment: Attachment, token: str, hosts: Iterable[str]) -> AttachmentSource:
    """How to download ``attachment``: its URL with the bot token, when the URL is
    ``https`` (or ``http`` to a configured non-Slack host) on one of ``hosts``;
    `AttachmentRefused` otherwise, before the token goes anywhere."""
    name = sanitize_name(attachment.name)
    url = attachment.reference
    if not url:
        raise AttachmentRefused(name=name, reason="Slack gave no download URL for it")
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    allowed = tuple(h.lower() for h in hosts)
    if host not in allowed:
        raise AttachmentRefused(
            name=name, reason=f"its URL is on {host or 'no host'!r}, not a Slack file host"
        )
    if parts.scheme != "https" and not (parts.scheme == "http" and host not in SLACK_FILE_HOSTS):
        raise AttachmentRefused(name=name, reason="its URL is not https")
    return AttachmentSource(url, headers={"Authorization": f"Bearer {token}"})


def _kind(mimetype: str | None) -> AttachmentKind:
    return AttachmentKind.parse((mimetype or "").split("/", 1)[0])  # else FILE


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None

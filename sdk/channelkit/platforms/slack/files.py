"""Slack files both ways: a person's attachments in, the agent's files out.

## In

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

## Out

An agent's files and images to Slack: the external upload, in three steps.

`upload()` is `SlackChannel.upload_file`, one attempt of:

1. ``files.getUploadURLExternal`` (the file's name and length): an ``upload_url`` and a
   ``file_id``;
2. ``POST`` the file to that URL as ``multipart/form-data`` (its part named
   ``filename``), streamed from the file (reopened by every attempt). The URL must be
   ``https`` on Slack's file host (`UPLOAD_HOSTS`) or on the API's own host (the
   playground's emulator); any other URL is refused before a byte is sent, and the bot
   token never goes to it (the URL is pre-signed);
3. ``files.completeUploadExternal`` shares the file in the target's channel (its
   thread with ``thread_ts``) with the caption as ``initial_comment``.

It returns the file's id: Slack posts the message that shares it asynchronously, so no
message ``ts`` is known when the upload completes. A retry starts again at step 1 (a
file from a failed attempt stays private and unshared).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from channelkit.attachments.model import Attachment, AttachmentKind
from channelkit.attachments.names import sanitize_name
from channelkit.clients.slack import (
    FilesCompleteUploadExternalRequest,
    FilesGetUploadURLExternalRequest,
    UploadedFile,
)
from channelkit.core.inbound_files import AttachmentSource
from channelkit.errors import (
    ApiError,
    AttachmentRefused,
    AttachmentTooLarge,
    BadRequest,
    RateLimited,
    ServerError,
)
from channelkit.http.multipart import UploadFile
from channelkit.http.retry import parse_retry_after
from channelkit.http.transport import Transport

if TYPE_CHECKING:
    from channelkit.attachments.outbound import OutboundSource
    from channelkit.core.types import SessionTarget
    from channelkit.platforms.slack.api import SlackApi

__all__ = [
    "MAX_BYTES",
    "SLACK_FILE_HOSTS",
    "UPLOAD_HOSTS",
    "UPLOAD_TIMEOUT_S",
    "file_hosts",
    "file_source",
    "parse_files",
    "upload",
]

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


#: The hosts an upload URL may point at (besides the API's own host).
UPLOAD_HOSTS = frozenset({"files.slack.com"})
#: The largest file this SDK uploads to Slack (Slack's own limit is 1 GB).
MAX_BYTES = 1000 * 1000 * 1000
#: The overall deadline of the upload of the bytes (step 2).
UPLOAD_TIMEOUT_S = 120.0


def _check_url(url: str, api_base: str, name: str) -> None:
    parts, base = urlsplit(url), urlsplit(api_base)
    same_host = (parts.scheme, parts.netloc) == (base.scheme, base.netloc)
    if not same_host and (parts.scheme != "https" or parts.hostname not in UPLOAD_HOSTS):
        raise AttachmentRefused(
            name=name, reason="Slack answered an upload URL outside its own hosts (refused)"
        )


def _raise_for(status: int, headers: object, text: str) -> None:
    if status < 300:
        return
    said = f"file upload answered HTTP {status}: {text[:200]}"
    if status == 429:
        retry_after = parse_retry_after(getattr(headers, "get", lambda _: None)("Retry-After"), 0)
        raise RateLimited(said, status=status, retry_after=retry_after)
    if status >= 500:
        raise ServerError(said, status=status, retryable=True)
    raise BadRequest(said, status=status)


def upload(
    api: SlackApi,
    target: SessionTarget,
    file: OutboundSource,
    *,
    image: bool = False,
    caption: str | None = None,
) -> str:
    """Upload ``file`` and share it in ``target``'s channel (thread); the file's id."""
    if file.size > MAX_BYTES:
        raise AttachmentTooLarge(name=file.name, limit=MAX_BYTES, size=file.size)
    if file.size == 0:
        raise AttachmentRefused(name=file.name, reason="is empty (Slack takes no empty file)")
    client = api.client
    got = client.files_get_upload_url_external(
        body=FilesGetUploadURLExternalRequest(filename=file.name, length=file.size)
    )
    url, file_id = got.upload_url, got.file_id
    if not isinstance(url, str) or not isinstance(file_id, str) or not url or not file_id:
        raise ApiError("files.getUploadURLExternal: no upload_url or file_id", status=200)
    _check_url(url, client.server_url(), file.name)
    part = UploadFile(file.name, file.content_type(), file.size, file.open)
    transport = Transport(pool_size=1)
    try:
        response = transport.request(
            "POST", url, timeout=(5.0, UPLOAD_TIMEOUT_S), multipart={"filename": part}
        )
    finally:
        transport.close()
    _raise_for(response.status_code, response.headers, response.text)
    done = FilesCompleteUploadExternalRequest(
        files=[UploadedFile(id=file_id, title=file.name)], channel_id=target.chat_id
    )
    if target.thread_id:
        done.thread_ts = target.thread_id
    if caption:
        done.initial_comment = caption
    client.files_complete_upload_external(body=done)
    return file_id

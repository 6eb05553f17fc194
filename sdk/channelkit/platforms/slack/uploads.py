"""An agent's files and images to Slack: the external upload, in three steps.

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

from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from channelkit.clients.slack import (
    FilesCompleteUploadExternalRequest,
    FilesGetUploadURLExternalRequest,
    UploadedFile,
)
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

__all__ = ["MAX_BYTES", "UPLOAD_HOSTS", "UPLOAD_TIMEOUT_S", "upload"]

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

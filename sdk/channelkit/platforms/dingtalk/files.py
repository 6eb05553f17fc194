"""DingTalk pictures and files a person sends the robot (inbound attachments, issue 25).

A robot message names its media by download code in ``content``: ``picture``
messages ``{"downloadCode"}``, ``file`` messages ``{"downloadCode", "fileName"}``,
``audio`` messages ``{"downloadCode", "duration", "recognition"}``, ``video``
messages ``{"downloadCode", "duration", "videoType"}`` (durations in milliseconds),
and each picture of a ``richText`` message ``{"type": "picture", "downloadCode"}``.
`parse_media()` turns them into `Attachment`s whose reference is the download code
(never logged: it stands for the file). Downloading takes two steps: ``POST
/v1.0/robot/messageFiles/download`` with the code and the robot code answers a
short-lived ``downloadUrl`` (`CardApi.message_file_url`), then `file_source()` GETs
that URL without credentials, accepted only on DingTalk's own domain
(``dingtalk.com`` and its subdomains) or the configured API host when it is not
DingTalk's (an emulator, a proxy). No redirect is followed.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from channelkit.attachments.model import Attachment, AttachmentKind
from channelkit.attachments.names import sanitize_name
from channelkit.clients.dingtalk import (
    BatchSendOtoRequest,
    MediaUploadRequest,
    OrgGroupSendRequest,
)
from channelkit.core.inbound_files import AttachmentSource
from channelkit.errors import (
    ApiError,
    AttachmentRefused,
    AttachmentTooLarge,
    AuthError,
    ChannelKitError,
    ConfigurationError,
)
from channelkit.http.multipart import UploadFile

if TYPE_CHECKING:
    from channelkit.attachments.outbound import OutboundSource
    from channelkit.clients.dingtalk import DingtalkClient

__all__ = [
    "DINGTALK_FILE_DOMAIN",
    "IMAGE_TYPES",
    "UPLOAD_MAX_BYTES",
    "file_hosts",
    "file_message",
    "file_source",
    "parse_media",
    "upload",
]

logger = logging.getLogger(__name__)

#: Files are served from this domain and its subdomains.
DINGTALK_FILE_DOMAIN = "dingtalk.com"
#: Media read from one message.
MAX_MEDIA = 20
#: The largest image or file ``/media/upload`` takes (refused before a byte is sent).
UPLOAD_MAX_BYTES = 20 * 1024 * 1024
#: Images DingTalk shows as a picture message; any other file is sent as a file.
IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/bmp"})
#: Overall deadline of one upload (connect, whole answer), seconds.
UPLOAD_TIMEOUT_S = 120.0
#: Title of the Markdown message carrying a caption.
CAPTION_TITLE = "File"
#: Longest caption sent (characters).
CAPTION_MAX = 2000

#: msgtype -> (attachment kind, name when the message gives none)
_MEDIA_MESSAGES = {
    "picture": (AttachmentKind.IMAGE, "picture"),
    "file": (AttachmentKind.FILE, "file"),
    "audio": (AttachmentKind.AUDIO, "audio"),
    "video": (AttachmentKind.VIDEO, "video.mp4"),
}


def parse_media(msgtype: str, content: Any) -> tuple[Attachment, ...]:
    """The media of one robot message's ``content``, in order."""
    if not isinstance(content, Mapping):
        return ()
    found: list[Attachment] = []
    if msgtype in _MEDIA_MESSAGES:
        kind, default = _MEDIA_MESSAGES[msgtype]
        code = _str(content.get("downloadCode"))
        if code:
            duration = content.get("duration")
            millis = duration if isinstance(duration, int | float) and duration >= 0 else None
            found.append(
                Attachment(
                    kind=kind,
                    name=_str(content.get("fileName")) or default,
                    reference=code,
                    duration=None if millis is None else millis / 1000.0,
                )
            )
    elif msgtype == "richText":
        items = content.get("richText")
        for item in items if isinstance(items, list) else ():
            code = _str(item.get("downloadCode")) if isinstance(item, Mapping) else None
            if code and item.get("type", "picture") == "picture":
                found.append(Attachment(kind=AttachmentKind.IMAGE, name="picture", reference=code))
    return tuple(found[:MAX_MEDIA])


def file_hosts(api_base_url: str) -> tuple[str, ...]:
    """Extra hosts a ``downloadUrl`` may be on besides DingTalk's domain: the API host
    when the channel is configured with one that is not DingTalk's."""
    host = (urlsplit(api_base_url).hostname or "").lower()
    return () if not host or _dingtalk(host) else (host,)


def file_source(
    attachment: Attachment, download_url: str, hosts: Iterable[str]
) -> AttachmentSource:
    """The GET of ``download_url`` (no credentials), when it is ``https`` on DingTalk's
    domain (or on one of ``hosts``, where ``http`` is accepted too);
    `AttachmentRefused` otherwise, before anything is fetched."""
    name = sanitize_name(attachment.name)
    parts = urlsplit(download_url)
    host = (parts.hostname or "").lower()
    extra = tuple(h.lower() for h in hosts)
    if not (_dingtalk(host) or host in extra):
        raise AttachmentRefused(
            name=name, reason=f"its download URL is on {host or 'no host'!r}, not DingTalk's"
        )
    if parts.scheme != "https" and not (parts.scheme == "http" and host in extra):
        raise AttachmentRefused(name=name, reason="its download URL is not https")
    return AttachmentSource(download_url)


def _dingtalk(host: str) -> bool:
    return host == DINGTALK_FILE_DOMAIN or host.endswith("." + DINGTALK_FILE_DOMAIN)


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


# -- outbound: the agent's files -----------------------------------------------------------


def file_message(media_id: str, name: str, *, image: bool) -> tuple[str, str]:
    """``(msgKey, msgParam)`` of the robot message showing an uploaded media:
    ``sampleImageMsg`` for an image, else ``sampleFile`` (its type is the name's
    extension, ``file`` without one)."""
    if image:
        return "sampleImageMsg", json.dumps({"photoURL": media_id})
    stem, dot, ext = name.rpartition(".")
    file_type = ext.lower() if dot and stem and ext.isalnum() else "file"
    param = {"mediaId": media_id, "fileName": name, "fileType": file_type}
    return "sampleFile", json.dumps(param, ensure_ascii=False)


def upload(
    client: DingtalkClient,
    robot_code: str,
    route: tuple[bool, str],
    file: OutboundSource,
    *,
    image: bool = False,
    caption: str | None = None,
) -> str:
    """Send ``file`` to a chat: ``route`` is ``(is_group, id)`` (a group's
    ``openConversationId`` or a user's id). The media upload, then the robot's image or
    file message; returns its ``processQueryKey``. `AttachmentTooLarge` past
    `UPLOAD_MAX_BYTES`, before anything is sent; a token the upload refuses (it goes in
    the query, so the client cannot refresh it) is refreshed and the upload tried once
    more (the file read again from its first byte); platform errors propagate as
    `ApiError` subclasses. A caption follows as a Markdown message; its failure is
    logged (the file is in the chat: sending it again would show it twice)."""
    if file.size > UPLOAD_MAX_BYTES:
        raise AttachmentTooLarge(name=file.name, limit=UPLOAD_MAX_BYTES, size=file.size)
    provider = client.token_provider
    if provider is None:
        raise ConfigurationError("the DingTalk client has no token provider", "token_provider")
    content_type = file.content_type()
    as_image = image and content_type in IMAGE_TYPES
    timeout = (3.05, UPLOAD_TIMEOUT_S)
    part = UploadFile(file.name, content_type, file.size, file.open)
    body = MediaUploadRequest(media=part)
    kind = "image" if as_image else "file"
    token = provider.get_token()
    try:
        uploaded = client.upload_media(access_token=token, type=kind, body=body, timeout=timeout)
    except AuthError:
        # the token in the query was refused (expired): a fresh one, once
        provider.invalidate(token)
        uploaded = client.upload_media(
            access_token=provider.get_token(), type=kind, body=body, timeout=timeout
        )
    media_id = uploaded.media_id
    if not isinstance(media_id, str) or not media_id:
        raise ApiError("dingtalk media/upload: no media_id in the answer", status=200)
    msg_key, msg_param = file_message(media_id, file.name, image=as_image)
    message_id = _robot_send(client, robot_code, route, msg_key, msg_param, timeout)
    if caption:
        text = caption[:CAPTION_MAX]
        markdown = json.dumps({"title": CAPTION_TITLE, "text": text}, ensure_ascii=False)
        try:
            _robot_send(client, robot_code, route, "sampleMarkdown", markdown, timeout)
        except ChannelKitError as exc:
            logger.warning("dingtalk: the caption of a sent file failed: %s", type(exc).__name__)
    return message_id


def _robot_send(
    client: DingtalkClient,
    robot_code: str,
    route: tuple[bool, str],
    msg_key: str,
    msg_param: str,
    timeout: tuple[float, float],
) -> str:
    is_group, key = route
    response: Any
    if is_group:
        group = OrgGroupSendRequest(
            robot_code=robot_code, open_conversation_id=key, msg_key=msg_key, msg_param=msg_param
        )
        response = client.send_robot_group_message(body=group, timeout=timeout)
    else:
        direct = BatchSendOtoRequest(
            robot_code=robot_code, user_ids=[key], msg_key=msg_key, msg_param=msg_param
        )
        response = client.batch_send_robot_oto_messages(body=direct, timeout=timeout)
    query_key = getattr(response, "process_query_key", None)
    if not isinstance(query_key, str) or not query_key:
        raise ApiError(f"dingtalk {msg_key}: no processQueryKey in the answer", status=200)
    return query_key

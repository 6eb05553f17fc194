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

from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

from channelkit.attachments.model import Attachment, AttachmentKind
from channelkit.attachments.names import sanitize_name
from channelkit.core.inbound_files import AttachmentSource
from channelkit.errors import AttachmentRefused

__all__ = ["DINGTALK_FILE_DOMAIN", "file_hosts", "file_source", "parse_media"]

#: Files are served from this domain and its subdomains.
DINGTALK_FILE_DOMAIN = "dingtalk.com"
#: Media read from one message.
MAX_MEDIA = 20

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

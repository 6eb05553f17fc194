"""Weixin (iLink) images, voice messages, files and videos, both ways (issue 25).

iLink keeps media on the Weixin CDN (`DEFAULT_CDN_BASE_URL`), encrypted with
AES-128-ECB (PKCS#7 padding) under a key of each file's own. The protocol is
unofficial: the field names here are those public iLink clients use; what is assumed
beyond them is said so below.

Inbound: a message's ``item_list`` carries media items of type 2 (``image_item``),
3 (``voice_item``, its ``playtime`` in milliseconds: assumed), 4 (``file_item``,
``file_name`` and ``len``) and 5 (``video_item``), each with ``media``
``{encrypt_query_param, aes_key}`` (``aes_key`` is base64 of the key's 32 hex digits, or
of its 16 bytes; an image's ``image_item.aeskey``, hex, wins when present).
`parse_media()` turns them into `Attachment`s whose reference is `media_reference()`
of the key and the query parameter; `media_source()` answers the download,
``GET <cdn>/download?encrypted_query_param=<param>`` on the configured CDN host only
(a ``full_url`` in the message is never used, no redirect is followed), with a
`EcbDecryptor` as the download's transform: the bytes are decrypted while they stream,
so size, sha256 and the sniffed type are those of the file.

Outbound: `upload()` is `WeixinChannel.upload_file`: ``getuploadurl`` with a random
``filekey`` and AES key, the file's size and MD5 and the encrypted size; the file,
encrypted while it is read (`EncryptingReader`), is POSTed as
``application/octet-stream`` to ``<cdn>/upload?encrypted_query_param=<upload_param>&
filekey=<filekey>`` (or to ``upload_full_url``, only on the CDN host); the answer's
``x-encrypted-param`` header names the media in the ``sendmessage`` that follows: an
``image_item`` for an image asked for with ``send_image`` (JPEG, PNG, GIF, WebP, BMP),
else a ``file_item`` with the name and size. A caption follows as a text message.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import logging
import os
import re
import secrets
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

from channelkit.attachments.model import Attachment, AttachmentKind
from channelkit.attachments.names import sanitize_name
from channelkit.clients.weixin import (
    CdnMedia,
    FileItem,
    ImageItem,
    MessageItem,
)
from channelkit.core.inbound_files import AttachmentSource
from channelkit.errors import (
    ApiError,
    AttachmentRefused,
    AttachmentTooLarge,
    BadRequest,
    RateLimited,
    ServerError,
    TransportError,
)
from channelkit.platforms.feishu.crypto import aes_ecb
from channelkit.platforms.weixin.config import DEFAULT_CDN_BASE_URL

if TYPE_CHECKING:
    from channelkit.attachments.outbound import OutboundSource
    from channelkit.platforms.weixin.api import WeixinApi

__all__ = [
    "DEFAULT_CDN_BASE_URL",
    "IMAGE_TYPES",
    "MAX_BYTES",
    "EcbDecryptor",
    "EncryptingReader",
    "ecb_decrypt",
    "ecb_encrypt",
    "encrypted_size",
    "media_reference",
    "media_source",
    "parse_aes_key",
    "parse_media",
    "upload",
]

logger = logging.getLogger(__name__)

#: The largest file uploaded (iLink publishes no limit; public clients stop at 50 MB).
MAX_BYTES = 50 * 1024 * 1024
#: What goes out as an image message when asked for with ``send_image``.
IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp", "image/bmp"})
#: Media items read from one message.
MAX_MEDIA = 20
#: The overall deadline of one CDN upload (the body may be megabytes).
UPLOAD_TIMEOUT_S = 120.0

_IMAGE, _VOICE, _FILE, _VIDEO = 2, 3, 4, 5
#: item type -> (its field, the attachment kind, the name when it has none)
_MEDIA = {
    _IMAGE: ("image_item", AttachmentKind.IMAGE, "image"),
    _VOICE: ("voice_item", AttachmentKind.AUDIO, "voice"),
    _FILE: ("file_item", AttachmentKind.FILE, "file"),
    _VIDEO: ("video_item", AttachmentKind.VIDEO, "video.mp4"),
}
#: ``getuploadurl`` ``media_type`` values
_UPLOAD_IMAGE, _UPLOAD_FILE = 1, 3
_HEX_KEY = re.compile(r"[0-9a-fA-F]{32}")
_BLOCK = 16


# --- AES-128-ECB with PKCS#7 ---------------------------------------------------------


def encrypted_size(size: int) -> int:
    """The size of ``size`` bytes once PKCS#7-padded to whole 16-byte blocks."""
    return (size // _BLOCK + 1) * _BLOCK


def ecb_encrypt(key: bytes, data: bytes) -> bytes:
    """AES-128-ECB of ``data`` with PKCS#7 padding (the CDN's format)."""
    pad = _BLOCK - len(data) % _BLOCK
    return aes_ecb(key, data + bytes([pad]) * pad, decrypt=False)


def ecb_decrypt(key: bytes, data: bytes) -> bytes:
    """The plaintext of `ecb_encrypt()`; ``ValueError`` for a bad length or padding."""
    decryptor = EcbDecryptor(key)
    return decryptor.update(data) + decryptor.finish()


def _unpad(block: bytes) -> bytes:
    pad = block[-1] if block else 0
    if not 1 <= pad <= _BLOCK or block[-pad:] != bytes([pad]) * pad:
        raise ValueError("bad PKCS#7 padding (not this file's key?)")
    return block[:-pad]


class EcbDecryptor:
    """Decrypts an AES-128-ECB (PKCS#7) stream chunk by chunk: a `ChunkTransform`.

    The last whole block is held back until `finish()`, which strips the padding."""

    #: the body is at most one block longer than the file (the padding)
    overhead = _BLOCK

    def __init__(self, key: bytes) -> None:
        if len(key) != 16:
            raise ValueError("aes_key: AES-128 needs a 16-byte key")
        self._key = key
        self._rest = b""

    def update(self, chunk: bytes) -> bytes:
        """The plaintext of the whole blocks received so far (the last one kept)."""
        data = self._rest + chunk
        ready = len(data) - len(data) % _BLOCK
        if ready == len(data):
            ready -= _BLOCK
        if ready <= 0:
            self._rest = data
            return b""
        self._rest = data[ready:]
        return aes_ecb(self._key, data[:ready], decrypt=True)

    def finish(self) -> bytes:
        """The last block's plaintext, its padding stripped; ``ValueError`` when the
        body was not whole blocks or the padding is wrong."""
        if len(self._rest) != _BLOCK:
            raise ValueError("the encrypted body is not a whole number of 16-byte blocks")
        return _unpad(aes_ecb(self._key, self._rest, decrypt=True))


class EncryptingReader:
    """A file-like body: the file, AES-128-ECB encrypted (PKCS#7) while it is read.

    ``len()`` is the encrypted size, so the upload is streamed with a Content-Length;
    ``open`` gives the plaintext stream (read once, from its first byte)."""

    def __init__(self, key: bytes, size: int, open_file: Callable[[], Any]) -> None:
        self._key = key
        self._size = size
        self._length = encrypted_size(size)
        self._stream = open_file()
        self._out = b""
        self._pending = b""
        self._read = 0
        self._done = False

    def __len__(self) -> int:
        return self._length

    def read(self, amount: int = -1) -> bytes:
        """Up to ``amount`` encrypted bytes (all that is left for ``amount < 0``);
        ``ValueError`` when the file changed size while it was read."""
        want = self._length if amount is None or amount < 0 else amount
        while len(self._out) < want and not self._done:
            chunk = self._stream.read(64 * 1024)
            self._read += len(chunk)
            if self._read > self._size:
                raise ValueError("the file grew while it was uploaded")
            data = self._pending + chunk
            if not chunk:
                if self._read != self._size:
                    raise ValueError("the file shrank while it was uploaded")
                self._out += ecb_encrypt(self._key, data)  # the last block, padded
                self._done = True
            else:
                whole = len(data) - len(data) % _BLOCK
                self._out += aes_ecb(self._key, data[:whole], decrypt=False)
                self._pending = data[whole:]
        out, self._out = self._out[:want], self._out[want:]
        return out

    def close(self) -> None:
        """Close the plaintext stream."""
        self._stream.close()


# --- inbound -------------------------------------------------------------------------


def parse_aes_key(value: object) -> bytes | None:
    """The 16-byte key of an ``aes_key`` (base64 of 32 hex digits or of 16 bytes) or an
    ``aeskey`` (32 hex digits); None when it is neither."""
    if not isinstance(value, str) or not value:
        return None
    if _HEX_KEY.fullmatch(value):
        return bytes.fromhex(value)
    try:
        decoded = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return None
    if len(decoded) == 16:
        return decoded
    text = decoded.decode("ascii", "replace")
    return bytes.fromhex(text) if _HEX_KEY.fullmatch(text) else None


def media_reference(key: bytes | None, encrypt_query_param: str) -> str:
    """The opaque `Attachment.reference` of one CDN media: ``<key hex>:<param>`` (an
    empty key part when the message carried none)."""
    return f"{key.hex() if key else ''}:{encrypt_query_param}"


def parse_media(items: Sequence[Any]) -> tuple[Attachment, ...]:
    """The media items of a message's ``item_list``, in order (at most `MAX_MEDIA`)."""
    found: list[Attachment] = []
    for item in items:
        if not isinstance(item, Mapping) or item.get("type") not in _MEDIA:
            continue
        field, kind, default = _MEDIA[item["type"]]
        body = item.get(field)
        body = body if isinstance(body, Mapping) else {}
        media = body.get("media")
        media = media if isinstance(media, Mapping) else {}
        param = media.get("encrypt_query_param")
        key = parse_aes_key(body.get("aeskey")) or parse_aes_key(media.get("aes_key"))
        name = body.get("file_name") if kind is AttachmentKind.FILE else None
        size = body.get("len")
        playtime = body.get("playtime")
        found.append(
            Attachment(
                kind=kind,
                name=name if isinstance(name, str) and name else default,
                reference=media_reference(key, param if isinstance(param, str) else ""),
                size=int(size) if isinstance(size, str) and size.isdigit() else None,
                duration=playtime / 1000.0
                if isinstance(playtime, int) and not isinstance(playtime, bool) and playtime >= 0
                else None,
            )
        )
    return tuple(found[:MAX_MEDIA])


def media_source(attachment: Attachment, cdn_base_url: str) -> AttachmentSource:
    """How to download ``attachment``: the CDN download of its query parameter on
    ``cdn_base_url``, decrypted with its key while it streams; `AttachmentRefused`
    for a reference without a key or a parameter."""
    key_hex, _, param = attachment.reference.partition(":")
    name = sanitize_name(attachment.name)
    if not param:
        raise AttachmentRefused(name=name, reason="the message carries no CDN reference")
    if not _HEX_KEY.fullmatch(key_hex):
        raise AttachmentRefused(name=name, reason="the message carries no AES key for it")
    key = bytes.fromhex(key_hex)
    url = f"{cdn_base_url.rstrip('/')}/download?encrypted_query_param={quote(param, safe='')}"
    return AttachmentSource(url, transform=lambda: EcbDecryptor(key))


# --- outbound ------------------------------------------------------------------------


def _raise_for(status: int, headers: Mapping[str, str], text: str) -> None:
    if status < 300:
        return
    said = headers.get("x-error-message") or text[:200]
    message = f"CDN upload answered HTTP {status}: {said}"
    if status == 429:
        raise RateLimited(message, status=status)
    if status >= 500:
        raise ServerError(message, status=status, retryable=True)
    raise BadRequest(message, status=status)


def _md5(file: OutboundSource) -> str:
    digest = hashlib.md5(usedforsecurity=False)
    for chunk in file.chunks():
        digest.update(chunk)
    return digest.hexdigest()


def _upload_url(
    answer_full: object, answer_param: object, cdn: str, filekey: str, name: str
) -> str:
    if isinstance(answer_full, str) and answer_full.strip():
        url = answer_full.strip()
        parts, base = urlsplit(url), urlsplit(cdn)
        if (parts.scheme, parts.netloc) != (base.scheme, base.netloc):
            raise AttachmentRefused(
                name=name, reason="iLink answered an upload URL outside its CDN (refused)"
            )
        return url
    if isinstance(answer_param, str) and answer_param:
        return (
            f"{cdn.rstrip('/')}/upload?encrypted_query_param={quote(answer_param, safe='')}"
            f"&filekey={quote(filekey, safe='')}"
        )
    raise ApiError("weixin getuploadurl: no upload_param or upload_full_url", status=200)


def upload(
    api: WeixinApi,
    file: OutboundSource,
    *,
    to_user_id: str,
    context_token: str | None,
    cdn_base_url: str = DEFAULT_CDN_BASE_URL,
    image: bool = False,
    caption: str | None = None,
) -> str:
    """Upload ``file`` to the CDN and send it to ``to_user_id``; the message's
    ``client_id`` (iLink answers no message id). One attempt; every call reads the file
    again from its first byte."""
    import requests

    if file.size == 0:
        raise AttachmentRefused(name=file.name, reason="is empty (Weixin takes no empty file)")
    if file.size > MAX_BYTES:
        raise AttachmentTooLarge(name=file.name, limit=MAX_BYTES, size=file.size)
    as_image = image and file.content_type() in IMAGE_TYPES
    key = os.urandom(16)
    filekey = secrets.token_hex(16)
    answer = api.get_upload_url(
        filekey=filekey,
        media_type=_UPLOAD_IMAGE if as_image else _UPLOAD_FILE,
        to_user_id=to_user_id,
        rawsize=file.size,
        rawfilemd5=_md5(file),
        filesize=encrypted_size(file.size),
        aeskey=key.hex(),
    )
    url = _upload_url(answer.upload_full_url, answer.upload_param, cdn_base_url, filekey, file.name)
    body = EncryptingReader(key, file.size, file.open)
    try:
        with requests.Session() as session:
            response = session.post(
                url,
                data=body,
                headers={"Content-Type": "application/octet-stream"},
                timeout=(5.0, UPLOAD_TIMEOUT_S),
                allow_redirects=False,
            )
    except requests.Timeout as exc:
        raise TransportError(f"CDN upload timed out: {exc}", timeout=True) from exc
    except requests.RequestException as exc:
        raise TransportError(f"CDN upload failed: {type(exc).__name__}") from exc
    finally:
        body.close()
    headers = {k.lower(): v for k, v in response.headers.items()}
    _raise_for(response.status_code, headers, response.text)
    param = headers.get("x-encrypted-param")
    if not param:
        raise ApiError(
            "CDN upload: no x-encrypted-param in the answer", status=response.status_code
        )
    media = CdnMedia(
        encrypt_query_param=param,
        aes_key=base64.b64encode(key.hex().encode("ascii")).decode("ascii"),
        encrypt_type=1,
    )
    if as_image:
        item = MessageItem(
            type=_IMAGE, image_item=ImageItem(media=media, mid_size=encrypted_size(file.size))
        )
    else:
        item = MessageItem(
            type=_FILE,
            file_item=FileItem(media=media, file_name=file.name, len=str(file.size)),
        )
    client_id = api.send_items(to_user_id, [item], context_token)
    if caption:
        try:
            api.send_text(to_user_id, caption, context_token)
        except Exception as exc:
            logger.warning("the caption of %r was not sent: %s", file.name, exc)
    return client_id

"""Telegram files: the agent's files out, with ``sendPhoto`` / ``sendVoice`` / ``sendDocument``.

(A person's photos and documents come in through the ingress, and
`TelegramChannel.attachment_source` fetches them with ``getFile``.)

`upload()` is `TelegramChannel.upload_file`: one attempt, the file streamed as the
``photo`` or ``document`` part of a ``multipart/form-data`` request (reopened by every
attempt), the caption and the forum topic as form fields. An image is a photo only when
Telegram shows it as one (JPEG, PNG, WebP or GIF of at most `PHOTO_MAX_BYTES`); an Ogg
audio file (what a voice note is: Opus in Ogg) is a voice message; anything else, and
any other file, is a document (at most `DOCUMENT_MAX_BYTES`, Telegram's bot
upload limit; a larger one is refused before a byte is sent). Captions are cut to
Telegram's 1,024 characters.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from channelkit.clients.telegram import SendDocumentRequest, SendPhotoRequest, SendVoiceRequest
from channelkit.errors import ApiError, AttachmentTooLarge
from channelkit.http.model import UNSET
from channelkit.http.multipart import UploadFile

if TYPE_CHECKING:
    from channelkit.attachments.outbound import OutboundSource
    from channelkit.core.types import SessionTarget
    from channelkit.platforms.telegram.api import TelegramApi

__all__ = [
    "CAPTION_MAX",
    "DOCUMENT_MAX_BYTES",
    "PHOTO_MAX_BYTES",
    "PHOTO_TYPES",
    "UPLOAD_TIMEOUT_S",
    "VOICE_TYPES",
    "upload",
]

#: Telegram's limits for a bot's uploads: a photo, any other file.
PHOTO_MAX_BYTES = 10 * 1000 * 1000
DOCUMENT_MAX_BYTES = 50 * 1000 * 1000
#: What ``sendPhoto`` shows as a photo (anything else goes as a document).
PHOTO_TYPES = frozenset({"image/jpeg", "image/png", "image/webp", "image/gif"})
#: What ``sendVoice`` plays as a voice message (an Ogg file; other audio is a document).
VOICE_TYPES = frozenset({"audio/ogg"})
#: The longest caption Telegram takes.
CAPTION_MAX = 1024
#: The overall deadline of one upload (the body may be megabytes).
UPLOAD_TIMEOUT_S = 120.0


def _chat(chat_id: str) -> int | str:
    try:
        return int(chat_id)
    except ValueError:
        return chat_id  # @channelusername


def _thread(thread_id: str | None) -> int | None:
    try:
        return int(thread_id) if thread_id else None
    except ValueError:
        return None


def upload(
    api: TelegramApi,
    target: SessionTarget,
    file: OutboundSource,
    *,
    image: bool = False,
    caption: str | None = None,
) -> str:
    """Send ``file`` to ``target``'s chat (and topic); the new message's id."""
    content_type = file.content_type()
    if file.size > DOCUMENT_MAX_BYTES:
        raise AttachmentTooLarge(name=file.name, limit=DOCUMENT_MAX_BYTES, size=file.size)
    part = UploadFile(file.name, content_type, file.size, file.open)
    chat, thread = _chat(target.chat_id), _thread(target.thread_id)
    text = caption[:CAPTION_MAX] if caption else None
    timeout = (3.05, UPLOAD_TIMEOUT_S)
    client = api.client
    if image and content_type in PHOTO_TYPES and file.size <= PHOTO_MAX_BYTES:
        photo = SendPhotoRequest(chat_id=chat, photo=part)
        if text:
            photo.caption = text
        if thread is not None:
            photo.message_thread_id = thread
        response = client.send_photo(body=photo, timeout=timeout)
    elif content_type in VOICE_TYPES:
        voice = SendVoiceRequest(chat_id=chat, voice=part)
        if text:
            voice.caption = text
        if thread is not None:
            voice.message_thread_id = thread
        response = client.send_voice(body=voice, timeout=timeout)
    else:
        document = SendDocumentRequest(chat_id=chat, document=part)
        if text:
            document.caption = text
        if thread is not None:
            document.message_thread_id = thread
        response = client.send_document(body=document, timeout=timeout)
    message_id = None if response.result is UNSET else response.result.message_id
    if isinstance(message_id, bool) or not isinstance(message_id, int):
        raise ApiError("telegram upload: no message_id in the result", status=200)
    return str(message_id)

"""Telegram ingress: secret verification, ``Update`` parsing and one receive path.

Telegram POSTs one JSON ``Update`` per request to the webhook URL. When the webhook was
registered with ``secret_token``, every request carries it in the
``X-Telegram-Bot-Api-Secret-Token`` header; `verify_secret_token()` compares it in
constant time. `parse_update()` turns the JSON into the small typed records below
(only the fields the adapter needs; ids are kept as Python ints, which are unbounded, so
64-bit chat ids are safe). Parsing never trusts field types: a wrong type raises
`UpdateParseError` naming the field path.

`receive_update()` is the transport-neutral half both ingresses share: parse one
decoded ``Update`` and dispatch it synchronously (the dispatcher only mutates in-memory
state: dedup by ``update_id``, authorization, claims; it returns the hand-offs of network
work to the pool), answering what a webhook would: 400 for an update that does not
parse, 503 when the channel is closed, else 200 with the hand-offs in
``IngressResponse.after``. `TelegramWebhook` (the ``/telegram/webhook`` route)
verifies the secret and decodes the body, then calls it and starts the hand-offs once
the ACK was written; the long-polling runner
(`channelkit.platforms.telegram.polling`) calls it for each update of a
``getUpdates`` batch and starts the hand-offs at once. Neither raises.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from channelkit.attachments.model import Attachment, AttachmentKind
from channelkit.errors import UpdateParseError
from channelkit.ingress import Headers, IngressRequest, IngressResponse, loads_json
from channelkit.platforms.common.contract import Interaction
from channelkit.platforms.telegram.renderer import COMMAND_PREFIX

__all__ = [
    "SECRET_HEADER",
    "TelegramWebhook",
    "TgCallbackQuery",
    "TgChat",
    "TgMessage",
    "TgUpdate",
    "TgUser",
    "UpdateParseError",
    "parse_update",
    "presentation_tap",
    "receive_update",
    "tap_interaction",
    "verify_secret_token",
]

logger = logging.getLogger(__name__)

#: Header Telegram sets on webhook requests when ``setWebhook(secret_token=...)`` was used.
SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"


@dataclass(frozen=True)
class TgUser:
    """The sender of a message or the user who tapped a button."""

    id: int
    is_bot: bool = False
    first_name: str = ""
    username: str | None = None
    #: the IETF language tag of the user's client (``"de"``, ``"zh-hans"``), if told
    language_code: str | None = None


@dataclass(frozen=True)
class TgChat:
    """A chat: ``type`` is private, group, supergroup or channel."""

    id: int
    type: str
    title: str | None = None
    is_forum: bool = False


@dataclass(frozen=True)
class TgMessage:
    """The message fields the adapter reads."""

    message_id: int
    chat: TgChat
    date: int = 0
    from_user: TgUser | None = None
    text: str | None = None
    message_thread_id: int | None = None
    is_topic_message: bool = False
    #: the author of the message this one replies to (``None`` for the implicit reply
    #: to a forum topic's creation message)
    reply_to_from_id: int | None = None
    #: the photo (its largest size), document, voice, audio or video it carries; its
    #: ``caption`` is then the message's ``text``
    attachments: tuple[Attachment, ...] = ()


@dataclass(frozen=True)
class TgCallbackQuery:
    """A tap on an inline-keyboard button."""

    id: str
    from_user: TgUser
    data: str | None = None
    message: TgMessage | None = None
    inline_message_id: str | None = None


@dataclass(frozen=True)
class TgUpdate:
    """One webhook ``Update``; at most one of the payload fields is set."""

    update_id: int
    message: TgMessage | None = None
    callback_query: TgCallbackQuery | None = None
    raw: Mapping[str, Any] | None = None


def verify_secret_token(headers: Mapping[str, str], expected: str | None) -> bool:
    """True when the request carries the expected secret (constant-time comparison).

    With ``expected=None`` (no secret configured) every request passes.
    """
    if expected is None:
        return True
    supplied = headers.get(SECRET_HEADER)
    if supplied is None:
        return False
    return hmac.compare_digest(supplied.encode("utf-8"), expected.encode("utf-8"))


def _int(obj: Mapping[str, Any], key: str, path: str, *, required: bool = True) -> int | None:
    value = obj.get(key)
    if value is None:
        if required:
            raise UpdateParseError(f"{path}.{key}", "is required")
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise UpdateParseError(f"{path}.{key}", "must be an integer")
    return value


def _str(obj: Mapping[str, Any], key: str, path: str, *, required: bool = False) -> str | None:
    value = obj.get(key)
    if value is None:
        if required:
            raise UpdateParseError(f"{path}.{key}", "is required")
        return None
    if not isinstance(value, str):
        raise UpdateParseError(f"{path}.{key}", "must be a string")
    return value


def _text(obj: Mapping[str, Any], path: str) -> str | None:
    """``text``, or None when it is missing or blank (nothing to answer)."""
    text = _str(obj, "text", path)
    return text if text is not None and text.strip() else None


def _obj(value: Any, path: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise UpdateParseError(path, "must be an object")
    return value


def _user(value: Any, path: str) -> TgUser:
    obj = _obj(value, path)
    user_id = _int(obj, "id", path)
    assert user_id is not None
    return TgUser(
        id=user_id,
        is_bot=obj.get("is_bot") is True,
        first_name=_str(obj, "first_name", path) or "",
        username=_str(obj, "username", path),
        language_code=_str(obj, "language_code", path),
    )


def _chat(value: Any, path: str) -> TgChat:
    obj = _obj(value, path)
    chat_id = _int(obj, "id", path)
    assert chat_id is not None
    return TgChat(
        id=chat_id,
        type=_str(obj, "type", path, required=True) or "",
        title=_str(obj, "title", path),
        is_forum=obj.get("is_forum") is True,
    )


def _message(value: Any, path: str) -> TgMessage:
    obj = _obj(value, path)
    message_id = _int(obj, "message_id", path)
    assert message_id is not None
    sender = obj.get("from")
    return TgMessage(
        message_id=message_id,
        chat=_chat(obj.get("chat"), f"{path}.chat"),
        date=_int(obj, "date", path, required=False) or 0,
        from_user=_user(sender, f"{path}.from") if sender is not None else None,
        text=_text(obj, path) or _caption(obj, path),
        message_thread_id=_int(obj, "message_thread_id", path, required=False),
        is_topic_message=obj.get("is_topic_message") is True,
        reply_to_from_id=_reply_author(obj.get("reply_to_message"), f"{path}.reply_to_message"),
        attachments=_attachments(obj, path),
    )


def _caption(obj: Mapping[str, Any], path: str) -> str | None:
    caption = _str(obj, "caption", path)
    return caption if caption is not None and caption.strip() else None


#: the media fields of a message, the kind each is, and the name used when it has none
_MEDIA = (
    ("document", AttachmentKind.FILE, "document"),
    ("voice", AttachmentKind.AUDIO, "voice.ogg"),
    ("audio", AttachmentKind.AUDIO, "audio"),
    ("video", AttachmentKind.VIDEO, "video.mp4"),
    ("video_note", AttachmentKind.VIDEO, "video_note.mp4"),
)


def _attachments(obj: Mapping[str, Any], path: str) -> tuple[Attachment, ...]:
    """The message's media as `Attachment`s (reference: the ``file_id``)."""
    found: list[Attachment] = []
    photo = obj.get("photo")
    if photo is not None:
        if not isinstance(photo, list) or not photo:
            raise UpdateParseError(f"{path}.photo", "must be a non-empty array of sizes")
        sizes = [_obj(size, f"{path}.photo[{i}]") for i, size in enumerate(photo)]
        # the largest size: by bytes when told, else by pixels (Telegram lists it last)
        largest = max(
            enumerate(sizes),
            key=lambda item: (
                item[1].get("file_size") or 0,
                (item[1].get("width") or 0) * (item[1].get("height") or 0),
                item[0],
            ),
        )
        index, size = largest
        found.append(_media(size, f"{path}.photo[{index}]", AttachmentKind.IMAGE, "photo.jpg"))
    for field, kind, default_name in _MEDIA:
        value = obj.get(field)
        if value is not None:
            found.append(
                _media(_obj(value, f"{path}.{field}"), f"{path}.{field}", kind, default_name)
            )
    return tuple(found)


def _media(obj: Mapping[str, Any], path: str, kind: AttachmentKind, default: str) -> Attachment:
    file_id = _str(obj, "file_id", path, required=True) or ""
    if not file_id:
        raise UpdateParseError(f"{path}.file_id", "must not be empty")
    size = _int(obj, "file_size", path, required=False)
    duration = _int(obj, "duration", path, required=False)
    if (size is not None and size < 0) or (duration is not None and duration < 0):
        raise UpdateParseError(path, "file_size and duration must be >= 0")
    return Attachment(
        kind=kind,
        name=_str(obj, "file_name", path) or default,
        reference=file_id,
        content_type=_str(obj, "mime_type", path),
        size=size,
        duration=float(duration) if duration is not None else None,
    )


def _reply_author(value: Any, path: str) -> int | None:
    if value is None:
        return None
    obj = _obj(value, path)
    if "forum_topic_created" in obj:
        return None  # every message in a forum topic "replies" to the topic's creation
    sender = obj.get("from")
    return _user(sender, f"{path}.from").id if sender is not None else None


def _callback_query(value: Any, path: str) -> TgCallbackQuery:
    obj = _obj(value, path)
    message = obj.get("message")
    return TgCallbackQuery(
        id=_str(obj, "id", path, required=True) or "",
        from_user=_user(obj.get("from"), f"{path}.from"),
        data=_str(obj, "data", path),
        message=_message(message, f"{path}.message") if message is not None else None,
        inline_message_id=_str(obj, "inline_message_id", path),
    )


def presentation_tap(query: TgCallbackQuery) -> TgMessage | None:
    """The message a tap on a presentation button stands for: the button's value (a
    command button's ``tgcmd:<command>`` decodes to ``<command>``) typed by the person
    who tapped, in the tapped message's chat and topic. None when the tap carries no
    text or no message (a button of an inline message), or the tapper is a bot.

    The caller tells question keyboards (``ck:``) apart first: anything else that a bot
    message's inline keyboard carries is a presentation button."""
    data = query.data
    message = query.message
    if data is None or message is None or query.from_user.is_bot:
        return None
    text = data[len(COMMAND_PREFIX) :] if data.startswith(COMMAND_PREFIX) else data
    if not text.strip():
        return None
    return TgMessage(
        message_id=message.message_id,
        chat=message.chat,
        date=message.date,
        from_user=query.from_user,
        text=text,
        message_thread_id=message.message_thread_id,
        is_topic_message=message.is_topic_message,
    )


def parse_update(data: Any) -> TgUpdate:
    """Parse a decoded webhook body into a `TgUpdate`.

    Only ``message`` and ``callback_query`` are modelled; other update kinds parse to a
    `TgUpdate` with both fields ``None`` (kept in ``raw``).
    """
    obj = _obj(data, "update")
    update_id = _int(obj, "update_id", "update")
    assert update_id is not None
    message = obj.get("message")
    callback = obj.get("callback_query")
    return TgUpdate(
        update_id=update_id,
        message=_message(message, "update.message") if message is not None else None,
        callback_query=(
            _callback_query(callback, "update.callback_query") if callback is not None else None
        ),
        raw=obj,
    )


Dispatch = Callable[[TgUpdate], IngressResponse | Iterable[Callable[[], None]] | None]
"""A dispatcher: the update's hand-offs, or the whole answer (e.g. 503 when closed)."""


def receive_update(data: Any, dispatch: Dispatch, *, transport: str = "webhook") -> IngressResponse:
    """Parse one decoded ``Update`` and dispatch it; the answer a webhook would give.

    400 when ``data`` is not an ``Update`` (logged); ``dispatch``'s own
    `IngressResponse` when it returns one (e.g. 503 from a closed channel); else
    200 with the hand-offs in ``after`` (also when ``dispatch`` raised: the error is
    logged, and a redelivery would not help).
    """
    try:
        update = parse_update(data)
    except UpdateParseError as exc:
        logger.warning("telegram %s update rejected: %s", transport, exc)
        return IngressResponse.json(400, {"ok": False, "error": str(exc)})
    after: IngressResponse | Iterable[Callable[[], None]] | None = None
    try:
        after = dispatch(update)
    except Exception:
        logger.exception("telegram update %s dispatch failed", update.update_id)
    if isinstance(after, IngressResponse):
        return after
    return IngressResponse.json(200, {}, after=after or ())


class TelegramWebhook:
    """The ``/telegram/webhook`` handler: verify, parse, dispatch, ACK.

    ``dispatch`` receives the parsed update on the web thread and must return quickly:
    it returns the quick callables that hand its network work to the pool (or None),
    which become the response's ``after``, or the whole `IngressResponse` (the
    channel's answer, e.g. 503 when it is closed). Answers: 401 on a missing or wrong secret
    token, 400 on a body that is not a JSON ``Update``, 200 otherwise (also when
    ``dispatch`` raised: the error is logged, and a retry by Telegram would not help).
    """

    def __init__(
        self,
        secret: str | None,
        dispatch: Dispatch,
    ) -> None:
        self._secret = secret
        self._dispatch = dispatch

    def __call__(self, request: IngressRequest) -> IngressResponse:
        headers = (
            request.headers if isinstance(request.headers, Headers) else Headers(request.headers)
        )
        if not verify_secret_token(headers, self._secret):
            logger.warning("telegram webhook rejected: missing or wrong secret token")
            return IngressResponse.json(401, {"ok": False, "error": "unauthorized"})
        try:
            data = loads_json(request.body)
        except ValueError as exc:
            logger.warning("telegram webhook rejected: body is not JSON (%s)", type(exc).__name__)
            return IngressResponse.json(400, {"ok": False, "error": "invalid JSON"})
        return receive_update(data, self._dispatch)


def tap_interaction(query: TgCallbackQuery) -> Interaction:
    """The platform contract's `Interaction` of an inline-keyboard tap: a `button`
    whose token is the button's ``callback_data``; `raw` is the `TgCallbackQuery`."""
    message = query.message
    topic = message.message_thread_id if message is not None and message.is_topic_message else None
    return Interaction(
        kind="button",
        platform="telegram",
        actor_id=str(query.from_user.id),
        chat_id=str(message.chat.id) if message is not None else None,
        thread_id=str(topic) if topic is not None else None,
        token=query.data,
        raw=query,
    )

"""A Weixin iLink bot emulator: ``getupdates`` long polling, ``sendmessage``, typing.

Endpoints follow ``openapi/weixin.json`` (every call a JSON ``POST``; answers HTTP 200
with ``ret`` 0 on success, else ``{"ret": N, "errcode": N, "errmsg": "..."}``):

* ``/ilink/bot/getupdates`` ``{get_updates_buf, base_info}``: the long poll. The cursor
  (``get_updates_buf``, empty at first) confirms every message before it; the call
  answers at once when messages wait after the cursor, else it is held until one
  arrives (woken at once) or `WeixinEmulator.hold_seconds` pass (then ``msgs``
  is empty). Every answer carries the next cursor and ``longpolling_timeout_ms``.
  Unconfirmed messages are answered again to a poll that repeats the old cursor.
* ``/ilink/bot/sendmessage`` ``{msg: {to_user_id, from_user_id: "", client_id,
  message_type: 2, message_state: 2, context_token, item_list: [{type: 1, text_item:
  {text}}]}, base_info}``: a plain-text bubble in the chat (``context_token`` must be
  one the person's messages carried).
* ``/ilink/bot/getconfig`` ``{ilink_user_id, context_token?, base_info}``: the user's
  ``typing_ticket`` (the same one until `WeixinEmulator.reset()`).
* ``/ilink/bot/sendtyping`` ``{ilink_user_id, typing_ticket, status, base_info}``:
  status 1 shows "typing" until status 2 cancels it (there is no lapse: the channel
  sends no keep-alive, and the emulator shows exactly the state it was told).

Every call must carry the iLink headers: ``Authorization: Bearer <bot_token>`` with
``AuthorizationType: ilink_bot_token`` (anything else, or a session expired with
`WeixinEmulator.expire_session()`, answers ``ret`` / ``errcode`` -14, "session
timeout", as iLink answers a bot whose login is no longer valid), ``iLink-App-Id:
bot``, ``iLink-App-ClientVersion`` (``base_info.channel_version`` packed as
``0x00MMNNPP``) and ``X-WECHAT-UIN`` (base64 of 4 bytes). A malformed request answers
``ret`` -2 with ``errmsg`` naming the field (the emulator's code: iLink documents none).

Files (the emulated Weixin CDN under `CDN_PATH`, AES-128-ECB with PKCS#7 as on the
real CDN): the person's ``files`` in ``/_emulator/send`` go as one message whose
``item_list`` holds the text and an image (2), voice (3), video (5) or file (4) item per
file, each encrypted with a key of its own (``media.aes_key``: base64 of its hex) and
served by ``GET <cdn>/download?encrypted_query_param=<param>`` (the encrypted bytes;
404 for an unknown parameter). The bot's files: ``/ilink/bot/getuploadurl``
``{filekey, media_type, to_user_id, rawsize, rawfilemd5, filesize, no_need_thumb,
aeskey}`` answers an ``upload_param``; ``POST <cdn>/upload?encrypted_query_param=
<upload_param>&filekey=<filekey>`` takes the encrypted body, checks its size, key,
padding, size and MD5 against the announcement (400 with ``x-error-message`` else) and
answers ``x-encrypted-param``; a ``sendmessage`` ``image_item`` / ``file_item`` naming
it shows the file (views ``"files"``, bytes at ``GET /_emulator/files/<key>``, faults
of the CDN upload by ``POST /_emulator/files/fail``: `channelkit.playground.bot_files`).

The person's messages (``POST /_emulator/send``) wait for ``getupdates`` (at most
`MAX_PENDING_MESSAGES`; past that the oldest unfetched one is dropped with a
warning and its delivery marked ``dropped``); ``GET /_emulator/callbacks`` records each
with ``transport: "polling"`` and whether a poll has ``fetched`` it.
``POST /_emulator/redeliver`` ``{"msgId"}`` queues a message again unchanged (same
``message_id``, as after a lost cursor) and ``POST /_emulator/session/expire`` ends the
bot's session.
"""

from __future__ import annotations

import base64
import binascii
import copy
import hashlib
import logging
import os
import re
import secrets
import time
import uuid
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from channelkit.attachments.sniff import sniff_content_type
from channelkit.platforms.weixin.files import ecb_decrypt, ecb_encrypt, parse_aes_key
from channelkit.playground.bot_files import BotFiles
from channelkit.playground.emulator import (
    MAX_CARDS,
    CallbackDelivery,
    Deliver,
    EmulatedFile,
    EmulatorBase,
    HttpReply,
    Origin,
)
from channelkit.playground.person_files import PersonFiles, media_kind

__all__ = [
    "CDN_PATH",
    "DEFAULT_HOLD_SECONDS",
    "INVALID_REQUEST",
    "MAX_PENDING_MESSAGES",
    "SESSION_EXPIRED",
    "TRANSIENT",
    "WeixinEmulator",
]

logger = logging.getLogger(__name__)

#: How long ``getupdates`` holds a call without messages (announced to the client as
#: ``longpolling_timeout_ms``).
DEFAULT_HOLD_SECONDS = 25.0
#: Longest hold the emulator accepts as a setting.
MAX_HOLD_SECONDS = 60.0
#: Messages kept for ``getupdates`` until a cursor confirms them (oldest dropped).
MAX_PENDING_MESSAGES = 1_000
#: Messages one ``getupdates`` answer carries at most.
MAX_BATCH = 100
#: Context tokens and typing tickets remembered (oldest forgotten).
MAX_TOKENS = 1_000
#: ``ret`` / ``errcode`` of a bot whose session is not valid (bad token, expired login).
SESSION_EXPIRED = -14
#: ``ret`` of a malformed request (the emulator's choice; iLink documents none).
INVALID_REQUEST = -2
#: ``errcode`` of a transient failure (retry with backoff).
TRANSIENT = -1

#: Where the emulated CDN lives on the emulator's host (``WeixinConfig.cdn_base_url``).
CDN_PATH = "/c2c"
#: Upload slots (``getuploadurl``) and uploaded media kept at once (oldest forgotten).
MAX_UPLOADS = 100

TYPING_ON = 1
TYPING_CANCEL = 2
_USER_MESSAGE, _BOT_MESSAGE = 1, 2
_FINISHED = 2
_TEXT_ITEM, _IMAGE_ITEM, _VOICE_ITEM, _FILE_ITEM, _VIDEO_ITEM = 1, 2, 3, 4, 5
_VERSION_RE = re.compile(r"^(\d{1,3})\.(\d{1,3})\.(\d{1,3})$")
_CURSOR_PREFIX = "ck-ilink:"


def _ok(**fields: Any) -> HttpReply:
    return HttpReply(200, {"ret": 0, **fields})


def _invalid(errmsg: str) -> HttpReply:
    return HttpReply(200, {"ret": INVALID_REQUEST, "errcode": INVALID_REQUEST, "errmsg": errmsg})


def _session_timeout() -> HttpReply:
    return HttpReply(
        200, {"ret": SESSION_EXPIRED, "errcode": SESSION_EXPIRED, "errmsg": "session timeout"}
    )


def _cursor(position: int) -> str:
    """The opaque ``get_updates_buf`` for a queue position."""
    return base64.b64encode(f"{_CURSOR_PREFIX}{position}".encode("ascii")).decode("ascii")


def _position(cursor: str) -> int | None:
    """The queue position of a cursor (0 for the empty one); None if not ours."""
    if cursor == "":
        return 0
    try:
        raw = base64.b64decode(cursor.encode("ascii"), validate=True).decode("ascii")
    except (binascii.Error, UnicodeError, ValueError):
        return None
    if not raw.startswith(_CURSOR_PREFIX) or not raw[len(_CURSOR_PREFIX) :].isdigit():
        return None
    return int(raw[len(_CURSOR_PREFIX) :])


def _client_version(channel_version: str) -> int | None:
    match = _VERSION_RE.match(channel_version)
    if match is None:
        return None
    major, minor, patch = (int(part) for part in match.groups())
    if max(major, minor, patch) > 255:
        return None
    return (major << 16) | (minor << 8) | patch


def _uin_ok(value: str) -> bool:
    try:
        return len(base64.b64decode(value.encode("ascii"), validate=True)) == 4
    except (binascii.Error, UnicodeError, ValueError):
        return False


@dataclass(frozen=True)
class _Queued:
    """One message waiting for ``getupdates`` at ``position`` (its delivery's key)."""

    position: int
    message: dict[str, Any]


class WeixinEmulator(EmulatorBase):
    """The emulated iLink bot API for one bot and one person.

    ``bot_token`` is the only token accepted; ``user_id`` / ``user_name`` are the person
    chatting with the bot ``bot_id``; ``hold_seconds`` bounds a ``getupdates`` long poll
    without messages (0 < hold <= 60). ``deliver`` is unused (iLink has no callbacks:
    everything waits for ``getupdates``) and accepted for symmetry with the other
    emulators.
    """

    platform = "weixin"
    accepts_files = True

    def __init__(
        self,
        *,
        bot_token: str = "playground-weixin-bot-token",
        user_id: str = "wxid_playground_user@im.wechat",
        user_name: str = "You",
        bot_id: str = "playground_bot@im.bot",
        hold_seconds: float = DEFAULT_HOLD_SECONDS,
        deliver: Deliver | None = None,
    ) -> None:
        super().__init__(deliver=deliver)
        if (
            isinstance(hold_seconds, bool)
            or not isinstance(hold_seconds, int | float)
            or not 0 < hold_seconds <= MAX_HOLD_SECONDS
        ):
            raise ValueError(f"hold_seconds: must be a number in (0, {MAX_HOLD_SECONDS:g}]")
        for name, value in (("bot_token", bot_token), ("user_id", user_id), ("bot_id", bot_id)):
            if not isinstance(value, str) or not value:
                raise ValueError(f"{name}: must be a non-empty string")
        self.bot_token = bot_token
        self.user_id = user_id
        self.user_name = user_name
        self.bot_id = bot_id
        self.hold_seconds = float(hold_seconds)
        self._position = 0  # queue position of the last message queued
        self._next_message_id = 7_000_000
        self._queue: deque[_Queued] = deque()
        #: the person's messages by id (for redelivery), oldest first
        self._user_messages: OrderedDict[str, dict[str, Any]] = OrderedDict()
        #: context_token -> user it was issued to
        self._context_tokens: OrderedDict[str, str] = OrderedDict()
        #: user -> typing_ticket
        self._tickets: OrderedDict[str, str] = OrderedDict()
        self._typing = False
        self._waiting_polls = 0
        self._expired = False
        self._closed = False
        #: the person's files, encrypted, by download parameter (`send_user_files`)
        self.person_files = PersonFiles()
        #: the bot's files shown in the chat (``sendmessage`` naming an upload)
        self.bot_files = BotFiles()
        #: upload_param -> the announcement of ``getuploadurl``
        self._slots: OrderedDict[str, dict[str, Any]] = OrderedDict()
        #: download parameter -> (AES key, the decrypted file) of a finished CDN upload
        self._uploaded: OrderedDict[str, tuple[bytes, bytes]] = OrderedDict()
        self._endpoints: dict[str, Callable[[Mapping[str, Any]], HttpReply]] = {
            "/ilink/bot/getupdates": self._get_updates,
            "/ilink/bot/sendmessage": self._send_message,
            "/ilink/bot/getconfig": self._get_config,
            "/ilink/bot/sendtyping": self._send_typing,
            "/ilink/bot/getuploadurl": self._get_upload_url,
        }

    # -- API ------------------------------------------------------------------------------
    def handle_api(
        self,
        method: str,
        path: str,
        query: Mapping[str, str],
        headers: Mapping[str, str],
        body: bytes,
    ) -> HttpReply | None:
        if not path.startswith(CDN_PATH + "/"):
            return super().handle_api(method, path, query, headers, body)
        if path == f"{CDN_PATH}/download" and method == "GET":
            reply = self._cdn_download(query)
        elif path == f"{CDN_PATH}/upload" and method == "POST":
            reply = self._cdn_upload(query, headers, body)
        else:
            reply = HttpReply(404, None, content_type="text/plain", raw=b"not found")
        self._record(method, path, query, {"size": len(body)} if body else None, reply)
        return reply

    def _cdn_download(self, query: Mapping[str, str]) -> HttpReply:
        data = self.person_files.serve(query.get("encrypted_query_param", ""))
        if data is None:
            return HttpReply(404, None, content_type="text/plain", raw=b"no such media")
        return HttpReply(200, None, content_type="application/octet-stream", raw=data)

    def _cdn_upload(
        self, query: Mapping[str, str], headers: Mapping[str, str], body: bytes
    ) -> HttpReply:
        def refuse(status: int, why: str) -> HttpReply:
            raw = why.encode("utf-8")
            return HttpReply(
                status,
                None,
                content_type="text/plain",
                raw=raw,
                headers=(("x-error-message", why),),
            )

        with self._lock:
            slot = self._slots.get(query.get("encrypted_query_param", ""))
        if slot is None or slot["filekey"] != query.get("filekey"):
            return refuse(400, "encrypted_query_param: not an upload slot of this filekey")
        if not headers.get("content-type", "").startswith("application/octet-stream"):
            return refuse(400, "Content-Type: must be application/octet-stream")
        if len(body) != slot["filesize"]:
            return refuse(400, f"body: {len(body)} bytes, getuploadurl announced filesize")
        try:
            data = ecb_decrypt(slot["key"], body)
        except ValueError as exc:
            return refuse(400, f"body: not AES-128-ECB under the announced aeskey ({exc})")
        if len(data) != slot["rawsize"] or hashlib.md5(data).hexdigest() != slot["rawfilemd5"]:
            return refuse(400, "body: its plaintext does not match rawsize and rawfilemd5")
        fault = self.bot_files.take_fault()
        if fault is not None:
            return refuse(fault.status, fault.description)
        param = "dl-" + secrets.token_hex(16)
        with self._lock:
            self._uploaded[param] = (slot["key"], data)
            while len(self._uploaded) > MAX_UPLOADS:
                self._uploaded.popitem(last=False)
        return HttpReply(
            200, None, content_type="text/plain", raw=b"", headers=(("x-encrypted-param", param),)
        )

    def _get_upload_url(self, data: Mapping[str, Any]) -> HttpReply:
        problem = self._known_user(data.get("to_user_id"), "to_user_id")
        if problem is not None:
            return problem
        filekey, md5 = data.get("filekey"), data.get("rawfilemd5")
        if not isinstance(filekey, str) or not filekey:
            return _invalid("filekey: must be a non-empty string")
        if data.get("media_type") not in (1, 2, 3):
            return _invalid("media_type: must be 1 (image), 2 (video) or 3 (file)")
        sizes: dict[str, int] = {}
        for field in ("rawsize", "filesize"):
            value = data.get(field)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                return _invalid(f"{field}: must be a byte count")
            sizes[field] = value
        if sizes["filesize"] != (sizes["rawsize"] // 16 + 1) * 16:
            return _invalid("filesize: must be rawsize padded to whole 16-byte blocks (PKCS#7)")
        if not isinstance(md5, str) or not re.fullmatch(r"[0-9a-f]{32}", md5):
            return _invalid("rawfilemd5: must be 32 lowercase hex digits")
        aeskey = data.get("aeskey")
        if not isinstance(aeskey, str) or not re.fullmatch(r"[0-9a-f]{32}", aeskey):
            return _invalid("aeskey: must be the AES-128 key as 32 lowercase hex digits")
        upload_param = "up-" + secrets.token_hex(16)
        with self._lock:
            self._slots[upload_param] = {
                "filekey": filekey,
                "rawsize": sizes["rawsize"],
                "filesize": sizes["filesize"],
                "rawfilemd5": md5,
                "key": bytes.fromhex(aeskey),
            }
            while len(self._slots) > MAX_UPLOADS:
                self._slots.popitem(last=False)
        return _ok(upload_param=upload_param)

    def _bot_media(self, index: int, item: Mapping[str, Any]) -> dict[str, Any] | HttpReply:
        """The view of an ``image_item`` / ``file_item`` naming an upload of this CDN."""
        field = "image_item" if item.get("type") == _IMAGE_ITEM else "file_item"
        body = item.get(field)
        media = body.get("media") if isinstance(body, Mapping) else None
        if not isinstance(body, Mapping) or not isinstance(media, Mapping):
            return _invalid(f"msg.item_list[{index}].{field}.media: must be an object")
        with self._lock:
            found = self._uploaded.get(str(media.get("encrypt_query_param")))
        if found is None:
            return _invalid(
                f"msg.item_list[{index}].{field}.media.encrypt_query_param: not an upload"
            )
        key, data = found
        if parse_aes_key(media.get("aes_key")) != key:
            return _invalid(f"msg.item_list[{index}].{field}.media.aes_key: not the upload's key")
        name = ""
        if field == "file_item":
            given = body.get("file_name")
            if not isinstance(given, str) or not given:
                return _invalid(f"msg.item_list[{index}].file_item.file_name: must be non-empty")
            if body.get("len") != str(len(data)):
                return _invalid(f"msg.item_list[{index}].file_item.len: must be the file's size")
            name = given
        stored = self.bot_files.keep(EmulatedFile(name, sniff_content_type(data[:64]), data))
        return self.bot_files.view(stored)

    def handle_json_api(
        self,
        method: str,
        path: str,
        query: Mapping[str, str],
        headers: Mapping[str, str],
        data: Any,
    ) -> HttpReply | None:
        if not path.startswith("/ilink/"):
            return None
        handler = self._endpoints.get(path)
        if handler is None:
            return HttpReply(404, {"ret": INVALID_REQUEST, "errmsg": f"unknown path {path}"})
        if method != "POST":
            return HttpReply(405, {"ret": INVALID_REQUEST, "errmsg": "method: must be POST"})
        refused = self._check_headers(headers)
        if refused is not None:
            return refused
        if not isinstance(data, Mapping):
            return _invalid("body: must be a JSON object")
        base_info = data.get("base_info")
        version = base_info.get("channel_version") if isinstance(base_info, Mapping) else None
        packed = _client_version(version) if isinstance(version, str) else None
        if packed is None:
            return _invalid("base_info.channel_version: must look like '2.1.3'")
        if headers.get("ilink-app-clientversion") != str(packed):
            return _invalid(
                "iLink-App-ClientVersion: must be base_info.channel_version packed as "
                f"0x00MMNNPP ({packed})"
            )
        return handler(data)

    def _check_headers(self, headers: Mapping[str, str]) -> HttpReply | None:
        with self._lock:
            expired = self._expired
        authorized = (
            headers.get("authorization") == f"Bearer {self.bot_token}"
            and headers.get("authorizationtype") == "ilink_bot_token"
        )
        if expired or not authorized:
            return _session_timeout()
        if headers.get("ilink-app-id") != "bot":
            return _invalid("iLink-App-Id: must be 'bot'")
        if not _uin_ok(headers.get("x-wechat-uin", "")):
            return _invalid("X-WECHAT-UIN: must be base64 of 4 random bytes")
        return None

    def _get_updates(self, data: Mapping[str, Any]) -> HttpReply:
        cursor = data.get("get_updates_buf")
        if not isinstance(cursor, str):
            return _invalid("get_updates_buf: must be a string (empty at first)")
        position = _position(cursor)
        if position is None:
            return _invalid("get_updates_buf: not a cursor this server issued")
        deadline = time.monotonic() + self.hold_seconds
        with self._changed:
            if self._closed:  # a 5xx: the client backs off instead of polling in a loop
                return HttpReply(
                    503, {"ret": TRANSIENT, "errcode": TRANSIENT, "errmsg": "server closing"}
                )
            while True:
                while self._queue and self._queue[0].position <= position:
                    self._queue.popleft()  # confirmed by the cursor
                found = list(self._queue)[:MAX_BATCH]
                if self._expired:
                    return _session_timeout()
                remaining = deadline - time.monotonic()
                if found or remaining <= 0 or self._closed:
                    break
                self._waiting_polls += 1
                try:
                    self._changed.wait(remaining)
                finally:
                    self._waiting_polls -= 1
            if found:
                position = found[-1].position
                fetched = {q.position for q in found}
                for entry in self._callbacks:
                    if entry.get("position") in fetched:
                        entry["fetched"] = True
                self._touch()
            return _ok(
                msgs=[copy.deepcopy(q.message) for q in found],
                get_updates_buf=_cursor(position),
                longpolling_timeout_ms=int(self.hold_seconds * 1000),
            )

    def _known_user(self, user: Any, field: str) -> HttpReply | None:
        # the person, or anybody who wrote to the bot lately (a context token names them)
        if user != self.user_id and user not in self._context_tokens.values():
            return _invalid(f"{field}: no conversation with this user")
        return None

    def _send_message(self, data: Mapping[str, Any]) -> HttpReply:
        msg = data.get("msg")
        if not isinstance(msg, Mapping):
            return _invalid("msg: must be an object")
        problem = self._known_user(msg.get("to_user_id"), "msg.to_user_id")
        if problem is not None:
            return problem
        if msg.get("from_user_id", "") != "":
            return _invalid("msg.from_user_id: must be empty (the bot sends)")
        client_id = msg.get("client_id")
        if not isinstance(client_id, str) or not client_id:
            return _invalid("msg.client_id: must be a non-empty string")
        if msg.get("message_type") != _BOT_MESSAGE:
            return _invalid("msg.message_type: must be 2 (a bot message)")
        if msg.get("message_state") != _FINISHED:
            return _invalid("msg.message_state: must be 2 (finished)")
        token = msg.get("context_token")
        with self._lock:
            issued_to = self._context_tokens.get(token) if isinstance(token, str) else None
        if issued_to is None or issued_to != msg.get("to_user_id"):
            return _invalid("msg.context_token: must be one the user's messages carried")
        items = msg.get("item_list")
        if not isinstance(items, list) or not items:
            return _invalid("msg.item_list: must be a non-empty list")
        texts: list[str] = []
        files: list[dict[str, Any]] = []
        for index, item in enumerate(items):
            if isinstance(item, Mapping) and item.get("type") in (_IMAGE_ITEM, _FILE_ITEM):
                view = self._bot_media(index, item)
                if isinstance(view, HttpReply):
                    return view
                files.append(view)
                continue
            text_item = item.get("text_item") if isinstance(item, Mapping) else None
            if not isinstance(item, Mapping) or item.get("type") != _TEXT_ITEM:
                return _invalid(
                    f"msg.item_list[{index}].type: the emulator shows text (1), images (2) "
                    "and files (4)"
                )
            text = text_item.get("text") if isinstance(text_item, Mapping) else None
            if not isinstance(text, str) or not text:
                return _invalid(f"msg.item_list[{index}].text_item.text: must be non-empty text")
            texts.append(text)
        if files:
            card_id = "file-" + uuid.uuid4().hex[:12]
            with self._lock:
                view = {"id": card_id, "kind": "file", "state": "shown", "text": "\n".join(texts)}
                self._put_card(card_id, {**view, "files": files, "clientId": client_id})
                self._add_timeline({"kind": "card", "from": "bot", "card": card_id})
            return _ok()
        with self._lock:
            self._next_message_id += 1
            self._add_timeline(
                {
                    "kind": "message",
                    "from": "bot",
                    "format": "text",
                    "text": "\n".join(texts),
                    "msgId": str(self._next_message_id),
                    "clientId": client_id,
                }
            )
        return _ok()

    def _get_config(self, data: Mapping[str, Any]) -> HttpReply:
        user = data.get("ilink_user_id")
        problem = self._known_user(user, "ilink_user_id")
        if problem is not None:
            return problem
        token = data.get("context_token")
        with self._lock:
            if token is not None and self._context_tokens.get(str(token)) != user:
                return _invalid("context_token: must be one the user's messages carried")
            ticket = self._tickets.get(str(user))
            if ticket is None:
                ticket = "ticket-" + secrets.token_hex(12)
                self._tickets[str(user)] = ticket
                while len(self._tickets) > MAX_TOKENS:
                    self._tickets.popitem(last=False)
        return _ok(typing_ticket=ticket)

    def _send_typing(self, data: Mapping[str, Any]) -> HttpReply:
        user = data.get("ilink_user_id")
        problem = self._known_user(user, "ilink_user_id")
        if problem is not None:
            return problem
        status = data.get("status")
        if status not in (TYPING_ON, TYPING_CANCEL) or isinstance(status, bool):
            return _invalid("status: must be 1 (typing) or 2 (cancel)")
        ticket = data.get("typing_ticket")
        with self._lock:
            if not isinstance(ticket, str) or self._tickets.get(str(user)) != ticket:
                return _invalid("typing_ticket: must be the ticket getconfig gave this user")
            self._typing = status == TYPING_ON
            self._touch()
        return _ok()

    # -- the person -----------------------------------------------------------------------
    def send_user_files(
        self, text: str, files: tuple[EmulatedFile, ...], *, origin: Origin | None = None
    ) -> tuple[str, CallbackDelivery]:
        """The person sends ``files`` (and ``text``): one message whose ``item_list``
        holds the text item and a media item per file (an image, a voice message, a
        video or a file, by its declared type), each encrypted under a key of its own
        and kept for the CDN download."""
        items: list[dict[str, Any]] = (
            [{"type": _TEXT_ITEM, "text_item": {"text": text}}] if text else []
        )
        for file in files:
            key = os.urandom(16)
            encrypted = ecb_encrypt(key, file.data)
            param = self.person_files.keep(
                EmulatedFile(file.name, "application/octet-stream", encrypted), prefix="enc-"
            )
            media = {
                "encrypt_query_param": param,
                "aes_key": base64.b64encode(key.hex().encode("ascii")).decode("ascii"),
                "encrypt_type": 1,
            }
            kind = media_kind(file.content_type)
            if kind == "image":
                items.append(
                    {
                        "type": _IMAGE_ITEM,
                        "image_item": {"media": media, "mid_size": len(encrypted)},
                    }
                )
            elif kind == "audio":
                items.append(
                    {"type": _VOICE_ITEM, "voice_item": {"media": media, "playtime": 1000}}
                )
            elif kind == "video":
                items.append(
                    {
                        "type": _VIDEO_ITEM,
                        "video_item": {"media": media, "video_size": len(encrypted)},
                    }
                )
            else:
                items.append(
                    {
                        "type": _FILE_ITEM,
                        "file_item": {
                            "media": media,
                            "file_name": file.name,
                            "len": str(len(file.data)),
                        },
                    }
                )
        shown = [
            {"name": f.name, "contentType": f.content_type, "size": len(f.data)} for f in files
        ]
        return self._user_message(text, items, origin, shown)

    def send_user_message(
        self, text: str, *, origin: Origin | None = None
    ) -> tuple[str, CallbackDelivery]:
        """The person types ``text``: a ``WeixinMessage`` waits for ``getupdates``.

        ``origin`` (`Origin`): another person (``from_user_id``; their direct chat).
        iLink bots have direct chats only: a group, a mention, a thread or a chat other
        than the person's own are refused (``ValueError``).
        Returns the message id and ``200 queued for getupdates``; a waiting long poll
        answers at once.
        """
        return self._user_message(text, [{"type": _TEXT_ITEM, "text_item": {"text": text}}], origin)

    def _user_message(
        self,
        text: str,
        items: list[dict[str, Any]],
        origin: Origin | None,
        files: list[dict[str, Any]] | None = None,
    ) -> tuple[str, CallbackDelivery]:
        origin = origin or Origin()
        user = origin.user_id or self.user_id
        if origin.group or origin.mentions_bot:
            raise ValueError("group: iLink bots have direct chats only (no groups, no mentions)")
        if origin.thread_id is not None:
            raise ValueError("threadId: iLink chats have no threads")
        if origin.chat_id is not None and origin.chat_id != user:
            raise ValueError("chatId: an iLink direct chat is the person's own id (userId)")
        with self._lock:
            self._next_message_id += 1
            message_id = self._next_message_id
            token = "ctx-" + secrets.token_hex(12)
            self._context_tokens[token] = user
            while len(self._context_tokens) > MAX_TOKENS:
                self._context_tokens.popitem(last=False)
            message: dict[str, Any] = {
                "seq": len(self._user_messages) + 1,
                "message_id": message_id,
                "from_user_id": user,
                "to_user_id": self.bot_id,
                "client_id": str(uuid.uuid4()),
                "create_time_ms": int(time.time() * 1000),
                "message_type": _USER_MESSAGE,
                "message_state": _FINISHED,
                "item_list": items,
                "context_token": token,
            }
            self._user_messages[str(message_id)] = message
            while len(self._user_messages) > MAX_CARDS:
                self._user_messages.popitem(last=False)
            entry: dict[str, Any] = {
                "kind": "message",
                "from": "user",
                "format": "text",
                "text": text,
                "msgId": str(message_id),
            }
            if files:
                entry["files"] = files
            self._add_timeline(entry)
            return str(message_id), self._enqueue("message", message)

    def redeliver(self, msg_id: str) -> CallbackDelivery:
        """Queue the person's message ``msg_id`` again, unchanged (same ``message_id``),
        as iLink answers a message again to a poll that did not move past it
        (``KeyError``: unknown id)."""
        with self._lock:
            message = self._user_messages.get(str(msg_id))
            if message is None:
                raise KeyError(msg_id)
            return self._enqueue("redelivery", message)

    def card_action(
        self,
        card_id: str,
        action: str,
        form: Mapping[str, Any] | None = None,
        *,
        user_id: str | None = None,
    ) -> CallbackDelivery:
        """Weixin shows no cards or buttons: every card is unknown (``KeyError``)."""
        raise KeyError(card_id)

    def _enqueue(self, kind: str, message: Mapping[str, Any]) -> CallbackDelivery:
        result = CallbackDelivery(status=200, body="queued for getupdates")
        with self._lock:
            if len(self._queue) >= MAX_PENDING_MESSAGES:
                dropped = self._queue.popleft()
                logger.warning(
                    "weixin emulator: %d messages wait for getupdates; message %s dropped",
                    MAX_PENDING_MESSAGES,
                    dropped.message.get("message_id"),
                )
                for entry in self._callbacks:
                    if entry.get("position") == dropped.position:
                        entry["dropped"] = True
            self._position += 1
            self._queue.append(_Queued(self._position, copy.deepcopy(dict(message))))
            self._callbacks.append(
                {
                    "seq": self._next_seq(),
                    "kind": kind,
                    "transport": "polling",
                    "url": "getupdates",
                    "status": result.status,
                    "response": result.body,
                    "msgId": str(message.get("message_id")),
                    "position": self._position,
                    "fetched": False,
                }
            )
            self._touch()  # wakes a waiting getupdates
        return result

    # -- controls and inspection ----------------------------------------------------------
    def handle_control(self, method: str, path: str, data: Any) -> HttpReply | None:
        files = self.bot_files.control(method, path, data)
        if files is not None:
            return files
        if method == "POST" and path == "/_emulator/redeliver":
            msg_id = data.get("msgId") if isinstance(data, Mapping) else None
            if not isinstance(msg_id, str | int) or isinstance(msg_id, bool):
                return HttpReply(400, {"error": "msgId: must be the id of a user message"})
            try:
                result = self.redeliver(str(msg_id))
            except KeyError:
                return HttpReply(404, {"error": f"message {msg_id} not found"})
            return HttpReply(200, {"status": result.status, "body": result.body})
        if method == "POST" and path == "/_emulator/session/expire":
            self.expire_session()
            return HttpReply(200, {"ok": True})
        return None

    def expire_session(self) -> None:
        """End the bot's session: every call (a held ``getupdates`` at once) answers
        ``errcode`` -14 until `restore_session()`."""
        with self._lock:
            self._expired = True
            self._touch()

    def restore_session(self) -> None:
        """Accept the bot token again after `expire_session()`."""
        with self._lock:
            self._expired = False
            self._touch()

    def typing(self) -> bool:
        """True while the last ``sendtyping`` was status 1."""
        with self._lock:
            return self._typing

    def waiting_polls(self) -> int:
        """How many ``getupdates`` calls are held waiting for a message right now."""
        with self._lock:
            return self._waiting_polls

    def pending_messages(self) -> list[dict[str, Any]]:
        """The messages no cursor has confirmed yet, oldest first."""
        with self._lock:
            return [copy.deepcopy(q.message) for q in self._queue]

    def bot_messages(self) -> list[str]:
        """The texts the bot sent, oldest first."""
        with self._lock:
            return [
                str(e.get("text", ""))
                for e in self._timeline
                if e.get("kind") == "message" and e.get("from") == "bot"
            ]

    def extra_state(self) -> dict[str, Any]:
        return {
            "reactions": {},
            "typing": self._typing,
            "typingUntil": 0.0,
            "typingAction": "typing" if self._typing else "",
            "draft": None,
            "views": {
                card_id: {k: copy.deepcopy(v) for k, v in card.items() if k != "clientId"}
                for card_id, card in self._cards.items()
            },
            "ingress": "polling",
            "session": "expired" if self._expired else "active",
            "user": {"id": self.user_id, "name": self.user_name},
            "pendingMessages": len(self._queue),
            "waitingPolls": self._waiting_polls,
        }

    def reset(self) -> None:
        """Forget calls, the chat, typing and unfetched messages (the cursor position,
        context tokens and tickets stay valid, so a running channel goes on)."""
        with self._lock:
            self._queue.clear()
            self._typing = False
            self._slots.clear()
            self._uploaded.clear()
            self.person_files.clear()
            self.bot_files.clear()
            super().reset()

    def close(self) -> None:
        """Answer every held ``getupdates`` at once (empty); later ones answer HTTP 503
        (``errcode`` -1), so a client still polling backs off."""
        with self._lock:
            self._closed = True
            self._touch()

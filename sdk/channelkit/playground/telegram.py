"""A Telegram Bot API emulator: ``/bot<token>/<method>``, webhook and polled Updates.

Methods follow ``openapi/telegram.json`` and the Bot API (JSON, form or query
parameters; method names are case-insensitive; ``{"ok": true, "result": ...}`` or
``{"ok": false, "error_code": N, "description": "..."}``):

* ``getMe``, ``setWebhook`` (the URL and ``secret_token`` user input is delivered to),
  ``deleteWebhook``, ``setMyCommands`` (the command menu);
* ``getUpdates`` (long polling: ``offset`` confirms every lower ``update_id``,
  ``timeout`` waits at most `MAX_POLL_SECONDS` for the first update, ``limit``,
  ``allowed_updates``; 409 Conflict while a webhook is set);
* ``sendMessage`` (text 1-4,096 characters, inline keyboards with ``callback_data`` of
  1-64 bytes), ``editMessageText`` (no keyboard in the edit removes it; an identical edit
  is ``400 message is not modified``), ``deleteMessage``, ``pinChatMessage``,
  ``unpinChatMessage`` (the given message, else the most recent pin) and ``getChat``
  (``pinned_message``: the most recently pinned message still pinned);
* ``sendMessageDraft`` (private chat; ``draft_id`` non-zero, text 0-4,096 characters,
  empty: the "Thinking..." placeholder): the chat view shows the draft, replaced by the
  bot's next ``sendMessage`` (`channelkit.playground.telegram_drafts`);
* ``sendChatAction`` (``typing`` is shown for 5 s, or until the bot's next message, as
  Telegram clients do); ``answerCallbackQuery`` (once per tap; its text is shown as a
  toast on the tapped message);
* ``getFile`` and ``GET /file/bot<token>/<file_path>``: the files a person sent with
  ``POST /_emulator/send`` (``files``), each as its own message (a photo with a
  thumbnail and its full size, a document, a voice or audio message, a video; the
  text is the first one's caption), served byte for byte (at most `MAX_FILES` kept);
* ``sendPhoto``, ``sendVoice`` and ``sendDocument`` (``multipart/form-data``: the
  ``photo``, ``voice`` or ``document`` file part, ``caption``, ``message_thread_id``):
  the bot's message view lists ``files`` (name, content type, size, ``url``),
  ``GET /_emulator/files/<key>`` serves the bytes and ``POST /_emulator/files/fail``
  makes the next uploads fail (`channelkit.playground.bot_files`).

Per-chat rate limits (off by default): ``POST /_emulator/limits`` turns them on; every
message write past the chat's budget is answered 429 with ``parameters.retry_after`` and
counted as ``rejected_429`` in the state (`channelkit.playground.telegram_limits`).

A wrong token is ``401 Unauthorized``. User messages and button taps become ``Update``
objects: POSTed to the webhook with the ``X-Telegram-Bot-Api-Secret-Token`` header while
one is set, else queued for ``getUpdates`` (at most `MAX_PENDING_UPDATES`).
``GET /_emulator/callbacks`` records each delivery with its ``transport`` (``webhook`` or
``polling``; a polled one also says whether ``getUpdates`` has ``fetched`` it).
"""

from __future__ import annotations

import copy
import json
import re
import secrets
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import parse_qsl

from channelkit.playground.bot_files import BotFiles, parse_multipart
from channelkit.playground.emulator import (
    MAX_CARDS,
    CallbackDelivery,
    Deliver,
    EmulatedFile,
    EmulatorBase,
    HttpReply,
    Origin,
    parse_json_body,
)
from channelkit.playground.telegram_drafts import DraftChat
from channelkit.playground.telegram_limits import LIMITED_METHODS, ChatLimits

__all__ = ["TYPING_SECONDS", "TelegramEmulator", "telegram_message_view"]

#: How long one ``sendChatAction`` shows its status (Telegram: "5 seconds or less").
TYPING_SECONDS = 5.0
MAX_TEXT = 4096
MAX_CALLBACK_DATA = 64
MAX_QUERIES = 1_000
#: Longest ``getUpdates`` wait the emulator grants (seconds).
MAX_POLL_SECONDS = 30.0
#: Updates kept for ``getUpdates`` (oldest dropped).
MAX_PENDING_UPDATES = 1_000
_UPDATE_KINDS = ("message", "callback_query")
#: ``callback_data`` of channelkit's question keyboards (``ck:<token>:<action>``): a
#: message carrying such buttons is a question waiting for the person's tap.
QUESTION_CALLBACK_PREFIX = "ck:"
_PATH_RE = re.compile(r"^/bot([^/]+)/([A-Za-z]+)$")
_FILE_PATH_RE = re.compile(r"^/file/bot([^/]+)/([A-Za-z0-9_]+/[A-Za-z0-9_.-]+)$")
#: Files a person sent that the emulator keeps for ``getFile`` (oldest dropped).
MAX_FILES = 100
_SECRET_RE = re.compile(r"^[A-Za-z0-9_-]{1,256}$")
_COMMAND_RE = re.compile(r"^[a-z0-9_]{1,32}$")
#: ``setMyCommands`` ``language_code``: two lower-case letters (ISO 639-1)
_LANGUAGE_RE = re.compile(r"^[a-z]{2}$")
#: Command menus of distinct languages kept (the oldest registered is forgotten).
MAX_MENU_LANGUAGES = 200
_CHAT_ACTIONS = frozenset(
    {
        "typing",
        "upload_photo",
        "record_video",
        "upload_video",
        "record_voice",
        "upload_voice",
        "upload_document",
        "choose_sticker",
        "find_location",
        "record_video_note",
        "upload_video_note",
    }
)
_BUTTON_KINDS = (
    "callback_data",
    "url",
    "web_app",
    "login_url",
    "switch_inline_query",
    "switch_inline_query_current_chat",
    "switch_inline_query_chosen_chat",
    "copy_text",
    "callback_game",
    "pay",
)


def _fail(status: int, description: str) -> HttpReply:
    return HttpReply(status, {"ok": False, "error_code": status, "description": description})


def _bad(description: str) -> HttpReply:
    return _fail(400, "Bad Request: " + description)


def _ok(result: Any) -> HttpReply:
    return HttpReply(200, {"ok": True, "result": result})


def _keyboard_problem(markup: Any) -> str | None:
    if not isinstance(markup, Mapping):
        return "can't parse reply keyboard markup JSON object"
    rows = markup.get("inline_keyboard")
    if rows is None:
        return None  # reply keyboards and ForceReply are accepted and not shown
    if not isinstance(rows, list) or not all(isinstance(row, list) for row in rows):
        return 'field "inline_keyboard" must be an Array of Arrays'
    for row in rows:
        for button in row:
            if not isinstance(button, Mapping) or not isinstance(button.get("text"), str):
                return "can't parse inline keyboard button: Text must be non-empty"
            kinds = [k for k in _BUTTON_KINDS if k in button]
            if len(kinds) != 1:
                return "can't parse inline keyboard button: exactly one button kind is required"
            data = button.get("callback_data")
            if "callback_data" in button and (
                not isinstance(data, str) or not 1 <= len(data.encode("utf-8")) <= MAX_CALLBACK_DATA
            ):
                return "BUTTON_DATA_INVALID"
    return None


def telegram_message_view(card: Mapping[str, Any]) -> dict[str, Any]:
    """A platform-neutral view of a bot message for the page (text, keyboard, edits)."""
    markup = card.get("reply_markup")
    rows = markup.get("inline_keyboard") if isinstance(markup, Mapping) else None
    keyboard = [
        [
            {"text": str(b.get("text", "")), "data": b.get("callback_data"), "url": b.get("url")}
            for b in row
            if isinstance(b, Mapping)
        ]
        for row in (rows if isinstance(rows, list) else [])
        if isinstance(row, list)
    ]
    if card.get("deleted"):
        state = "deleted"
    elif keyboard:
        state = "pending"
    elif card.get("edits"):
        state = "edited"
    else:
        state = "shown"
    return {
        "id": card.get("id"),
        "kind": "message",
        "state": state,
        "text": "" if card.get("deleted") else str(card.get("text", "")),
        "parseMode": card.get("parse_mode"),  # the page renders HTML's few tags
        "keyboard": keyboard,
        "edited": bool(card.get("edits")),
        "updates": card.get("edits", 0),
        "pinned": bool(card.get("pinned")),
        "files": [dict(f) for f in card.get("files", ())],
        "toast": card.get("toast"),
        "actions": ["tap"] if keyboard else [],
        "awaitsAnswer": any(
            str(b["data"] or "").startswith(QUESTION_CALLBACK_PREFIX)
            for row in keyboard
            for b in row
        ),
    }


#: the supergroup a person writes in with ``{"group": true}`` and no ``chatId``
GROUP_CHAT_ID = -1001234567890


def _file_views(media: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``files`` of a timeline entry: name, content type and size of what was sent."""
    views = []
    for field, value in media.items():
        item = value[-1] if isinstance(value, list) else value
        name = item.get("file_name") or ("photo.jpg" if field == "photo" else f"{field}")
        kind = item.get("mime_type") or ("image/jpeg" if field == "photo" else "")
        views.append({"name": name, "contentType": kind, "size": item.get("file_size", 0)})
    return views


def _numeric(value: str | None, field: str) -> int:
    """A Telegram id from an `Origin` field (Telegram ids are integers)."""
    try:
        return int(str(value))
    except ValueError:
        raise ValueError(f"{field}: Telegram ids are integers, got {value!r}") from None


class TelegramEmulator(DraftChat, EmulatorBase):
    """The emulated Bot API for one bot and one person in a private chat.

    ``webhook_url`` / ``secret_token`` are where and how updates are delivered until the
    SDK calls ``setWebhook`` (which then wins). ``deliver`` replaces the HTTP POST.
    """

    platform = "telegram"
    accepts_files = True

    def __init__(
        self,
        *,
        bot_token: str = "123456:playground-bot-token",
        webhook_url: str = "",
        secret_token: str | None = "playground-webhook-secret",
        user_id: int = 424242,
        user_name: str = "You",
        bot_id: int = 123456,
        bot_username: str = "channelkit_playground_bot",
        deliver: Deliver | None = None,
    ) -> None:
        super().__init__(deliver=deliver)
        self.bot_token = bot_token
        self.webhook_url = webhook_url
        self.secret_token = secret_token
        self.user_id = user_id
        self.user_name = user_name
        self.chat_id = user_id  # a private chat's id is the user's id
        self.bot_id = bot_id
        self.bot_username = bot_username
        self._next_message_id = 0
        self._next_update_id = 100_000
        #: chats other than the private one a person wrote in (the bot may answer there)
        self._other_chats: OrderedDict[int, bool] = OrderedDict()
        self._user_messages: OrderedDict[int, dict[str, Any]] = OrderedDict()
        self._queries: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._webhook: dict[str, Any] | None = None
        self._commands: list[dict[str, str]] = []
        #: language_code -> the menu registered for it (at most MAX_MENU_LANGUAGES)
        self._commands_by_language: OrderedDict[str, list[dict[str, str]]] = OrderedDict()
        self._typing_action = ""
        self._init_drafts()  # sendMessageDraft (telegram_drafts.py)
        #: updates waiting for getUpdates (no webhook set), oldest first
        self._pending: deque[dict[str, Any]] = deque(maxlen=MAX_PENDING_UPDATES)
        self._allowed_updates: list[str] | None = None
        self._waiting_polls = 0  # getUpdates calls waiting for an update right now
        self._methods: dict[str, Callable[[Mapping[str, Any]], HttpReply]] = {
            "getme": self._get_me,
            "setwebhook": self._set_webhook,
            "deletewebhook": self._delete_webhook,
            "getupdates": self._get_updates,
            "setmycommands": self._set_my_commands,
            "sendmessage": self._send_message,
            "sendmessagedraft": self._send_message_draft,
            "editmessagetext": self._edit_message_text,
            "deletemessage": self._delete_message,
            "sendchataction": self._send_chat_action,
            "answercallbackquery": self._answer_callback_query,
            "pinchatmessage": self._pin_chat_message,
            "unpinchatmessage": self._unpin_chat_message,
            "getchat": self._get_chat,
        }
        self._pin_order: list[str] = []  # pinned message ids, oldest pin first
        self._methods["getfile"] = self._get_file
        #: file_id -> (file_path, bytes) of the files people sent (at most MAX_FILES)
        self._files: OrderedDict[str, tuple[str, bytes]] = OrderedDict()
        #: file_path -> body bytes served by the file download
        self.file_bytes_served: dict[str, int] = {}
        #: the files the bot uploaded (sendPhoto / sendVoice / sendDocument)
        self.bot_files = BotFiles()
        self._methods["sendphoto"] = self._send_photo
        self._methods["senddocument"] = self._send_document
        self._methods["sendvoice"] = self._send_voice
        #: per-chat rate limits (off until ``POST /_emulator/limits``; telegram_limits.py)
        self.limits = ChatLimits()

    # -- API ------------------------------------------------------------------------------
    def handle_api(
        self,
        method: str,
        path: str,
        query: Mapping[str, str],
        headers: Mapping[str, str],
        body: bytes,
    ) -> HttpReply | None:
        match = _PATH_RE.match(path)
        if match is None:
            return self._download(method, path)
        token, name = match.groups()
        params: dict[str, Any] = dict(query)
        content_type = headers.get("content-type", "")
        recorded: dict[str, Any] | None = None
        if body and content_type.lower().startswith("multipart/form-data"):
            try:
                fields, parts = parse_multipart(body, content_type)
            except ValueError:
                reply = _bad("can't parse multipart/form-data")
                self._record(method, f"/bot<token>/{name}", query, None, reply)
                return reply
            params.update(fields)
            recorded = {
                **params,
                **{
                    k: {"name": f.name, "contentType": f.content_type, "size": len(f.data)}
                    for k, f in parts.items()
                },
            }
            params.update(parts)
        elif body:
            if "json" in content_type or body[:1] in (b"{", b"["):
                parsed = parse_json_body(body)
                if not isinstance(parsed, dict):
                    reply = _bad("can't parse JSON object")
                    self._record(method, f"/bot<token>/{name}", query, None, reply)
                    return reply
                params.update(parsed)
            else:
                params.update(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))
        if token != self.bot_token:
            reply = _fail(401, "Unauthorized")
        elif method not in ("GET", "POST"):
            reply = _fail(405, "Method Not Allowed")
        else:
            handler = self._methods.get(name.lower())
            retry_after = (
                self.limits.check(params.get("chat_id"))
                if handler is not None and name.lower() in LIMITED_METHODS
                else None
            )
            if retry_after is not None:
                reply = self.limits.refusal(retry_after)
            else:
                reply = handler(params) if handler is not None else _fail(404, "Not Found")
        # the token is part of the path: it is never recorded
        shown = recorded if recorded is not None else params
        self._record(method, f"/bot<token>/{name}", query, shown, reply)
        return reply

    def handle_control(self, method: str, path: str, data: Any) -> HttpReply | None:
        reply = self.limits.control(method, path, data)
        return reply if reply is not None else self.bot_files.control(method, path, data)

    def reset(self) -> None:
        self.bot_files.clear()
        self.limits.reset()
        super().reset()

    # -- files the bot sends -----------------------------------------------------------------
    def _send_photo(self, params: Mapping[str, Any]) -> HttpReply:
        return self._send_upload(params, "photo")

    def _send_document(self, params: Mapping[str, Any]) -> HttpReply:
        return self._send_upload(params, "document")

    def _send_voice(self, params: Mapping[str, Any]) -> HttpReply:
        return self._send_upload(params, "voice")

    def _send_upload(self, params: Mapping[str, Any], field: str) -> HttpReply:
        problem = self._chat_problem(params)
        if problem is not None:
            return problem
        file = params.get(field)
        if not isinstance(file, EmulatedFile):
            return _bad(f"there is no {field} in the request")
        if not file.data:
            return _bad("file must be non-empty")
        limit = 10_000_000 if field == "photo" else 50_000_000
        if len(file.data) > limit:
            return _fail(413, "Request Entity Too Large")
        caption = params.get("caption") or ""
        if not isinstance(caption, str) or len(caption) > 1024:
            return _bad("message caption is too long")
        fault = self.bot_files.take_fault()
        if fault is not None:
            reply = _fail(fault.status, fault.description)
            if fault.status == 429:
                payload = {**reply.payload, "parameters": {"retry_after": 1}}
                reply = HttpReply(429, payload)
            return reply
        key = self.bot_files.keep(file)
        view = self.bot_files.view(key)
        with self._lock:
            self._next_message_id += 1
            message_id = self._next_message_id
            card_key = str(message_id)
            thread = params.get("message_thread_id")
            card = {
                "id": card_key,
                "message_id": message_id,
                "kind": "message",
                "text": caption,
                "parse_mode": None,
                "reply_markup": None,
                "date": int(time.time()),
                "edits": 0,
                "chat_id": params.get("chat_id"),
                "message_thread_id": thread if thread not in (None, "") else None,
                "files": [view],
                "media": field,
            }
            self._put_card(card_key, card)
            entry: dict[str, Any] = {
                "kind": "card",
                "from": "bot",
                "card": card_key,
                "msgId": card_key,
            }
            if card["message_thread_id"] is not None:
                entry["threadId"] = str(card["message_thread_id"])
            self._add_timeline(entry)
            self._typing_until = 0.0
            self._clear_draft_locked()
            result = self._message_json(card)
        media = {"file_id": key, "file_unique_id": key[-12:], "file_size": len(file.data)}
        if field == "photo":
            result["photo"] = [{**media, "width": 1280, "height": 1280}]
        elif field == "voice":
            result["voice"] = {**media, "duration": 1, "mime_type": file.content_type}
        else:
            result["document"] = {**media, "file_name": file.name, "mime_type": file.content_type}
        if caption:
            result["caption"] = caption
        del result["text"]
        return _ok(result)

    # -- files a person sent -----------------------------------------------------------------
    def _get_file(self, params: Mapping[str, Any]) -> HttpReply:
        file_id = params.get("file_id")
        with self._lock:
            stored = self._files.get(file_id) if isinstance(file_id, str) else None
        if stored is None:
            return _bad("invalid file_id")
        file_path, data = stored
        unique = file_path.rsplit("/", 1)[1].split(".", 1)[0]
        return _ok(
            {
                "file_id": file_id,
                "file_unique_id": unique,
                "file_size": len(data),
                "file_path": file_path,
            }
        )

    def _download(self, method: str, path: str) -> HttpReply | None:
        match = _FILE_PATH_RE.match(path)
        if match is None:
            return None
        token, file_path = match.groups()
        if token != self.bot_token:
            reply = _fail(401, "Unauthorized")
        elif method != "GET":
            reply = _fail(405, "Method Not Allowed")
        else:
            with self._lock:
                data = next((d for p, d in self._files.values() if p == file_path), None)
                if data is not None:
                    self.file_bytes_served[file_path] = len(data)
            if data is None:
                reply = _fail(404, "Not Found")
            else:
                reply = HttpReply(200, None, content_type="application/octet-stream", raw=data)
        self._record(method, f"/file/bot<token>/{file_path}", {}, None, reply)
        return reply

    def _keep_file(self, file: EmulatedFile, folder: str, extension: str) -> str:
        """Store ``file``; its new ``file_id`` (the lock held)."""
        file_id = f"file-{secrets.token_hex(8)}"
        unique = secrets.token_hex(6)
        self._files[file_id] = (f"{folder}/file_{unique}{extension}", file.data)
        while len(self._files) > MAX_FILES:
            self._files.popitem(last=False)
        return file_id

    def _media(self, file: EmulatedFile) -> dict[str, Any]:
        """The message fields carrying ``file`` the way Telegram sends it (the lock held)."""
        kind = file.content_type.lower()
        extension = "." + file.name.rsplit(".", 1)[1][:8] if "." in file.name else ""
        if kind in ("image/jpeg", "image/png", "image/webp"):
            # a photo: a small thumbnail first, the full size last (other bytes)
            thumb = EmulatedFile("thumb.jpg", "image/jpeg", file.data[:64])
            sizes = []
            for item, side in ((thumb, 90), (file, 1280)):
                file_id = self._keep_file(item, "photos", ".jpg")
                sizes.append(
                    {
                        "file_id": file_id,
                        "file_unique_id": file_id[-12:],
                        "width": side,
                        "height": side,
                        "file_size": len(item.data),
                    }
                )
            return {"photo": sizes}
        field, folder = "document", "documents"
        if kind in ("audio/ogg", "audio/opus"):
            field, folder = "voice", "voice"
        elif kind.startswith("audio/"):
            field, folder = "audio", "music"
        elif kind.startswith("video/"):
            field, folder = "video", "videos"
        file_id = self._keep_file(file, folder, extension)
        media: dict[str, Any] = {
            "file_id": file_id,
            "file_unique_id": file_id[-12:],
            "mime_type": file.content_type,
            "file_size": len(file.data),
        }
        if field != "voice":
            media["file_name"] = file.name
        if field in ("voice", "audio", "video"):
            media["duration"] = 1
        return {field: media}

    def send_user_files(
        self, text: str, files: tuple[EmulatedFile, ...], *, origin: Origin | None = None
    ) -> tuple[str, CallbackDelivery]:
        """The person sends ``files``, each as its own message (as Telegram clients do),
        the first with ``text`` as its caption; returns the first message's id and the
        last delivery's answer (the first one that failed, if any)."""
        first_id, answer = "", CallbackDelivery(status=200, body="")
        for index, file in enumerate(files):
            with self._lock:
                media = self._media(file)
            msg_id, result = self.send_user_message(
                text if index == 0 else "", origin=origin, media=media
            )
            first_id = first_id or msg_id
            if answer.status < 400:
                answer = result
        return first_id, answer

    def _chat_problem(self, params: Mapping[str, Any]) -> HttpReply | None:
        chat_id = params.get("chat_id")
        if chat_id is None or chat_id == "":
            return _bad("chat_id is empty")
        if str(chat_id) != str(self.chat_id) and not self._known_chat(chat_id):
            return _bad("chat not found")
        return None

    def _known_chat(self, chat_id: Any) -> bool:
        try:
            number = int(chat_id)
        except (TypeError, ValueError):
            return False
        with self._lock:
            return number in self._other_chats

    def _message_id(self, params: Mapping[str, Any]) -> int | None:
        raw = params.get("message_id")
        if isinstance(raw, bool):
            return None
        try:
            return int(raw) if raw is not None else None
        except (TypeError, ValueError):
            return None

    @staticmethod
    def _markup(params: Mapping[str, Any]) -> tuple[Any, HttpReply | None]:
        markup = params.get("reply_markup")
        if isinstance(markup, str):
            try:
                markup = json.loads(markup)
            except ValueError:
                return None, _bad("can't parse reply keyboard markup JSON object")
        if markup is None:
            return None, None
        problem = _keyboard_problem(markup)
        return (markup, _bad(problem) if problem else None)

    def _bot_user(self) -> dict[str, Any]:
        return {
            "id": self.bot_id,
            "is_bot": True,
            "first_name": "channelkit playground",
            "username": self.bot_username,
        }

    def _user(self) -> dict[str, Any]:
        return {"id": self.user_id, "is_bot": False, "first_name": self.user_name}

    def _chat(self) -> dict[str, Any]:
        return {"id": self.chat_id, "type": "private", "first_name": self.user_name}

    def _message_json(self, card: Mapping[str, Any]) -> dict[str, Any]:
        chat = self._chat()
        sent_to = card.get("chat_id")
        if sent_to is not None and str(sent_to) != str(self.chat_id):  # a group or another chat
            number = int(sent_to)
            chat = {"id": number, "type": "supergroup" if number < 0 else "private"}
            if card.get("message_thread_id") is not None:
                chat["is_forum"] = True
        out: dict[str, Any] = {
            "message_id": card["message_id"],
            "from": self._bot_user(),
            "chat": chat,
            "date": card["date"],
            "text": card["text"],
        }
        if card.get("message_thread_id") is not None:  # a forum topic's message
            out["message_thread_id"] = card["message_thread_id"]
            out["is_topic_message"] = True
        if card.get("edit_date"):
            out["edit_date"] = card["edit_date"]
        if card.get("reply_markup") is not None:
            out["reply_markup"] = copy.deepcopy(card["reply_markup"])
        return out

    def _get_me(self, params: Mapping[str, Any]) -> HttpReply:
        return _ok(
            {
                **self._bot_user(),
                "can_join_groups": True,
                "can_read_all_group_messages": False,
                "supports_inline_queries": False,
            }
        )

    def _set_webhook(self, params: Mapping[str, Any]) -> HttpReply:
        url = params.get("url")
        if not isinstance(url, str):
            return _bad("url is required")
        secret = params.get("secret_token")
        if secret is not None and (not isinstance(secret, str) or not _SECRET_RE.match(secret)):
            return _bad("secret token contains unallowed characters")
        with self._lock:
            if not url:
                self._webhook = None
                self._touch()
                return HttpReply(
                    200, {"ok": True, "result": True, "description": "Webhook was deleted"}
                )
            if not url.startswith(("http://", "https://")):
                return _bad("bad webhook: an HTTPS URL must be provided for webhook")
            self._webhook = {"url": url, "secret_token": secret}
            self._touch()
        return HttpReply(200, {"ok": True, "result": True, "description": "Webhook was set"})

    def _delete_webhook(self, params: Mapping[str, Any]) -> HttpReply:
        with self._lock:
            had = self._webhook is not None or bool(self.webhook_url)
            self._webhook = None
            self.webhook_url = ""  # updates now wait for getUpdates
            if params.get("drop_pending_updates") in (True, "true", "True", "1"):
                self._pending.clear()
            self._touch()
        said = "Webhook was deleted" if had else "Webhook is already deleted"
        return HttpReply(200, {"ok": True, "result": True, "description": said})

    def _get_updates(self, params: Mapping[str, Any]) -> HttpReply:
        try:
            offset = int(params.get("offset") or 0)
            limit = int(params.get("limit") or 100)
            timeout = float(params.get("timeout") or 0)
        except (TypeError, ValueError):
            return _bad("wrong parameter in request")
        allowed = params.get("allowed_updates")
        if isinstance(allowed, str):
            try:
                allowed = json.loads(allowed)
            except ValueError:
                return _bad("can't parse allowed updates")
        deadline = time.monotonic() + max(0.0, min(timeout, MAX_POLL_SECONDS))
        with self._changed:
            if self._webhook is not None or self.webhook_url:
                return _fail(
                    409,
                    "Conflict: can't use getUpdates method while webhook is active; use "
                    "deleteWebhook to delete the webhook first",
                )
            if isinstance(allowed, list):
                self._allowed_updates = [str(kind) for kind in allowed] or None
            while True:
                if offset < 0:
                    found = list(self._pending)[offset:]
                else:
                    while self._pending and self._pending[0]["update_id"] < offset:
                        self._pending.popleft()  # confirmed
                    found = list(self._pending)
                wanted = self._allowed_updates or _UPDATE_KINDS
                found = [u for u in found if any(k in u for k in wanted)]
                remaining = deadline - time.monotonic()
                if found or remaining <= 0:
                    break
                self._waiting_polls += 1
                try:
                    self._changed.wait(remaining)
                finally:
                    self._waiting_polls -= 1
            found = found[: max(1, min(limit, 100))]
            ids = {u["update_id"] for u in found}
            for entry in self._callbacks:
                if entry.get("updateId") in ids:
                    entry["fetched"] = True
            if found:
                self._touch()
            return _ok(copy.deepcopy(found))

    def _set_my_commands(self, params: Mapping[str, Any]) -> HttpReply:
        commands = params.get("commands")
        if isinstance(commands, str):
            try:
                commands = json.loads(commands)
            except ValueError:
                return _bad("can't parse commands JSON object")
        if not isinstance(commands, list) or len(commands) > 100:
            return _bad("commands must be an array of at most 100 BotCommand")
        parsed: list[dict[str, str]] = []
        for item in commands:
            if not isinstance(item, Mapping):
                return _bad("BOT_COMMAND_INVALID")
            command, description = item.get("command"), item.get("description")
            if not isinstance(command, str) or not _COMMAND_RE.match(command):
                return _bad("BOT_COMMAND_INVALID")
            if not isinstance(description, str) or not 1 <= len(description) <= 256:
                return _bad("BOT_COMMAND_DESCRIPTION_INVALID")
            parsed.append({"command": command, "description": description})
        language = params.get("language_code") or ""
        if not isinstance(language, str) or (language and not _LANGUAGE_RE.match(language)):
            return _bad("language_code must be a two-letter ISO 639-1 code")
        with self._lock:
            if language:
                self._commands_by_language[language] = parsed
                self._commands_by_language.move_to_end(language)
                while len(self._commands_by_language) > MAX_MENU_LANGUAGES:
                    self._commands_by_language.popitem(last=False)
            else:
                self._commands = parsed
            self._touch()
        return _ok(True)

    def _send_message(self, params: Mapping[str, Any]) -> HttpReply:
        problem = self._chat_problem(params)
        if problem is not None:
            return problem
        text = params.get("text")
        if not isinstance(text, str) or not text.strip():
            return _bad("message text is empty")
        if len(text) > MAX_TEXT:
            return _bad("message is too long")
        markup, problem = self._markup(params)
        if problem is not None:
            return problem
        with self._lock:
            self._next_message_id += 1
            message_id = self._next_message_id
            key = str(message_id)
            card = {
                "id": key,
                "message_id": message_id,
                "kind": "message",
                "text": text,
                "parse_mode": params.get("parse_mode") or None,
                "reply_markup": markup,
                "date": int(time.time()),
                "edits": 0,
                "chat_id": params.get("chat_id"),  # where a tap on it comes from
                "message_thread_id": params.get("message_thread_id"),
            }
            self._put_card(key, card)
            entry: dict[str, Any] = {"kind": "card", "from": "bot", "card": key, "msgId": key}
            if params.get("message_thread_id") is not None:  # a forum topic
                entry["threadId"] = str(params["message_thread_id"])
            self._add_timeline(entry)
            self._typing_until = 0.0  # a message from the bot clears its chat action
            self._clear_draft_locked()  # ... and replaces its draft
            result = self._message_json(card)
        return _ok(result)

    def _edit_message_text(self, params: Mapping[str, Any]) -> HttpReply:
        if params.get("inline_message_id"):
            return _bad("message to edit not found")
        problem = self._chat_problem(params)
        if problem is not None:
            return problem
        message_id = self._message_id(params)
        text = params.get("text")
        if not isinstance(text, str) or not text.strip():
            return _bad("message text is empty")
        if len(text) > MAX_TEXT:
            return _bad("MESSAGE_TOO_LONG")
        markup, problem = self._markup(params)
        if problem is not None:
            return problem
        with self._lock:
            card = self._cards.get(str(message_id)) if message_id is not None else None
            if card is None:
                if message_id is not None and message_id in self._user_messages:
                    return _bad("message can't be edited")
                return _bad("message to edit not found")
            if card.get("deleted"):
                return _bad("message to edit not found")
            if card["text"] == text and card.get("reply_markup") == markup:
                return _bad(
                    "message is not modified: specified new message content and reply markup "
                    "are exactly the same as a current content and reply markup of the message"
                )
            card["text"] = text
            card["parse_mode"] = params.get("parse_mode") or None
            card["reply_markup"] = markup
            card["edits"] += 1
            card["edit_date"] = int(time.time())
            self._touch()
            result = self._message_json(card)
        return _ok(result)

    def _delete_message(self, params: Mapping[str, Any]) -> HttpReply:
        problem = self._chat_problem(params)
        if problem is not None:
            return problem
        message_id = self._message_id(params)
        with self._lock:
            card = self._cards.get(str(message_id)) if message_id is not None else None
            if card is not None and not card.get("deleted"):
                card["deleted"] = True
                card["reply_markup"] = None
                self._touch()
                return _ok(True)
            if message_id is not None and message_id in self._user_messages:
                self._user_messages.pop(message_id)
                for entry in self._timeline:
                    if entry.get("msgId") == str(message_id):
                        entry["deleted"] = True
                self._touch()
                return _ok(True)
        return _bad("message to delete not found")

    def _send_chat_action(self, params: Mapping[str, Any]) -> HttpReply:
        problem = self._chat_problem(params)
        if problem is not None:
            return problem
        action = params.get("action")
        if action not in _CHAT_ACTIONS:
            return _bad("wrong parameter action in request")
        with self._lock:
            self._typing_until = time.time() + TYPING_SECONDS
            self._typing_action = str(action)
            self._touch()
        return _ok(True)

    def _answer_callback_query(self, params: Mapping[str, Any]) -> HttpReply:
        query_id = params.get("callback_query_id")
        text = params.get("text")
        if text is not None and (not isinstance(text, str) or len(text) > 200):
            return _bad("MESSAGE_TOO_LONG")
        with self._lock:
            query = self._queries.get(str(query_id)) if query_id else None
            if query is None or query["answered"]:
                return _bad("query is too old and response timeout expired or query ID is invalid")
            query["answered"] = True
            query["answer"] = text or ""
            card_key = str(query["message_id"])
        if text:
            self._set_toast(card_key, "alert" if params.get("show_alert") else "info", text)
        return _ok(True)

    def _pin_chat_message(self, params: Mapping[str, Any]) -> HttpReply:
        problem = self._chat_problem(params)
        if problem is not None:
            return problem
        message_id = self._message_id(params)
        with self._lock:
            card = self._cards.get(str(message_id)) if message_id is not None else None
            if card is None or card.get("deleted"):
                return _bad("message to pin not found")
            card["pinned"] = True
            key = str(message_id)
            self._pin_order = [k for k in self._pin_order if k != key] + [key]
            self._touch()
        return _ok(True)

    def _unpin_chat_message(self, params: Mapping[str, Any]) -> HttpReply:
        problem = self._chat_problem(params)
        if problem is not None:
            return problem
        given = params.get("message_id") not in (None, "")
        message_id = self._message_id(params)
        with self._lock:
            if given and message_id is None:
                return _bad("wrong parameter message_id in request")
            key = str(message_id) if given else (self._pin_order or [""])[-1]
            card = self._cards.get(key)
            if card is None or card.get("deleted"):
                return _bad("message to unpin not found")
            # like Telegram: unpinning a message that is not pinned is not an error
            card["pinned"] = False
            self._pin_order = [k for k in self._pin_order if k != key]
            self._touch()
        return _ok(True)

    def _get_chat(self, params: Mapping[str, Any]) -> HttpReply:
        problem = self._chat_problem(params)
        if problem is not None:
            return problem
        with self._lock:
            chat: dict[str, Any] = {**self._chat(), "accent_color_id": 0, "max_reaction_count": 11}
            live = [k for k in self._pin_order if not self._cards.get(k, {}).get("deleted")]
            if live and live[-1] in self._cards:
                chat["pinned_message"] = self._message_json(self._cards[live[-1]])
        return _ok(chat)

    # -- visible state ----------------------------------------------------------------------
    def extra_state(self) -> dict[str, Any]:
        return {
            "reactions": {},
            "typingAction": self._typing_action if self._typing_until > time.time() else "",
            "draft": self._live_draft(),
            "views": {key: telegram_message_view(card) for key, card in self._cards.items()},
            "commands": list(self._commands),
            "commandsByLanguage": {k: list(v) for k, v in self._commands_by_language.items()},
            "webhook": {"url": self._webhook["url"]} if self._webhook else None,
            "ingress": "webhook" if self._webhook or self.webhook_url else "polling",
            "rateLimits": self.limits.view(),
            "rejected_429": self.limits.rejected,
        }

    def view(self, message_id: str) -> dict[str, Any] | None:
        """The page's view of one bot message (None when unknown)."""
        with self._lock:
            card = self._cards.get(str(message_id))
            return telegram_message_view(card) if card is not None else None

    def typing(self) -> bool:
        """True while the last ``sendChatAction typing`` is fresh (< 5 s old)."""
        with self._lock:
            return self._typing_until > time.time()

    def callback_answers(self) -> list[dict[str, Any]]:
        """Every tap sent and whether (and how) the SDK answered it, oldest first."""
        with self._lock:
            return [
                {"id": qid, **{k: v for k, v in q.items() if k != "at"}}
                for qid, q in self._queries.items()
            ]

    # -- user input -> webhook updates ------------------------------------------------------
    def _webhook_target(self) -> tuple[str, str | None]:
        with self._lock:
            if self._webhook is not None:
                return str(self._webhook["url"]), self._webhook.get("secret_token")
        return self.webhook_url, self.secret_token

    def _deliver_update(self, kind: str, update: Mapping[str, Any]) -> CallbackDelivery:
        url, secret = self._webhook_target()
        if not url:
            return self._queue_update(kind, update)
        headers = {"Content-Type": "application/json"}
        if secret:
            headers["X-Telegram-Bot-Api-Secret-Token"] = secret
        body = json.dumps(update, ensure_ascii=False).encode("utf-8")
        result = self.deliver(url, headers, body)
        self._note_delivery(kind, "webhook", url, result, update["update_id"])
        return result

    def _queue_update(self, kind: str, update: Mapping[str, Any]) -> CallbackDelivery:
        """No webhook: the update waits for ``getUpdates`` (which is woken up)."""
        result = CallbackDelivery(status=200, body="queued for getUpdates")
        with self._lock:
            self._pending.append(dict(update))
            self._note_delivery(kind, "polling", "getUpdates", result, update["update_id"])
        return result

    def _note_delivery(
        self, kind: str, transport: str, url: str, result: CallbackDelivery, update_id: int
    ) -> None:
        with self._lock:
            entry: dict[str, Any] = {
                "seq": self._next_seq(),
                "kind": kind,
                "transport": transport,
                "url": url,
                "status": result.status,
                "response": result.body[:2000],
                "updateId": update_id,
            }
            if transport == "polling":
                entry["fetched"] = False
            self._callbacks.append(entry)
            self._touch()

    def waiting_polls(self) -> int:
        """How many ``getUpdates`` calls are waiting for an update right now."""
        with self._lock:
            return self._waiting_polls

    def pending_updates(self) -> list[dict[str, Any]]:
        """The updates queued for ``getUpdates`` and not confirmed yet, oldest first."""
        with self._lock:
            return copy.deepcopy(list(self._pending))

    def _update_id(self) -> int:
        with self._lock:
            self._next_update_id += 1
            return self._next_update_id

    def send_user_message(
        self,
        text: str,
        *,
        origin: Origin | None = None,
        media: Mapping[str, Any] | None = None,
    ) -> tuple[str, CallbackDelivery]:
        """The person types ``text``: an ``Update`` with a ``message`` goes to the webhook.

        ``origin`` (`Origin`): another person (``from.id``, numeric), a group (a
        ``supergroup``, `GROUP_CHAT_ID` unless a numeric chat is named; the bot may
        then write there), a mention (``@<bot_username>`` before the text, with its
        ``mention`` entity), a forum topic (``message_thread_id``, ``is_topic_message``).
        """
        origin = origin or Origin()
        sender = self._user()
        if origin.user_id is not None:
            sender = {"id": _numeric(origin.user_id, "userId"), "is_bot": False}
            sender["first_name"] = origin.user_id
        chat = self._chat()
        if origin.user_id is not None and not origin.group and origin.chat_id is None:
            chat = {"id": sender["id"], "type": "private", "first_name": origin.user_id}
        elif origin.group or origin.chat_id is not None:
            chat_id = _numeric(origin.chat_id, "chatId") if origin.chat_id else GROUP_CHAT_ID
            chat = {"id": chat_id, "type": "supergroup" if origin.group else "private"}
            if origin.group:
                chat["title"] = "playground group"
                if origin.thread_id is not None:
                    chat["is_forum"] = True
        body = f"@{self.bot_username} {text}" if origin.mentions_bot else text
        with self._lock:
            if chat["id"] != self.chat_id:
                self._other_chats[chat["id"]] = True
                while len(self._other_chats) > MAX_CARDS:
                    self._other_chats.popitem(last=False)
            self._next_message_id += 1
            message_id = self._next_message_id
            message: dict[str, Any] = {
                "message_id": message_id,
                "from": sender,
                "chat": chat,
                "date": int(time.time()),
                "text": body,
            }
            if media is not None:  # a file: the text is its caption (none when empty)
                message.update(media)
                del message["text"]
                if body:
                    message["caption"] = body
            if origin.thread_id is not None:
                message["message_thread_id"] = _numeric(origin.thread_id, "threadId")
                message["is_topic_message"] = True
            if origin.mentions_bot:
                name = len(self.bot_username) + 1
                message["entities"] = [{"type": "mention", "offset": 0, "length": name}]
            elif text.startswith("/"):
                command = text.split(maxsplit=1)[0]
                message["entities"] = [{"type": "bot_command", "offset": 0, "length": len(command)}]
            self._user_messages[message_id] = message
            while len(self._user_messages) > MAX_CARDS:
                self._user_messages.popitem(last=False)
            self._add_timeline(
                {
                    "kind": "message",
                    "from": "user",
                    "format": "text",
                    "text": text,
                    "msgId": str(message_id),
                    **({"files": _file_views(media)} if media is not None else {}),
                }
            )
        update = {"update_id": self._update_id(), "message": message}
        return str(message_id), self._deliver_update("message", update)

    def card_action(
        self,
        card_id: str,
        action: str,
        form: Mapping[str, Any] | None = None,
        *,
        user_id: str | None = None,
    ) -> CallbackDelivery:
        """The person taps an inline button of a bot message: ``action`` ``"tap"`` with
        ``form={"data": callback_data}`` or ``{"text": button text}``, or ``action`` set
        to the button's text or data. A ``callback_query`` Update goes to the webhook."""
        with self._lock:
            card = self._cards.get(str(card_id))
            if card is None:
                raise KeyError(card_id)
            view = telegram_message_view(card)
            message = self._message_json(card)
        wanted_data = form.get("data") if form else None
        wanted_text = form.get("text") if form else None
        if action != "tap":
            wanted_data = wanted_text = action
        button = next(
            (
                b
                for row in view["keyboard"]
                for b in row
                if b["data"] is not None and (b["data"] == wanted_data or b["text"] == wanted_text)
            ),
            None,
        )
        if button is None:
            raise ValueError("action: the message has no such button")
        query_id = str(secrets.randbits(63))
        with self._lock:
            self._queries[query_id] = {
                "message_id": card["message_id"],
                "data": button["data"],
                "answered": False,
                "at": time.time(),
            }
            while len(self._queries) > MAX_QUERIES:
                self._queries.popitem(last=False)
        sender = self._user()
        if user_id is not None:
            sender = {"id": int(user_id), "is_bot": False, "first_name": "Someone else"}
        update = {
            "update_id": self._update_id(),
            "callback_query": {
                "id": query_id,
                "from": sender,
                "chat_instance": str(self.chat_id * 7919),
                "message": message,
                "data": button["data"],
            },
        }
        return self._deliver_update("callback_query", update)

"""A Feishu (Lark) emulator: tenant token, IM messages, reactions, pins, CardKit, callbacks.

Paths and bodies follow ``openapi/feishu.json``:

* ``POST /open-apis/auth/v3/tenant_access_token/internal`` issues tenant tokens (the same
  token again while more than 30 minutes remain); every other call needs
  ``Authorization: Bearer <token>`` (else code 99991661 / 99991663);
* ``POST /open-apis/im/v1/messages?receive_id_type=...``, ``.../{id}/reply``,
  ``PATCH`` / ``DELETE /open-apis/im/v1/messages/{id}``: text, post and interactive
  messages (raw card JSON or a CardKit entity ``{"type":"card","data":{"card_id"}}``,
  sent at most once); PATCH needs ``config.update_multi`` on an interactive message;
* ``POST|GET /open-apis/im/v1/messages/{id}/reactions``, ``DELETE .../{reaction_id}``;
  ``POST /open-apis/im/v1/pins``, ``DELETE /open-apis/im/v1/pins/{id}``;
* CardKit: ``POST /open-apis/cardkit/v1/cards`` (schema 2.0 only), ``PUT .../{id}``,
  ``PUT .../{id}/elements/{element_id}/content`` (only while ``streaming_mode`` is on,
  markdown/plain_text elements), ``PATCH .../{id}/settings``. Every CardKit write carries
  a ``sequence`` that must strictly increase per card (300317), a repeated ``uuid`` is an
  idempotent replay.

User input goes back to the SDK as Feishu sends it: ``im.message.receive_v1`` events to
``events_url`` and ``card.action.trigger`` callbacks to ``card_url`` (schema 2.0
envelopes carrying the verification token). With an ``encrypt_key`` (the playground sets
one) the body is ``{"encrypt": base64(iv + AES-256-CBC(sha256(key), PKCS#7(json)))}`` and
``X-Lark-Signature = sha256_hex(timestamp + nonce + encrypt_key + body)`` with
``X-Lark-Request-Timestamp`` / ``X-Lark-Request-Nonce``. Key derivation, padding, framing
and the signature are computed here from Feishu's documented algorithm; only the AES
block cipher itself (CBC, no padding) is reused from
:mod:`channelkit.platforms.feishu.crypto`, the standard library having none.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import os
import re
import secrets
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from channelkit.playground.emulator import (
    MAX_CARDS,
    CallbackDelivery,
    Deliver,
    EmulatorBase,
    HttpReply,
    parse_json_body,
)

__all__ = [
    "FeishuEmulator",
    "feishu_card_view",
    "feishu_encrypt",
    "feishu_signature",
]

TOKEN_PATH = "/open-apis/auth/v3/tenant_access_token/internal"
TOKEN_LIFETIME = 7200
#: A token with less than this many seconds left is replaced on the next request.
TOKEN_RENEW_BELOW = 1800
MAX_SEQUENCE = 2**31 - 1
MAX_STREAM_CHARS = 100_000
MAX_CARD_BYTES = 30 * 1024
MAX_TEXT_BYTES = 150 * 1024
_RECEIVE_ID_TYPES = ("open_id", "user_id", "union_id", "email", "chat_id")
_EMOJI_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")

_OUTPUT_LABELS = (
    ("running", "running"),
    ("运行中", "running"),
    ("läuft", "running"),
    ("completed", "completed"),
    ("已完成", "completed"),
    ("abgeschlossen", "completed"),
    ("stopped", "stopped"),
    ("已停止", "stopped"),
    ("gestoppt", "stopped"),
    ("cancelled", "cancelled"),
    ("已取消", "cancelled"),
    ("abgebrochen", "cancelled"),
    ("failed", "failed"),
    ("已失败", "failed"),
    ("fehlgeschlagen", "failed"),
)
_FORM_LABELS = (
    ("processing", "processing"),
    ("正在处理", "processing"),
    ("wird verarbeitet", "processing"),
    ("submitted", "submitted"),
    ("已提交", "submitted"),
    ("übermittelt", "submitted"),
    ("cancelled", "cancelled"),
    ("已取消", "cancelled"),
    ("abgebrochen", "cancelled"),
    ("expired", "expired"),
    ("已过期", "expired"),
    ("abgelaufen", "expired"),
)
_TEMPLATE_STATES = {"blue": "running", "green": "completed", "red": "failed", "grey": "cancelled"}

_BUTTON_ACTIONS = {"stop": "ck_stop", "submit": "ck_submit", "cancel": "ck_cancel"}


# --- the documented callback algorithm ----------------------------------------------------


def feishu_encrypt(encrypt_key: str, plaintext: bytes, *, iv: bytes | None = None) -> str:
    """Feishu's ``encrypt`` field: ``base64(iv + AES-256-CBC(sha256(key), PKCS#7(text)))``."""
    from channelkit.platforms.feishu.crypto import aes256_cbc_encrypt  # the block cipher only

    key = hashlib.sha256(encrypt_key.encode("utf-8")).digest()
    iv = os.urandom(16) if iv is None else iv
    if len(iv) != 16:
        raise ValueError("iv: must be 16 bytes")
    pad = 16 - len(plaintext) % 16
    padded = plaintext + bytes([pad]) * pad
    return base64.b64encode(iv + aes256_cbc_encrypt(key, iv, padded, pad=False)).decode("ascii")


def feishu_signature(timestamp: str, nonce: str, encrypt_key: str, body: bytes) -> str:
    """``X-Lark-Signature``: ``sha256_hex((timestamp + nonce + encrypt_key) + body)``."""
    return hashlib.sha256((timestamp + nonce + encrypt_key).encode("utf-8") + body).hexdigest()


# --- helpers --------------------------------------------------------------------------------


def _error(status: int, code: int, msg: str) -> HttpReply:
    return HttpReply(
        status,
        {
            "code": code,
            "msg": msg,
            "error": {"log_id": uuid.uuid4().hex[:24], "troubleshooter": ""},
        },
    )


def _ok(data: Any = None) -> HttpReply:
    return HttpReply(200, {"code": 0, "msg": "success", "data": {} if data is None else data})


def _walk(elements: Any) -> Iterator[dict[str, Any]]:
    """Every element of a card body, depth first (forms, columns and panels included)."""
    if not isinstance(elements, list):
        return
    for element in elements:
        if not isinstance(element, dict):
            continue
        yield element
        for key in ("elements", "columns"):
            yield from _walk(element.get(key))


def _elements(card: Mapping[str, Any]) -> list[Any]:
    body = card.get("body")
    if isinstance(body, Mapping) and isinstance(body.get("elements"), list):
        return list(body["elements"])
    legacy = card.get("elements")
    return list(legacy) if isinstance(legacy, list) else []


def _text(value: Any) -> str:
    if isinstance(value, Mapping):
        return str(value.get("content", ""))
    return "" if value is None else str(value)


def _button_value(element: Mapping[str, Any]) -> dict[str, Any] | None:
    behaviors = element.get("behaviors")
    if isinstance(behaviors, list):
        for behavior in behaviors:
            if isinstance(behavior, Mapping) and behavior.get("type") == "callback":
                value = behavior.get("value")
                return dict(value) if isinstance(value, Mapping) else {"value": value}
    value = element.get("value")
    return dict(value) if isinstance(value, Mapping) else None


def _classify(card: Mapping[str, Any]) -> str:
    elements = list(_walk(_elements(card)))
    if any(e.get("tag") == "form" for e in elements):
        return "question"
    if any(e.get("element_id") == "ck_content" for e in elements):
        return "status"
    return "custom"


def _strip_markdown(text: str) -> str:
    """The first paragraph of a markdown block as plain text (``**`` and ``>`` dropped)."""
    lines = []
    for line in text.strip().split("\n\n", 1)[0].splitlines():
        line = line.strip()
        if line.startswith(">"):
            line = line[1:].strip()
        lines.append(line.replace("**", "").strip("*"))
    return " · ".join(part for part in lines if part)


def _label_state(label: str, table: tuple[tuple[str, str], ...]) -> str | None:
    low = label.strip().strip("*").strip().lower()
    for prefix, state in table:
        if low.startswith(prefix):
            return state
    return None


def feishu_card_view(card: Mapping[str, Any]) -> dict[str, Any]:
    """A platform-neutral view of a Feishu card for the page (kind, state, actions)."""
    body: Mapping[str, Any] = card.get("json") or {}
    raw_header = body.get("header")
    header: Mapping[str, Any] = raw_header if isinstance(raw_header, Mapping) else {}
    template = str(header.get("template", ""))
    title = _text(header.get("title"))
    elements = list(_walk(_elements(body)))
    kind = str(card.get("kind", "custom"))
    view: dict[str, Any] = {
        "id": card.get("id"),
        "kind": kind,
        "title": title,
        "actions": [],
        "messageId": card.get("messageId"),
        "streaming": bool(card.get("streaming")),
        "pinned": bool(card.get("pinned")),
        "toast": card.get("toast"),
        "updates": card.get("updates", 0),
    }
    if card.get("deleted"):
        view.update({"state": "deleted", "content": "(message recalled)", "statusLine": ""})
        return view
    buttons = [(e, _button_value(e) or {}) for e in elements if e.get("tag") == "button"]
    if kind == "status":
        content = next(
            (str(e.get("content", "")) for e in elements if e.get("element_id") == "ck_content"),
            "",
        )
        label = next(
            (str(e.get("content", "")) for e in elements if e.get("element_id") == "ck_status"),
            "",
        ).strip("*")
        state = _label_state(label, _OUTPUT_LABELS) or _TEMPLATE_STATES.get(template, "running")
        view.update({"state": state, "statusLine": label, "content": content})
        if state == "running" and any(v.get("action") == "ck_stop" for _, v in buttons):
            view["actions"] = ["stop"]
        return view
    if kind == "question":
        form = next((e for e in elements if e.get("tag") == "form"), None)
        if form is not None:
            questions: list[dict[str, Any]] = []
            by_name: dict[str, dict[str, Any]] = {}
            label = ""
            for element in _walk(form.get("elements")):
                tag = element.get("tag")
                if tag == "markdown":
                    label = _strip_markdown(str(element.get("content", "")))
                elif tag in ("select_static", "multi_select_static"):
                    name = str(element.get("name", ""))
                    question = {
                        "name": name,
                        "label": label,
                        "multi": tag == "multi_select_static",
                        "options": [
                            {"value": str(o.get("value", "")), "text": _text(o.get("text"))}
                            for o in element.get("options", [])
                            if isinstance(o, Mapping)
                        ],
                        "other": None,
                    }
                    questions.append(question)
                    by_name[name] = question
                elif tag == "input":
                    name = str(element.get("name", ""))
                    base = name[: -len("_other")] if name.endswith("_other") else None
                    if base is not None and base in by_name:
                        by_name[base]["other"] = {
                            "name": name,
                            "placeholder": _text(element.get("placeholder")),
                        }
            submit = next((e for e, v in buttons if v.get("action") == "ck_submit"), None)
            view.update(
                {
                    "state": "pending",
                    "desc": "",
                    "button": _text(submit.get("text")) if submit else "Submit",
                    "questions": questions,
                    "actions": [
                        name
                        for name, action in (("submit", "ck_submit"), ("cancel", "ck_cancel"))
                        if any(v.get("action") == action for _, v in buttons)
                    ],
                }
            )
            return view
        markdown = [str(e.get("content", "")) for e in elements if e.get("tag") == "markdown"]
        label = markdown[-1].strip("*") if markdown else ""
        state = _label_state(label, _FORM_LABELS) or (
            "submitted" if template == "green" else "closed"
        )
        answers = [
            line.replace("**→**", "→").strip()
            for block in markdown[:-1]
            for line in block.splitlines()
            if "→" in line
        ]
        view.update(
            {"state": state, "statusLine": label, "desc": "  ".join(answers), "questions": []}
        )
        return view
    text = "\n".join(
        str(e.get("content", "")) for e in elements if e.get("tag") in ("markdown", "div")
    )
    view.update({"state": "shown", "content": text or json.dumps(dict(body), ensure_ascii=False)})
    return view


# --- the emulator -----------------------------------------------------------------------------

Handler = Callable[..., HttpReply]


class FeishuEmulator(EmulatorBase):
    """The emulated Feishu tenant for one app (bot), one person and one p2p chat.

    ``events_url`` receives message events and ``card_url`` card actions (the app's
    event and card callback URLs). ``encrypt_key`` encrypts and signs both (None: plain
    JSON carrying only the verification token). ``deliver`` replaces the HTTP POST to the
    SDK.
    """

    platform = "feishu"

    def __init__(
        self,
        *,
        app_id: str = "cli_playground",
        app_secret: str = "playground-secret",
        verification_token: str = "playground-verification-token",
        encrypt_key: str | None = "playground-encrypt-key",
        events_url: str = "",
        card_url: str = "",
        user_open_id: str = "ou_playground_user",
        user_name: str = "You",
        chat_id: str = "oc_playground",
        tenant_key: str = "playground-tenant",
        deliver: Deliver | None = None,
    ) -> None:
        super().__init__(deliver=deliver)
        self.app_id = app_id
        self.app_secret = app_secret
        self.verification_token = verification_token
        self.encrypt_key = encrypt_key
        self.events_url = events_url
        self.card_url = card_url
        self.user_open_id = user_open_id
        self.user_name = user_name
        self.chat_id = chat_id
        self.tenant_key = tenant_key
        self._tokens: dict[str, float] = {}
        self._current_token: str | None = None
        self._messages: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._message_card: dict[str, str] = {}  # message id -> card key
        self._reactions: dict[str, list[dict[str, Any]]] = {}
        self._pins: dict[str, dict[str, Any]] = {}
        self._routes: list[tuple[str, re.Pattern[str], Handler]] = [
            ("POST", re.compile(r"^/open-apis/im/v1/messages$"), self._create_message),
            ("POST", re.compile(r"^/open-apis/im/v1/messages/([^/]+)/reply$"), self._reply),
            ("PATCH", re.compile(r"^/open-apis/im/v1/messages/([^/]+)$"), self._patch_message),
            ("DELETE", re.compile(r"^/open-apis/im/v1/messages/([^/]+)$"), self._delete_message),
            (
                "POST",
                re.compile(r"^/open-apis/im/v1/messages/([^/]+)/reactions$"),
                self._add_reaction,
            ),
            (
                "GET",
                re.compile(r"^/open-apis/im/v1/messages/([^/]+)/reactions$"),
                self._list_reactions,
            ),
            (
                "DELETE",
                re.compile(r"^/open-apis/im/v1/messages/([^/]+)/reactions/([^/]+)$"),
                self._delete_reaction,
            ),
            ("POST", re.compile(r"^/open-apis/im/v1/pins$"), self._pin),
            ("DELETE", re.compile(r"^/open-apis/im/v1/pins/([^/]+)$"), self._unpin),
            ("POST", re.compile(r"^/open-apis/cardkit/v1/cards$"), self._create_card),
            ("PUT", re.compile(r"^/open-apis/cardkit/v1/cards/([^/]+)$"), self._update_card),
            (
                "PUT",
                re.compile(r"^/open-apis/cardkit/v1/cards/([^/]+)/elements/([^/]+)/content$"),
                self._stream_element,
            ),
            (
                "PATCH",
                re.compile(r"^/open-apis/cardkit/v1/cards/([^/]+)/settings$"),
                self._card_settings,
            ),
        ]

    # -- tokens ---------------------------------------------------------------------------
    def _tenant_token(self, data: Any) -> HttpReply:
        if not isinstance(data, Mapping) or not data.get("app_id") or not data.get("app_secret"):
            return _error(400, 99992402, "field validation failed: app_id and app_secret")
        if data.get("app_id") != self.app_id or data.get("app_secret") != self.app_secret:
            return _error(400, 10014, "app secret invalid")
        now = time.time()
        with self._lock:
            token = self._current_token
            expiry = self._tokens.get(token, 0.0) if token else 0.0
            if token is None or expiry - now < TOKEN_RENEW_BELOW:
                token = "t-" + secrets.token_hex(16)
                if len(self._tokens) > 100:
                    self._tokens.clear()
                self._tokens[token] = now + TOKEN_LIFETIME
                self._current_token = token
                expiry = now + TOKEN_LIFETIME
        return HttpReply(
            200,
            {"code": 0, "msg": "ok", "tenant_access_token": token, "expire": int(expiry - now)},
        )

    def revoke_tokens(self) -> None:
        """Invalidate every issued token (the next call gets code 99991663)."""
        with self._lock:
            self._tokens.clear()
            self._current_token = None

    def _auth_error(self, headers: Mapping[str, str]) -> HttpReply | None:
        raw = headers.get("authorization", "")
        if not raw.startswith("Bearer ") or not raw[7:].strip():
            return _error(400, 99991661, "Missing access token for authorization.")
        with self._lock:
            expiry = self._tokens.get(raw[7:].strip())
        if expiry is None or expiry <= time.time():
            return _error(400, 99991663, "Invalid access token for authorization.")
        return None

    # -- API --------------------------------------------------------------------------------
    def handle_api(
        self,
        method: str,
        path: str,
        query: Mapping[str, str],
        headers: Mapping[str, str],
        body: bytes,
    ) -> HttpReply | None:
        if not path.startswith("/open-apis/"):
            return None
        data = parse_json_body(body)
        reply = self._api(method, path, query, headers, data)
        self._record(method, path, query, data, reply)
        return reply

    def _api(
        self,
        method: str,
        path: str,
        query: Mapping[str, str],
        headers: Mapping[str, str],
        data: Any,
    ) -> HttpReply:
        if path == TOKEN_PATH:
            if method != "POST":
                return _error(404, 404, "404 page not found")
            return self._tenant_token(data)
        for route_method, pattern, handler in self._routes:
            match = pattern.match(path)
            if match is None or route_method != method:
                continue
            problem = self._auth_error(headers)
            if problem is not None:
                return problem
            if method in ("POST", "PUT", "PATCH") and not isinstance(data, Mapping):
                return _error(400, 99992402, "field validation failed: the body must be JSON")
            return handler(query, data if isinstance(data, Mapping) else {}, *match.groups())
        return _error(404, 404, "404 page not found")

    # -- messages --------------------------------------------------------------------------
    def _message_data(self, message: Mapping[str, Any]) -> dict[str, Any]:
        out = {
            "message_id": message["message_id"],
            "msg_type": message["msg_type"],
            "create_time": message["create_time"],
            "update_time": message.get("update_time", message["create_time"]),
            "deleted": bool(message.get("deleted")),
            "updated": bool(message.get("updated")),
            "chat_id": message["chat_id"],
            "sender": {
                "id": self.app_id,
                "id_type": "app_id",
                "sender_type": "app",
                "tenant_key": self.tenant_key,
            },
            "body": {"content": message["content"]},
        }
        if message.get("parent_id"):
            out["parent_id"] = message["parent_id"]
            out["root_id"] = message.get("root_id") or message["parent_id"]
        return out

    def _post_message(
        self, chat_id: str, msg_type: Any, content: Any, parent: str | None
    ) -> HttpReply:
        if not isinstance(msg_type, str) or not msg_type:
            return _error(400, 99992402, "field validation failed: msg_type is required")
        if not isinstance(content, str) or not content:
            return _error(400, 99992402, "field validation failed: content is required")
        try:
            parsed = json.loads(content)
        except ValueError:
            return _error(400, 230001, "invalid message content: content is not JSON")
        if not isinstance(parsed, Mapping):
            return _error(400, 230001, "invalid message content: content must be an object")
        size = len(content.encode("utf-8"))
        message_id = "om_" + uuid.uuid4().hex
        now_ms = str(int(time.time() * 1000))
        entry: dict[str, Any]
        with self._lock:
            if msg_type == "interactive":
                if size > MAX_CARD_BYTES:
                    return _error(400, 230025, "card content exceeds 30 KB")
                if parsed.get("type") == "card":
                    card_ref = parsed.get("data")
                    card_id = card_ref.get("card_id") if isinstance(card_ref, Mapping) else None
                    card = self._cards.get(str(card_id)) if card_id else None
                    if card is None or card.get("source") != "cardkit":
                        return _error(400, 230099, "Failed to create card content, ext=200740")
                    if card.get("messageId"):
                        return _error(
                            400, 230099, "Failed to create card content: card entity already sent"
                        )
                    card["messageId"] = message_id
                    key = str(card_id)
                elif parsed.get("type") == "template":
                    return _error(400, 230099, "template cards are not emulated")
                else:
                    if parsed.get("schema") not in (None, "2.0") or not _elements(parsed):
                        return _error(400, 230099, "Failed to create card content, ext=200621")
                    key = message_id
                    self._put_card(
                        key,
                        {
                            "id": key,
                            "source": "message",
                            "json": dict(parsed),
                            "kind": _classify(parsed),
                            "messageId": message_id,
                            "streaming": False,
                            "updates": 0,
                            "createdAt": time.time(),
                        },
                    )
                self._message_card[message_id] = key
                entry = {"kind": "card", "from": "bot", "card": key, "msgId": message_id}
            else:
                if size > MAX_TEXT_BYTES:
                    return _error(400, 230025, "message content exceeds 150 KB")
                if msg_type == "text":
                    text = str(parsed.get("text", ""))
                elif msg_type == "post":
                    text = _post_text(parsed)
                else:
                    text = f"[{msg_type}]"
                entry = {
                    "kind": "message",
                    "from": "bot",
                    "format": "markdown" if msg_type == "post" else "text",
                    "text": text,
                    "msgId": message_id,
                }
            message = {
                "message_id": message_id,
                "chat_id": chat_id,
                "msg_type": msg_type,
                "content": content,
                "create_time": now_ms,
                "from": "bot",
                "parent_id": parent,
            }
            self._remember_message(message)
            self._add_timeline(entry)
            data = self._message_data(message)
        return _ok(data)

    def _remember_message(self, message: dict[str, Any]) -> None:
        self._messages[message["message_id"]] = message
        while len(self._messages) > MAX_CARDS:
            old, _ = self._messages.popitem(last=False)
            self._message_card.pop(old, None)
            self._reactions.pop(old, None)
            self._pins.pop(old, None)

    def _create_message(self, query: Mapping[str, str], data: Mapping[str, Any]) -> HttpReply:
        id_type = query.get("receive_id_type")
        if id_type not in _RECEIVE_ID_TYPES:
            return _error(400, 99992402, "field validation failed: receive_id_type")
        receive_id = data.get("receive_id")
        if not isinstance(receive_id, str) or not receive_id:
            return _error(400, 99992402, "field validation failed: receive_id is required")
        known = (id_type == "chat_id" and receive_id == self.chat_id) or (
            id_type == "open_id" and receive_id == self.user_open_id
        )
        if not known:
            return _error(400, 230002, "The bot is not in the chat or the user is unknown.")
        return self._post_message(self.chat_id, data.get("msg_type"), data.get("content"), None)

    def _reply(self, query: Mapping[str, str], data: Mapping[str, Any], msg_id: str) -> HttpReply:
        with self._lock:
            parent = self._messages.get(msg_id)
        if parent is None or parent.get("deleted"):
            return _error(400, 230011, "The message was not found or was recalled.")
        return self._post_message(
            str(parent["chat_id"]), data.get("msg_type"), data.get("content"), msg_id
        )

    def _patch_message(
        self, query: Mapping[str, str], data: Mapping[str, Any], msg_id: str
    ) -> HttpReply:
        content = data.get("content")
        if not isinstance(content, str) or not content:
            return _error(400, 99992402, "field validation failed: content is required")
        if len(content.encode("utf-8")) > MAX_CARD_BYTES:
            return _error(400, 230025, "card content exceeds 30 KB")
        try:
            card_json = json.loads(content)
        except ValueError:
            return _error(400, 230001, "invalid message content: content is not JSON")
        with self._lock:
            message = self._messages.get(msg_id)
            if message is None:
                return _error(400, 230001, "The message was not found.")
            if message.get("deleted"):
                return _error(400, 230110, "The message was deleted.")
            if message.get("from") != "bot" or message.get("msg_type") != "interactive":
                return _error(400, 230001, "Only the app's interactive messages can be patched.")
            key = self._message_card.get(msg_id)
            card = self._cards.get(key) if key else None
            if card is None:
                return _error(400, 230001, "The message was not found.")
            config = card_json.get("config") if isinstance(card_json, Mapping) else None
            old_config = card["json"].get("config")
            if not (isinstance(config, Mapping) and config.get("update_multi") is True) or not (
                isinstance(old_config, Mapping) and old_config.get("update_multi") is True
            ):
                return _error(400, 230099, "The card must set config.update_multi to true.")
            if not _elements(card_json):
                return _error(400, 230099, "Failed to create card content, ext=200621")
            card["json"] = dict(card_json)
            if card.get("kind") == "custom":
                card["kind"] = _classify(card_json)
            card["updates"] += 1
            message["content"] = content
            message["updated"] = True
            message["update_time"] = str(int(time.time() * 1000))
            self._touch()
        return _ok({})

    def _delete_message(
        self, query: Mapping[str, str], data: Mapping[str, Any], msg_id: str
    ) -> HttpReply:
        with self._lock:
            message = self._messages.get(msg_id)
            if message is None or message.get("deleted"):
                return _error(400, 230011, "The message was not found or was already recalled.")
            if message.get("from") != "bot":
                return _error(400, 230027, "The app can only recall its own messages.")
            message["deleted"] = True
            key = self._message_card.get(msg_id)
            if key is not None and key in self._cards:
                self._cards[key]["deleted"] = True
            for entry in self._timeline:
                if entry.get("msgId") == msg_id:
                    entry["deleted"] = True
            self._touch()
        return _ok({})

    # -- reactions and pins ---------------------------------------------------------------
    def _add_reaction(
        self, query: Mapping[str, str], data: Mapping[str, Any], msg_id: str
    ) -> HttpReply:
        reaction_type = data.get("reaction_type")
        emoji = reaction_type.get("emoji_type") if isinstance(reaction_type, Mapping) else None
        if not isinstance(emoji, str) or not _EMOJI_RE.match(emoji):
            return _error(400, 231001, "reaction type is invalid")
        with self._lock:
            if msg_id not in self._messages:
                return _error(400, 231003, "The message is not found.")
            reaction = {
                "reaction_id": "rc_" + uuid.uuid4().hex[:20],
                "operator": {"operator_id": self.app_id, "operator_type": "app"},
                "action_time": str(int(time.time() * 1000)),
                "reaction_type": {"emoji_type": emoji},
            }
            self._reactions.setdefault(msg_id, []).append(reaction)
            self._touch()
        return _ok(copy.deepcopy(reaction))

    def _list_reactions(
        self, query: Mapping[str, str], data: Mapping[str, Any], msg_id: str
    ) -> HttpReply:
        with self._lock:
            if msg_id not in self._messages:
                return _error(400, 231003, "The message is not found.")
            items = copy.deepcopy(self._reactions.get(msg_id, []))
        wanted = query.get("reaction_type")
        if wanted:
            items = [i for i in items if i["reaction_type"]["emoji_type"] == wanted]
        try:
            size = max(1, min(50, int(query.get("page_size") or 20)))
        except ValueError:
            return _error(400, 99992402, "field validation failed: page_size")
        try:
            start = int(query.get("page_token") or 0)
        except ValueError:
            return _error(400, 99992402, "field validation failed: page_token")
        page = items[start : start + size]
        more = start + size < len(items)
        result: dict[str, Any] = {"items": page, "has_more": more}
        if more:
            result["page_token"] = str(start + size)
        return _ok(result)

    def _delete_reaction(
        self, query: Mapping[str, str], data: Mapping[str, Any], msg_id: str, reaction_id: str
    ) -> HttpReply:
        with self._lock:
            items = self._reactions.get(msg_id, [])
            found = next((r for r in items if r["reaction_id"] == reaction_id), None)
            if found is None:
                return _error(400, 231003, "The reaction is not found.")
            items.remove(found)
            self._touch()
        return _ok(copy.deepcopy(found))

    def _pin(self, query: Mapping[str, str], data: Mapping[str, Any]) -> HttpReply:
        msg_id = data.get("message_id")
        with self._lock:
            message = self._messages.get(msg_id) if isinstance(msg_id, str) else None
            if message is None or message.get("deleted"):
                return _error(400, 230001, "The message is not found.")
            pin = {
                "message_id": msg_id,
                "chat_id": message["chat_id"],
                "operator_id": self.app_id,
                "operator_id_type": "app_id",
                "create_time": str(int(time.time() * 1000)),
            }
            self._pins[str(msg_id)] = pin
            self._set_flag(str(msg_id), "pinned", True)
        return _ok({"pin": dict(pin)})

    def _unpin(self, query: Mapping[str, str], data: Mapping[str, Any], msg_id: str) -> HttpReply:
        with self._lock:
            if self._pins.pop(msg_id, None) is None:
                return _error(400, 230001, "The message is not pinned.")
            self._set_flag(msg_id, "pinned", False)
        return _ok({})

    def _set_flag(self, msg_id: str, flag: str, value: bool) -> None:
        key = self._message_card.get(msg_id)
        if key is not None and key in self._cards:
            self._cards[key][flag] = value
        for entry in self._timeline:
            if entry.get("msgId") == msg_id:
                entry[flag] = value
        self._touch()

    # -- CardKit ------------------------------------------------------------------------------
    def _create_card(self, query: Mapping[str, str], data: Mapping[str, Any]) -> HttpReply:
        if data.get("type") != "card_json":
            return _error(400, 10002, "type: only card_json is emulated")
        card_json, problem = _parse_card_json(data.get("data"))
        if card_json is None:
            return problem or _error(400, 10002, "data is not valid card JSON")
        card_id = "7" + "".join(secrets.choice("0123456789") for _ in range(18))
        config = card_json.get("config")
        with self._lock:
            self._put_card(
                card_id,
                {
                    "id": card_id,
                    "source": "cardkit",
                    "json": card_json,
                    "kind": _classify(card_json),
                    "messageId": None,
                    "streaming": isinstance(config, Mapping)
                    and config.get("streaming_mode") is True,
                    "sequence": 0,
                    "uuids": [],
                    "updates": 0,
                    "createdAt": time.time(),
                },
            )
        return _ok({"card_id": card_id})

    def _cardkit_write(
        self,
        card_id: str,
        data: Mapping[str, Any],
        apply: Callable[[dict[str, Any]], HttpReply | None],
    ) -> HttpReply:
        sequence = data.get("sequence")
        if isinstance(sequence, bool) or not isinstance(sequence, int):
            return _error(400, 99992402, "field validation failed: sequence is required")
        if not 1 <= sequence <= MAX_SEQUENCE:
            return _error(400, 99992402, "field validation failed: sequence out of range")
        op_uuid = data.get("uuid")
        if op_uuid is not None and (not isinstance(op_uuid, str) or len(op_uuid) > 64):
            return _error(400, 99992402, "field validation failed: uuid")
        with self._lock:
            card = self._cards.get(card_id)
            if card is None or card.get("source") != "cardkit":
                return _error(400, 200740, "card entity not found")
            if op_uuid and op_uuid in card["uuids"]:
                return _ok({})  # an idempotent replay of a write already applied
            if sequence <= card["sequence"]:
                return _error(400, 300317, "sequence number compare failed")
            problem = apply(card)
            if problem is not None:
                return problem
            card["sequence"] = sequence
            if op_uuid:
                card["uuids"].append(op_uuid)
                del card["uuids"][:-100]
            card["updates"] += 1
            self._touch()
        return _ok({})

    def _stream_element(
        self, query: Mapping[str, str], data: Mapping[str, Any], card_id: str, element_id: str
    ) -> HttpReply:
        content = data.get("content")
        if not isinstance(content, str):
            return _error(400, 99992402, "field validation failed: content is required")
        if len(content) > MAX_STREAM_CHARS:
            return _error(400, 99992402, "field validation failed: content exceeds 100000 chars")

        def apply(card: dict[str, Any]) -> HttpReply | None:
            if not card.get("streaming"):
                return _error(400, 300309, "streaming mode is closed")
            element = next(
                (e for e in _walk(_elements(card["json"])) if e.get("element_id") == element_id),
                None,
            )
            if element is None:
                return _error(400, 300301, f"element {element_id} not found")
            if element.get("tag") not in ("markdown", "plain_text"):
                return _error(400, 300310, "only markdown and plain_text elements stream")
            element["content"] = content
            return None

        return self._cardkit_write(card_id, data, apply)

    def _card_settings(
        self, query: Mapping[str, str], data: Mapping[str, Any], card_id: str
    ) -> HttpReply:
        raw = data.get("settings")
        try:
            settings = json.loads(raw) if isinstance(raw, str) else None
        except ValueError:
            settings = None
        if not isinstance(settings, Mapping):
            return _error(400, 99992402, "field validation failed: settings must be JSON text")
        config = settings.get("config")

        def apply(card: dict[str, Any]) -> HttpReply | None:
            if isinstance(config, Mapping):
                card["json"].setdefault("config", {}).update(config)
                if "streaming_mode" in config:
                    card["streaming"] = config["streaming_mode"] is True
            return None

        return self._cardkit_write(card_id, data, apply)

    def _update_card(
        self, query: Mapping[str, str], data: Mapping[str, Any], card_id: str
    ) -> HttpReply:
        content = data.get("card")
        if not isinstance(content, Mapping) or content.get("type") != "card_json":
            return _error(400, 99992402, "field validation failed: card.type must be card_json")
        card_json, problem = _parse_card_json(content.get("data"))
        if card_json is None:
            return problem or _error(400, 10002, "data is not valid card JSON")

        def apply(card: dict[str, Any]) -> HttpReply | None:
            config = card_json.get("config")
            old_config = card["json"].get("config")
            if isinstance(old_config, Mapping) and old_config.get("update_multi") is False:
                return _error(400, 300302, "the card does not allow updates (update_multi)")
            card["json"] = card_json
            card["streaming"] = isinstance(config, Mapping) and config.get("streaming_mode") is True
            return None

        return self._cardkit_write(card_id, data, apply)

    # -- visible state --------------------------------------------------------------------
    def extra_state(self) -> dict[str, Any]:
        return {
            "reactions": {
                msg_id: [r["reaction_type"]["emoji_type"] for r in items]
                for msg_id, items in self._reactions.items()
                if items
            },
            "views": {key: feishu_card_view(card) for key, card in self._cards.items()},
        }

    def reactions(self, msg_id: str) -> list[str]:
        """The emoji types currently on a message."""
        with self._lock:
            return [r["reaction_type"]["emoji_type"] for r in self._reactions.get(msg_id, [])]

    def view(self, card_id: str) -> dict[str, Any] | None:
        """The page's view of one card (None when unknown)."""
        with self._lock:
            card = self._cards.get(card_id)
            return feishu_card_view(card) if card is not None else None

    # -- user input -> callbacks ----------------------------------------------------------
    def _envelope(self, event_type: str, event: Mapping[str, Any]) -> dict[str, Any]:
        return {
            "schema": "2.0",
            "header": {
                "event_id": uuid.uuid4().hex,
                "token": self.verification_token,
                "create_time": str(int(time.time() * 1_000_000)),
                "event_type": event_type,
                "tenant_key": self.tenant_key,
                "app_id": self.app_id,
            },
            "event": dict(event),
        }

    def seal(self, payload: Mapping[str, Any]) -> tuple[dict[str, str], bytes]:
        """Headers and body of a callback as Feishu sends it (encrypted and signed when an
        encrypt key is set)."""
        plain = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        timestamp = str(int(time.time()))
        nonce = secrets.token_hex(8)
        headers = {
            "Content-Type": "application/json; charset=utf-8",
            "X-Lark-Request-Timestamp": timestamp,
            "X-Lark-Request-Nonce": nonce,
        }
        if not self.encrypt_key:
            return headers, plain
        body = json.dumps({"encrypt": feishu_encrypt(self.encrypt_key, plain)}).encode("utf-8")
        headers["X-Lark-Signature"] = feishu_signature(timestamp, nonce, self.encrypt_key, body)
        return headers, body

    def _operator(self, open_id: str | None) -> dict[str, Any]:
        who = open_id or self.user_open_id
        return {
            "open_id": who,
            "user_id": "u_" + who[-8:],
            "union_id": "on_" + who[-8:],
            "tenant_key": self.tenant_key,
        }

    def send_user_message(self, text: str) -> tuple[str, CallbackDelivery]:
        """The person types ``text``: an ``im.message.receive_v1`` event goes to the SDK."""
        msg_id = "om_" + uuid.uuid4().hex
        now_ms = str(int(time.time() * 1000))
        content = json.dumps({"text": text}, ensure_ascii=False)
        with self._lock:
            self._remember_message(
                {
                    "message_id": msg_id,
                    "chat_id": self.chat_id,
                    "msg_type": "text",
                    "content": content,
                    "create_time": now_ms,
                    "from": "user",
                }
            )
            self._add_timeline(
                {"kind": "message", "from": "user", "format": "text", "text": text, "msgId": msg_id}
            )
        event = {
            "sender": {
                "sender_id": {
                    "open_id": self.user_open_id,
                    "user_id": "u_" + self.user_open_id[-8:],
                    "union_id": "on_" + self.user_open_id[-8:],
                },
                "sender_type": "user",
                "tenant_key": self.tenant_key,
            },
            "message": {
                "message_id": msg_id,
                "create_time": now_ms,
                "update_time": now_ms,
                "chat_id": self.chat_id,
                "chat_type": "p2p",
                "message_type": "text",
                "content": content,
            },
        }
        headers, body = self.seal(self._envelope("im.message.receive_v1", event))
        return msg_id, self._send_callback("event", self.events_url, headers, body)

    def card_action(
        self,
        card_id: str,
        action: str,
        form: Mapping[str, Any] | None = None,
        *,
        user_id: str | None = None,
    ) -> CallbackDelivery:
        """The person clicks a button on a card: ``stop``, ``submit`` (with ``form``:
        answer key -> option value or label, or a list for multi-select; ``<key>_other``
        -> text) or ``cancel``. A ``card.action.trigger`` callback goes to the SDK; the
        toast it answers is shown on the card."""
        with self._lock:
            card = self._cards.get(card_id)
            if card is None:
                raise KeyError(card_id)
            message_id = card.get("messageId")
            card_json = copy.deepcopy(card["json"])
        if not message_id:
            raise ValueError(f"card {card_id} was never sent to the chat")
        wanted = _BUTTON_ACTIONS.get(action, action)
        elements = _elements(card_json)
        found = _find_button(elements, wanted)
        if found is None:
            raise ValueError(f"action: the card has no {action!r} button")
        button, value, form_element = found
        action_body: dict[str, Any] = {
            "value": value,
            "tag": "button",
            "timezone": "Asia/Shanghai",
        }
        if button.get("name"):
            action_body["name"] = button["name"]
        if form_element is not None and button.get("form_action_type") == "submit":
            action_body["form_value"] = _form_value(form_element, form or {})
        event = {
            "operator": self._operator(user_id),
            "token": "c-" + secrets.token_hex(12),
            "action": action_body,
            "host": "im_message",
            "context": {"open_message_id": message_id, "open_chat_id": self.chat_id},
        }
        headers, body = self.seal(self._envelope("card.action.trigger", event))
        result = self._send_callback("card", self.card_url, headers, body)
        self._apply_card_response(card_id, result)
        return result

    def _apply_card_response(self, card_id: str, result: CallbackDelivery) -> None:
        try:
            answer = json.loads(result.body) if result.body else None
        except ValueError:
            return
        if not isinstance(answer, Mapping):
            return
        toast = answer.get("toast")
        if isinstance(toast, Mapping) and toast.get("content"):
            self._set_toast(card_id, str(toast.get("type", "info")), str(toast["content"]))
        new_card = answer.get("card")
        if isinstance(new_card, Mapping) and new_card.get("type") == "raw":
            raw = new_card.get("data")
            if isinstance(raw, Mapping) and _elements(raw):
                with self._lock:
                    card = self._cards.get(card_id)
                    if card is not None:
                        card["json"] = dict(raw)
                        card["updates"] += 1
                        self._touch()


def _parse_card_json(raw: Any) -> tuple[dict[str, Any] | None, HttpReply | None]:
    if not isinstance(raw, str) or not raw:
        return None, _error(400, 99992402, "field validation failed: data is required")
    if len(raw.encode("utf-8")) > MAX_CARD_BYTES:
        return None, _error(400, 200860, "card content exceeds 30 KB")
    try:
        card_json = json.loads(raw)
    except ValueError:
        return None, _error(400, 10002, "data is not valid card JSON")
    if not isinstance(card_json, dict):
        return None, _error(400, 10002, "data is not valid card JSON")
    if card_json.get("schema") != "2.0":
        return None, _error(400, 300303, "card JSON must be schema 2.0")
    return card_json, None


def _find_button(
    elements: list[Any], wanted: str
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any] | None] | None:
    for element in elements:
        if not isinstance(element, dict):
            continue
        if element.get("tag") == "form":
            for inner in _walk(element.get("elements")):
                value = _button_value(inner) if inner.get("tag") == "button" else None
                if value is not None and value.get("action") == wanted:
                    return inner, value, element
            continue
        if element.get("tag") == "button":
            value = _button_value(element)
            if value is not None and value.get("action") == wanted:
                return element, value, None
        nested = _find_button(
            [*(element.get("elements") or []), *(element.get("columns") or [])], wanted
        )
        if nested is not None:
            return nested
    return None


def _form_value(form: Mapping[str, Any], given: Mapping[str, Any]) -> dict[str, Any]:
    """``form_value`` as Feishu fills it from the form's current inputs.

    Select values may be given as option values or labels (the emulator maps labels to
    values, as the person picks by label); a value that is neither is a ``ValueError``.
    """
    out: dict[str, Any] = {}
    for element in _walk(form.get("elements")):
        tag = element.get("tag")
        name = element.get("name")
        if not isinstance(name, str) or not name:
            continue
        if tag in ("select_static", "multi_select_static"):
            options = [o for o in element.get("options", []) if isinstance(o, Mapping)]
            raw = given.get(name)
            if tag == "multi_select_static":
                items = raw if isinstance(raw, list) else ([] if raw in (None, "") else [raw])
                out[name] = [_pick_option(options, item, name) for item in items]
            else:
                if isinstance(raw, list):
                    raw = raw[0] if raw else None
                out[name] = "" if raw in (None, "") else _pick_option(options, raw, name)
        elif tag == "input":
            raw = given.get(name)
            out[name] = "" if raw is None else str(raw)
    return out


def _pick_option(options: list[Mapping[str, Any]], raw: Any, name: str) -> str:
    text = str(raw)
    for option in options:
        if str(option.get("value", "")) == text:
            return text
    for option in options:
        if _text(option.get("text")) == text:
            return str(option.get("value", ""))
    raise ValueError(f"form.{name}: {text!r} is not an option")


def _post_text(content: Mapping[str, Any]) -> str:
    blocks = content.get("content")
    if not isinstance(blocks, list):
        for value in content.values():
            if isinstance(value, Mapping):
                return _post_text(value)
        return ""
    lines = []
    for line in blocks:
        if isinstance(line, list):
            lines.append(
                "".join(
                    str(item.get("text", ""))
                    for item in line
                    if isinstance(item, Mapping) and item.get("tag") in ("text", "a", "md")
                )
            )
    title = content.get("title")
    text = "\n".join(lines).strip()
    return f"**{title}**\n{text}" if title else text

"""The emulated Feishu Open API: tenant tokens, IM messages, reactions and pins.

* ``POST /open-apis/auth/v3/tenant_access_token/internal`` issues tenant tokens (the same
  token again while more than 30 minutes remain); every other call needs
  ``Authorization: Bearer <token>`` (else code 99991661 / 99991663);
* ``POST /open-apis/im/v1/messages?receive_id_type=...``, ``.../{id}/reply``,
  ``PATCH`` / ``DELETE /open-apis/im/v1/messages/{id}``: text, post, image and
  file (of the bot's uploads, `FeishuResources`) and interactive messages (raw card
  JSON or a CardKit entity ``{"type":"card","data":{"card_id"}}``, sent at most once);
  PATCH needs ``config.update_multi`` on an interactive message;
* ``POST|GET /open-apis/im/v1/messages/{id}/reactions``, ``DELETE .../{reaction_id}``;
  ``POST /open-apis/im/v1/pins``, ``DELETE /open-apis/im/v1/pins/{id}``,
  ``GET /open-apis/im/v1/pins?chat_id=...`` (newest pin first, paged);
* CardKit paths are answered by `FeishuCardKit`;
* ``POST /callback/ws/endpoint`` (``AppID``/``AppSecret``) answers a long-connection URL
  of the gateway (`channelkit.playground.feishu.gateway`).
"""

from __future__ import annotations

import copy
import json
import re
import time
import uuid
from collections.abc import Callable, Mapping
from functools import cached_property
from typing import Any

from channelkit.playground.emulator import HttpReply
from channelkit.playground.feishu.cardkit import MAX_CARD_BYTES, FeishuCardKit
from channelkit.playground.feishu.chat import card_elements, classify, error, ok
from channelkit.playground.feishu.resources import FeishuResources

__all__ = [
    "MAX_TEXT_BYTES",
    "TOKEN_LIFETIME",
    "TOKEN_PATH",
    "TOKEN_RENEW_BELOW",
    "FeishuEmulator",
]

TOKEN_PATH = "/open-apis/auth/v3/tenant_access_token/internal"
#: The long connection's endpoint call.
ENDPOINT_PATH = "/callback/ws/endpoint"
TOKEN_LIFETIME = 7200
#: A token with less than this many seconds left is replaced on the next request.
TOKEN_RENEW_BELOW = 1800
MAX_TEXT_BYTES = 150 * 1024
_RECEIVE_ID_TYPES = ("open_id", "user_id", "union_id", "email", "chat_id")
_EMOJI_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")

Handler = Callable[..., HttpReply]


class FeishuEmulator(FeishuResources, FeishuCardKit):
    """The emulated Feishu tenant for one app (bot), one person and one p2p chat.

    ``events_url`` receives message events and ``card_url`` card actions (the app's
    event and card callback URLs). ``encrypt_key`` encrypts and signs both (None: plain
    JSON carrying only the verification token). ``deliver`` replaces the HTTP POST to the
    SDK. ``ingress``: ``"websocket"`` (user input as frames on the bot's long connection,
    waiting for it to connect), ``"http"`` (callbacks to the URLs) or None (the long
    connection while the bot holds one, HTTP otherwise).
    """

    @cached_property
    def _routes(self) -> list[tuple[str, re.Pattern[str], Handler]]:
        return [
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
            (
                "GET",
                re.compile(r"^/open-apis/im/v1/messages/([^/]+)/resources/([^/]+)$"),
                self._get_resource,
            ),
            ("POST", re.compile(r"^/open-apis/im/v1/pins$"), self._pin),
            ("DELETE", re.compile(r"^/open-apis/im/v1/pins/([^/]+)$"), self._unpin),
            ("GET", re.compile(r"^/open-apis/im/v1/pins$"), self._list_pins),
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

    def close(self) -> None:
        """Stop the long-connection gateway."""
        self.gateway.close()

    # -- tokens ---------------------------------------------------------------------------
    def _tenant_token(self, data: Any) -> HttpReply:
        if not isinstance(data, Mapping) or not data.get("app_id") or not data.get("app_secret"):
            return error(400, 99992402, "field validation failed: app_id and app_secret")
        if data.get("app_id") != self.app_id or data.get("app_secret") != self.app_secret:
            return error(400, 10014, "app secret invalid")
        token, left = self._issue_token("t-", 16, TOKEN_LIFETIME, renew_below=TOKEN_RENEW_BELOW)
        return HttpReply(
            200,
            {"code": 0, "msg": "ok", "tenant_access_token": token, "expire": int(left)},
        )

    def _auth_error(self, headers: Mapping[str, str]) -> HttpReply | None:
        raw = headers.get("authorization", "")
        if not raw.startswith("Bearer ") or not raw[7:].strip():
            return error(400, 99991661, "Missing access token for authorization.")
        if not self._token_valid(raw[7:].strip()):
            return error(400, 99991663, "Invalid access token for authorization.")
        return None

    # -- API --------------------------------------------------------------------------------
    def handle_json_api(
        self,
        method: str,
        path: str,
        query: Mapping[str, str],
        headers: Mapping[str, str],
        data: Any,
    ) -> HttpReply | None:
        if path == ENDPOINT_PATH and method == "POST":
            status, answer = self.gateway.endpoint(data)
            return HttpReply(status, answer)
        if not path.startswith("/open-apis/"):
            return None
        if path == TOKEN_PATH:
            if method != "POST":
                return error(404, 404, "404 page not found")
            return self._tenant_token(data)
        for route_method, pattern, handler in self._routes:
            match = pattern.match(path)
            if match is None or route_method != method:
                continue
            problem = self._auth_error(headers)
            if problem is not None:
                return problem
            if method in ("POST", "PUT", "PATCH") and not isinstance(data, Mapping):
                return error(400, 99992402, "field validation failed: the body must be JSON")
            return handler(query, data if isinstance(data, Mapping) else {}, *match.groups())
        return error(404, 404, "404 page not found")

    # -- messages --------------------------------------------------------------------------
    def _post_message(
        self,
        chat_id: str,
        msg_type: Any,
        content: Any,
        parent: str | None,
        thread_id: str | None = None,
    ) -> HttpReply:
        if not isinstance(msg_type, str) or not msg_type:
            return error(400, 99992402, "field validation failed: msg_type is required")
        if not isinstance(content, str) or not content:
            return error(400, 99992402, "field validation failed: content is required")
        try:
            parsed = json.loads(content)
        except ValueError:
            return error(400, 230001, "invalid message content: content is not JSON")
        if not isinstance(parsed, Mapping):
            return error(400, 230001, "invalid message content: content must be an object")
        size = len(content.encode("utf-8"))
        message_id = "om_" + uuid.uuid4().hex
        now_ms = str(int(time.time() * 1000))
        entry: dict[str, Any]
        with self._lock:
            if msg_type == "interactive":
                if size > MAX_CARD_BYTES:
                    return error(400, 230025, "card content exceeds 30 KB")
                if parsed.get("type") == "card":
                    card_ref = parsed.get("data")
                    card_id = card_ref.get("card_id") if isinstance(card_ref, Mapping) else None
                    card = self._cards.get(str(card_id)) if card_id else None
                    if card is None or card.get("source") != "cardkit":
                        return error(400, 230099, "Failed to create card content, ext=200740")
                    if card.get("messageId"):
                        return error(
                            400, 230099, "Failed to create card content: card entity already sent"
                        )
                    card["messageId"] = message_id
                    key = str(card_id)
                elif parsed.get("type") == "template":
                    return error(400, 230099, "template cards are not emulated")
                else:
                    if parsed.get("schema") not in (None, "2.0") or not card_elements(parsed):
                        return error(400, 230099, "Failed to create card content, ext=200621")
                    key = message_id
                    self._put_card(
                        key,
                        {
                            "id": key,
                            "source": "message",
                            "json": dict(parsed),
                            "kind": classify(parsed),
                            "messageId": message_id,
                            "streaming": False,
                            "updates": 0,
                            "createdAt": time.time(),
                        },
                    )
                self._message_card[message_id] = key
                entry = {"kind": "card", "from": "bot", "card": key, "msgId": message_id}
            elif msg_type in ("image", "file"):
                view = self._uploaded_view(msg_type, parsed)
                if view is None:
                    return error(400, 230001, f"invalid message content: unknown {msg_type} key")
                self._put_card(
                    message_id,
                    {
                        "id": message_id,
                        "source": "message",
                        "json": {},
                        "kind": "file",
                        "files": [view],
                        "messageId": message_id,
                        "streaming": False,
                        "updates": 0,
                        "createdAt": time.time(),
                    },
                )
                self._message_card[message_id] = message_id
                entry = {"kind": "card", "from": "bot", "card": message_id, "msgId": message_id}
            else:
                if size > MAX_TEXT_BYTES:
                    return error(400, 230025, "message content exceeds 150 KB")
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
            if thread_id is not None:
                message["thread_id"] = thread_id
                entry["threadId"] = thread_id
            self._remember_message(message)
            self._add_timeline(entry)
            data = self._message_data(message)
        return ok(data)

    def _create_message(self, query: Mapping[str, str], data: Mapping[str, Any]) -> HttpReply:
        id_type = query.get("receive_id_type")
        if id_type not in _RECEIVE_ID_TYPES:
            return error(400, 99992402, "field validation failed: receive_id_type")
        receive_id = data.get("receive_id")
        if not isinstance(receive_id, str) or not receive_id:
            return error(400, 99992402, "field validation failed: receive_id is required")
        known = (id_type == "chat_id" and receive_id == self.chat_id) or (
            id_type == "open_id" and receive_id == self.user_open_id
        )
        if not known and not self.knows(receive_id):  # a group / person who wrote
            return error(400, 230002, "The bot is not in the chat or the user is unknown.")
        chat = receive_id if not known and id_type == "chat_id" else self.chat_id
        return self._post_message(chat, data.get("msg_type"), data.get("content"), None)

    def _reply(self, query: Mapping[str, str], data: Mapping[str, Any], msg_id: str) -> HttpReply:
        with self._lock:
            parent = self._messages.get(msg_id)
        if parent is None or parent.get("deleted"):
            return error(400, 230011, "The message was not found or was recalled.")
        in_thread = data.get("reply_in_thread", False)
        if not isinstance(in_thread, bool):
            return error(400, 99992402, "field validation failed: reply_in_thread")
        # a reply to a message of a thread stays in it; reply_in_thread starts one
        thread_id = parent.get("thread_id") or ("omt_" + msg_id[3:] if in_thread else None)
        return self._post_message(
            str(parent["chat_id"]), data.get("msg_type"), data.get("content"), msg_id, thread_id
        )

    def _patch_message(
        self, query: Mapping[str, str], data: Mapping[str, Any], msg_id: str
    ) -> HttpReply:
        content = data.get("content")
        if not isinstance(content, str) or not content:
            return error(400, 99992402, "field validation failed: content is required")
        if len(content.encode("utf-8")) > MAX_CARD_BYTES:
            return error(400, 230025, "card content exceeds 30 KB")
        try:
            card_json = json.loads(content)
        except ValueError:
            return error(400, 230001, "invalid message content: content is not JSON")
        with self._lock:
            message = self._messages.get(msg_id)
            if message is None:
                return error(400, 230001, "The message was not found.")
            if message.get("deleted"):
                return error(400, 230110, "The message was deleted.")
            if message.get("from") != "bot" or message.get("msg_type") != "interactive":
                return error(400, 230001, "Only the app's interactive messages can be patched.")
            key = self._message_card.get(msg_id)
            card = self._cards.get(key) if key else None
            if card is None:
                return error(400, 230001, "The message was not found.")
            config = card_json.get("config") if isinstance(card_json, Mapping) else None
            old_config = card["json"].get("config")
            if not (isinstance(config, Mapping) and config.get("update_multi") is True) or not (
                isinstance(old_config, Mapping) and old_config.get("update_multi") is True
            ):
                return error(400, 230099, "The card must set config.update_multi to true.")
            if not card_elements(card_json):
                return error(400, 230099, "Failed to create card content, ext=200621")
            card["json"] = dict(card_json)
            if card.get("kind") == "custom":
                card["kind"] = classify(card_json)
            card["updates"] += 1
            message["content"] = content
            message["updated"] = True
            message["update_time"] = str(int(time.time() * 1000))
            self._touch()
        return ok({})

    def _delete_message(
        self, query: Mapping[str, str], data: Mapping[str, Any], msg_id: str
    ) -> HttpReply:
        with self._lock:
            message = self._messages.get(msg_id)
            if message is None or message.get("deleted"):
                return error(400, 230011, "The message was not found or was already recalled.")
            if message.get("from") != "bot":
                return error(400, 230027, "The app can only recall its own messages.")
            message["deleted"] = True
            key = self._message_card.get(msg_id)
            if key is not None and key in self._cards:
                self._cards[key]["deleted"] = True
            for entry in self._timeline:
                if entry.get("msgId") == msg_id:
                    entry["deleted"] = True
            self._touch()
        return ok({})

    # -- reactions and pins ---------------------------------------------------------------
    def _add_reaction(
        self, query: Mapping[str, str], data: Mapping[str, Any], msg_id: str
    ) -> HttpReply:
        reaction_type = data.get("reaction_type")
        emoji = reaction_type.get("emoji_type") if isinstance(reaction_type, Mapping) else None
        if not isinstance(emoji, str) or not _EMOJI_RE.match(emoji):
            return error(400, 231001, "reaction type is invalid")
        with self._lock:
            if msg_id not in self._messages:
                return error(400, 231003, "The message is not found.")
            reaction = {
                "reaction_id": "rc_" + uuid.uuid4().hex[:20],
                "operator": {"operator_id": self.app_id, "operator_type": "app"},
                "action_time": str(int(time.time() * 1000)),
                "reaction_type": {"emoji_type": emoji},
            }
            self._reactions.setdefault(msg_id, []).append(reaction)
            self._touch()
        return ok(copy.deepcopy(reaction))

    def _list_reactions(
        self, query: Mapping[str, str], data: Mapping[str, Any], msg_id: str
    ) -> HttpReply:
        with self._lock:
            if msg_id not in self._messages:
                return error(400, 231003, "The message is not found.")
            items = copy.deepcopy(self._reactions.get(msg_id, []))
        wanted = query.get("reaction_type")
        if wanted:
            items = [i for i in items if i["reaction_type"]["emoji_type"] == wanted]
        try:
            size = max(1, min(50, int(query.get("page_size") or 20)))
        except ValueError:
            return error(400, 99992402, "field validation failed: page_size")
        try:
            start = int(query.get("page_token") or 0)
        except ValueError:
            return error(400, 99992402, "field validation failed: page_token")
        page = items[start : start + size]
        more = start + size < len(items)
        result: dict[str, Any] = {"items": page, "has_more": more}
        if more:
            result["page_token"] = str(start + size)
        return ok(result)

    def _delete_reaction(
        self, query: Mapping[str, str], data: Mapping[str, Any], msg_id: str, reaction_id: str
    ) -> HttpReply:
        with self._lock:
            items = self._reactions.get(msg_id, [])
            found = next((r for r in items if r["reaction_id"] == reaction_id), None)
            if found is None:
                return error(400, 231003, "The reaction is not found.")
            items.remove(found)
            self._touch()
        return ok(copy.deepcopy(found))

    def _pin(self, query: Mapping[str, str], data: Mapping[str, Any]) -> HttpReply:
        msg_id = data.get("message_id")
        with self._lock:
            message = self._messages.get(msg_id) if isinstance(msg_id, str) else None
            if message is None or message.get("deleted"):
                return error(400, 230001, "The message is not found.")
            pin = {
                "message_id": msg_id,
                "chat_id": message["chat_id"],
                "operator_id": self.app_id,
                "operator_id_type": "app_id",
                "create_time": str(int(time.time() * 1000)),
            }
            self._pins[str(msg_id)] = pin
            self._set_flag(str(msg_id), "pinned", True)
        return ok({"pin": dict(pin)})

    def _list_pins(self, query: Mapping[str, str], data: Mapping[str, Any]) -> HttpReply:
        chat_id = query.get("chat_id")
        if not chat_id:
            return error(400, 99992402, "field validation failed: chat_id is required")
        if chat_id != self.chat_id:
            return error(400, 232011, "The operator or the bot is not in the chat.")
        try:
            size = max(1, min(50, int(query.get("page_size") or 20)))
            start = int(query.get("page_token") or 0)
        except ValueError:
            return error(400, 99992402, "field validation failed: page_size / page_token")
        with self._lock:
            items = [dict(p) for p in self._pins.values() if p["chat_id"] == chat_id]
        items.reverse()  # newest pin first
        page = items[start : start + size]
        more = start + size < len(items)
        result: dict[str, Any] = {"items": page, "has_more": more}
        if more:
            result["page_token"] = str(start + size)
        return ok(result)

    def _unpin(self, query: Mapping[str, str], data: Mapping[str, Any], msg_id: str) -> HttpReply:
        with self._lock:
            if self._pins.pop(msg_id, None) is None:
                return error(400, 230001, "The message is not pinned.")
            self._set_flag(msg_id, "pinned", False)
        return ok({})


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

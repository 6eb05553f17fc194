"""The emulated Feishu chat: its state, the page's view of cards, the API's reply shapes.

`FeishuChat` holds the app's identity, the messages, reactions and pins of the one
p2p chat, and the state the page shows (`FeishuChat.extra_state()`);
`feishu_card_view()` turns a card into the page's platform-neutral view. The
endpoint modules (messages in `emulator`, `cardkit`, `callbacks`) build
on it.
"""

from __future__ import annotations

import json
import uuid
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from typing import Any

from channelkit.playground.emulator import MAX_CARDS, Deliver, EmulatorBase, HttpReply
from channelkit.playground.feishu.gateway import FeishuGateway

__all__ = ["FeishuChat", "feishu_card_view"]

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


# --- replies ----------------------------------------------------------------------------------


def error(status: int, code: int, msg: str) -> HttpReply:
    """A Feishu error body (``code``, ``msg`` and a fresh ``log_id``)."""
    return HttpReply(
        status,
        {
            "code": code,
            "msg": msg,
            "error": {"log_id": uuid.uuid4().hex[:24], "troubleshooter": ""},
        },
    )


def ok(data: Any = None) -> HttpReply:
    """A Feishu success body carrying ``data``."""
    return HttpReply(200, {"code": 0, "msg": "success", "data": {} if data is None else data})


# --- card JSON ----------------------------------------------------------------------------------


def walk(elements: Any) -> Iterator[dict[str, Any]]:
    """Every element of a card body, depth first (forms, columns and panels included)."""
    if not isinstance(elements, list):
        return
    for element in elements:
        if not isinstance(element, dict):
            continue
        yield element
        for key in ("elements", "columns"):
            yield from walk(element.get(key))


def card_elements(card: Mapping[str, Any]) -> list[Any]:
    """The top-level elements of a card (schema 2.0 ``body.elements`` or legacy)."""
    body = card.get("body")
    if isinstance(body, Mapping) and isinstance(body.get("elements"), list):
        return list(body["elements"])
    legacy = card.get("elements")
    return list(legacy) if isinstance(legacy, list) else []


def text_of(value: Any) -> str:
    """The text of a plain or ``{"content": ...}`` text value."""
    if isinstance(value, Mapping):
        return str(value.get("content", ""))
    return "" if value is None else str(value)


def button_value(element: Mapping[str, Any]) -> dict[str, Any] | None:
    """The callback value of a button (schema 2.0 behaviors, or the legacy ``value``)."""
    behaviors = element.get("behaviors")
    if isinstance(behaviors, list):
        for behavior in behaviors:
            if isinstance(behavior, Mapping) and behavior.get("type") == "callback":
                value = behavior.get("value")
                return dict(value) if isinstance(value, Mapping) else {"value": value}
    value = element.get("value")
    return dict(value) if isinstance(value, Mapping) else None


def tap_data(value: Mapping[str, Any]) -> str:
    """How the page names a card button's callback value when it taps it (compact JSON)."""
    return json.dumps(dict(value), ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def _link(element: Mapping[str, Any]) -> str | None:
    for behavior in element.get("behaviors") or []:
        if isinstance(behavior, Mapping) and behavior.get("type") == "open_url":
            url = behavior.get("default_url")
            return url if isinstance(url, str) else None
    return None


def presentation_keyboard(elements: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The buttons of a card outside forms, as the page's keyboard (one row): ``data``
    is `tap_data()` of a callback value (None for a link-only button), ``url``."""
    row = []
    for element in elements:
        if element.get("tag") != "button":
            continue
        value = button_value(element)
        row.append(
            {
                "text": text_of(element.get("text")),
                "data": tap_data(value) if value else None,
                "url": _link(element),
            }
        )
    return [row] if row else []


def classify(card: Mapping[str, Any]) -> str:
    """``question`` (has a form), ``status`` (has the streamed content element) or ``custom``."""
    elements = list(walk(card_elements(card)))
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
    title = text_of(header.get("title"))
    elements = list(walk(card_elements(body)))
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
    if kind == "file":  # the bot's image or file message
        view.update({"state": "sent", "content": "", "statusLine": ""})
        view["files"] = [dict(f) for f in card.get("files", ())]
        return view
    buttons = [(e, button_value(e) or {}) for e in elements if e.get("tag") == "button"]
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
        stop = next((e for e, v in buttons if v.get("action") == "ck_stop"), None)
        if state == "running" and stop is not None:
            view["actions"] = ["stop"]
            view["stopLabel"] = text_of(stop.get("text")) or "Stop"  # the card's language
        return view
    if kind == "question":
        form = next((e for e in elements if e.get("tag") == "form"), None)
        if form is not None:
            questions: list[dict[str, Any]] = []
            by_name: dict[str, dict[str, Any]] = {}
            label = ""
            for element in walk(form.get("elements")):
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
                            {"value": str(o.get("value", "")), "text": text_of(o.get("text"))}
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
                            "placeholder": text_of(element.get("placeholder")),
                        }
            submit = next((e for e, v in buttons if v.get("action") == "ck_submit"), None)
            view.update(
                {
                    "state": "pending",
                    "awaitsAnswer": True,
                    "desc": "",
                    "button": text_of(submit.get("text")) if submit else "Submit",
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
    keyboard = presentation_keyboard(elements)  # a presentation's buttons: tap to click
    if keyboard:
        view["keyboard"] = keyboard
        view["actions"] = ["tap"] if any(b["data"] for b in keyboard[0]) else []
    return view


# --- the chat's state -------------------------------------------------------------------------


class FeishuChat(EmulatorBase):
    """The state of the emulated Feishu tenant: one app (bot), one person, one p2p chat.

    See `FeishuEmulator` for the arguments.
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
        ingress: str | None = None,
    ) -> None:
        super().__init__(deliver=deliver)
        if ingress not in (None, "websocket", "http"):
            raise ValueError('ingress: must be "websocket", "http" or None')
        #: how user input reaches the SDK: "websocket", "http", or None (the long
        #: connection while the bot holds one, HTTP callbacks otherwise)
        self.ingress = ingress
        #: the long-connection gateway (its WebSocket server starts with the first
        #: endpoint call)
        self.gateway = FeishuGateway(app_id, app_secret)
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
        self._messages: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._message_card: dict[str, str] = {}  # message id -> card key
        self._reactions: dict[str, list[dict[str, Any]]] = {}
        self._pins: dict[str, dict[str, Any]] = {}
        #: chats and people besides the emulated ones who wrote to the bot (bounded):
        #: the bot may answer there
        self._other_chats: OrderedDict[str, bool] = OrderedDict()

    def met(self, chat_or_open_id: str) -> None:
        """Remember a chat (or person) who wrote to the bot: it may answer there."""
        with self._lock:
            self._other_chats[chat_or_open_id] = True
            self._other_chats.move_to_end(chat_or_open_id)
            while len(self._other_chats) > MAX_CARDS:
                self._other_chats.popitem(last=False)

    def knows(self, chat_or_open_id: str) -> bool:
        """Whether the bot may write to ``chat_or_open_id``."""
        with self._lock:
            return chat_or_open_id in self._other_chats

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
        if message.get("thread_id"):
            out["thread_id"] = message["thread_id"]
        return out

    def _remember_message(self, message: dict[str, Any]) -> None:
        self._messages[message["message_id"]] = message
        while len(self._messages) > MAX_CARDS:
            old, _ = self._messages.popitem(last=False)
            self._message_card.pop(old, None)
            self._reactions.pop(old, None)
            self._pins.pop(old, None)

    def _set_flag(self, msg_id: str, flag: str, value: bool) -> None:
        key = self._message_card.get(msg_id)
        if key is not None and key in self._cards:
            self._cards[key][flag] = value
        for entry in self._timeline:
            if entry.get("msgId") == msg_id:
                entry[flag] = value

    # -- visible state --------------------------------------------------------------------
    def extra_state(self) -> dict[str, Any]:
        return {
            "reactions": {
                msg_id: [r["reaction_type"]["emoji_type"] for r in items]
                for msg_id, items in self._reactions.items()
                if items
            },
            "views": {key: feishu_card_view(card) for key, card in self._cards.items()},
            # how user input reaches the SDK now: "websocket" or "http"
            "ingress": self.ingress or ("websocket" if self.gateway.connected else "http"),
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

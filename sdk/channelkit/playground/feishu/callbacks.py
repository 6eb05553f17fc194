"""User input as Feishu delivers it: message events and card action callbacks.

The person's messages are ``im.message.receive_v1`` events and their clicks
``card.action.trigger`` callbacks (schema 2.0 envelopes carrying the verification token).
When the bot holds a long connection (or the emulator's ``ingress`` is ``"websocket"``)
both are data frames on it, in plain JSON (`gateway`); otherwise events go to
``events_url`` and clicks to ``card_url``, sealed by
`seal()`. The SDK's answer to a card callback (a
toast, a replacement card: the HTTP body, or the ACK's ``data``) is applied to the card.
``GET /_emulator/callbacks`` names each delivery's transport (``websocket`` or ``http``).
"""

from __future__ import annotations

import copy
import json
import secrets
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from channelkit.playground.emulator import CallbackDelivery, Origin
from channelkit.playground.feishu import crypto
from channelkit.playground.feishu.chat import (
    FeishuChat,
    button_value,
    card_elements,
    tap_data,
    text_of,
    walk,
)

__all__ = ["BOT_OPEN_ID", "GROUP_CHAT_ID", "FeishuCallbacks"]

#: the playground bot's ``open_id`` (a mention of it carries this id)
BOT_OPEN_ID = "ou_channelkit_playground_bot"
#: the group a person writes in with ``{"group": true}`` and no ``chatId``
GROUP_CHAT_ID = "oc_playground_group"

_BUTTON_ACTIONS = {"stop": "ck_stop", "submit": "ck_submit", "cancel": "ck_cancel"}


class FeishuCallbacks(FeishuChat):
    """Sends the person's messages and clicks to the SDK as Feishu would."""

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
        return crypto.seal(self.encrypt_key, payload)

    def _operator(self, open_id: str | None) -> dict[str, Any]:
        who = open_id or self.user_open_id
        return {
            "open_id": who,
            "user_id": "u_" + who[-8:],
            "union_id": "on_" + who[-8:],
            "tenant_key": self.tenant_key,
        }

    def send_user_message(
        self,
        text: str,
        *,
        origin: Origin | None = None,
        message_type: str = "text",
        content_of: Callable[[str, str], Mapping[str, Any]] | None = None,
        files: list[dict[str, Any]] | None = None,
    ) -> tuple[str, CallbackDelivery]:
        """The person types ``text``: an ``im.message.receive_v1`` event goes to the SDK.

        ``origin`` (`Origin`): another person (``open_id``), a group (``chat_type``
        ``group``, `GROUP_CHAT_ID` unless a chat is named), a mention of the bot (a
        ``mentions`` entry with `BOT_OPEN_ID`, its ``@_user_1`` key before the text), a
        thread (``thread_id``, and ``root_id`` the thread's first message).
        ``message_type`` and ``content_of(message_id, text)`` make another kind of
        message (an image, file or post: `FeishuResources`); ``files`` is what the
        page's timeline shows of its files.
        """
        origin = origin or Origin()
        open_id = origin.user_id or self.user_open_id
        chat_id = origin.chat_id or (GROUP_CHAT_ID if origin.group else self.chat_id)
        for met in (chat_id, open_id):
            if met not in (self.chat_id, self.user_open_id):
                self.met(met)
        msg_id = "om_" + uuid.uuid4().hex
        now_ms = str(int(time.time() * 1000))
        body = f"@_user_1 {text}" if origin.mentions_bot else text
        content = json.dumps(
            content_of(msg_id, body) if content_of is not None else {"text": body},
            ensure_ascii=False,
        )
        with self._lock:
            self._remember_message(
                {
                    "message_id": msg_id,
                    "chat_id": chat_id,
                    "msg_type": message_type,
                    "content": content,
                    "create_time": now_ms,
                    "from": "user",
                    **({"thread_id": origin.thread_id} if origin.thread_id else {}),
                }
            )
            entry = {"kind": "message", "from": "user", "format": "text", "text": text}
            self._add_timeline({**entry, "msgId": msg_id, **({"files": files} if files else {})})
        message: dict[str, Any] = {
            "message_id": msg_id,
            "create_time": now_ms,
            "update_time": now_ms,
            "chat_id": chat_id,
            "chat_type": "group" if origin.group else "p2p",
            "message_type": message_type,
            "content": content,
        }
        if origin.mentions_bot:
            message["mentions"] = [
                {
                    "key": "@_user_1",
                    "id": {"open_id": BOT_OPEN_ID, "union_id": "on_bot", "user_id": ""},
                    "name": "channelkit",
                    "tenant_key": self.tenant_key,
                }
            ]
        if origin.thread_id is not None:
            message["thread_id"] = origin.thread_id
            message["root_id"] = "om_root_" + origin.thread_id
        event = {
            "sender": {
                "sender_id": {
                    "open_id": open_id,
                    "user_id": "u_" + open_id[-8:],
                    "union_id": "on_" + open_id[-8:],
                },
                "sender_type": "user",
                "tenant_key": self.tenant_key,
            },
            "message": message,
        }
        envelope = self._envelope("im.message.receive_v1", event)
        return msg_id, self._deliver_callback("event", self.events_url, envelope)

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
        -> text) or ``cancel``; on a presentation, ``tap`` with ``form={"data": ...}``
        (the view's keyboard ``data``) or ``{"text": label}``, or ``action`` set to the
        label, value or command. A ``card.action.trigger`` callback goes to the SDK; the
        toast it answers is shown on the card."""
        with self._lock:
            card = self._cards.get(card_id)
            if card is None:
                raise KeyError(card_id)
            message_id = card.get("messageId")
            card_json = copy.deepcopy(card["json"])
            sent = self._messages.get(message_id) if message_id else None
            # the chat the card was sent to (a group, a thread's chat), else the person's
            chat_id = str(sent["chat_id"]) if sent else self.chat_id
        if not message_id:
            raise ValueError(f"card {card_id} was never sent to the chat")
        wanted = _BUTTON_ACTIONS.get(action, action)
        elements = card_elements(card_json)
        found = _find_button(elements, wanted) or _find_tapped(elements, action, form or {})
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
            "context": {"open_message_id": message_id, "open_chat_id": chat_id},
        }
        envelope = self._envelope("card.action.trigger", event)
        result = self._deliver_callback("card", self.card_url, envelope)
        self._apply_card_response(card_id, result)
        return result

    def _by_websocket(self) -> bool:
        if self.ingress is not None:
            return self.ingress == "websocket"
        return self.gateway.connected

    def _deliver_callback(
        self, kind: str, url: str, envelope: Mapping[str, Any]
    ) -> CallbackDelivery:
        """Deliver on the long connection (see the module docstring) or over HTTP."""
        if not self._by_websocket():
            headers, body = self.seal(envelope)
            return self._send_callback(kind, url, headers, body)
        message_id, ack = self.gateway.deliver(envelope)
        if ack is None:
            result = CallbackDelivery(status=0, body="no ACK within the timeout")
        else:
            result = CallbackDelivery(status=ack.code, body=ack.data or "{}")
        self._record_callback(kind, "websocket", result, messageId=message_id)
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
            if isinstance(raw, Mapping) and card_elements(raw):
                with self._lock:
                    card = self._cards.get(card_id)
                    if card is not None:
                        card["json"] = dict(raw)
                        card["updates"] += 1
                        self._touch()


def _find_button(
    elements: list[Any], wanted: str
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any] | None] | None:
    for element in elements:
        if not isinstance(element, dict):
            continue
        if element.get("tag") == "form":
            for inner in walk(element.get("elements")):
                value = button_value(inner) if inner.get("tag") == "button" else None
                if value is not None and value.get("action") == wanted:
                    return inner, value, element
            continue
        if element.get("tag") == "button":
            value = button_value(element)
            if value is not None and value.get("action") == wanted:
                return element, value, None
        nested = _find_button(
            [*(element.get("elements") or []), *(element.get("columns") or [])], wanted
        )
        if nested is not None:
            return nested
    return None


def _find_tapped(
    elements: list[Any], action: str, form: Mapping[str, Any]
) -> tuple[dict[str, Any], dict[str, Any], None] | None:
    """A presentation button (outside forms) the person taps: by ``form`` ``data`` /
    ``text`` for ``tap``, else by label, value or command equal to ``action``."""
    for element in walk(elements):
        if element.get("tag") == "form":
            continue
        value = button_value(element) if element.get("tag") == "button" else None
        if not value:
            continue
        own = "action" in value  # channelkit's own buttons (Stop, approvals)
        label = text_of(element.get("text"))
        if action == "tap":
            # the page's data names one button exactly, an approval's included
            hit = form.get("data") == tap_data(value) or (not own and form.get("text") == label)
        else:
            hit = not own and action in (label, value.get("value"), value.get("command"))
        if hit:
            return element, value, None
    return None


def _form_value(form: Mapping[str, Any], given: Mapping[str, Any]) -> dict[str, Any]:
    """``form_value`` as Feishu fills it from the form's current inputs.

    Select values may be given as option values or labels (the emulator maps labels to
    values, as the person picks by label); a value that is neither is a ``ValueError``.
    """
    out: dict[str, Any] = {}
    for element in walk(form.get("elements")):
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
        if text_of(option.get("text")) == text:
            return str(option.get("value", ""))
    raise ValueError(f"form.{name}: {text!r} is not an option")

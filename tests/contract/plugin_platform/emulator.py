"""`TinychatEmulator`: the plug-in platform's emulator, an `EmulatorBase`.

Its API (bearer token checked): ``POST /tinychat/api/post`` ``{chat, text, buttons}`` ->
``{id}``, ``/tinychat/api/edit`` ``{id, text, buttons}``, ``/tinychat/api/notice``
``{chat, user, text}`` (seen by that person alone). The person's messages and button
presses go to the SDK's ``/tinychat/events`` as signed POSTs. ``/_emulator/state``
shows the bot's messages as ``views`` (``id``, ``chat``, ``text``, ``keyboard``) and the
``notices``.
"""

from __future__ import annotations

import copy
import itertools
import json
import time
from collections import OrderedDict, deque
from collections.abc import Mapping
from typing import Any

from channelkit.playground.emulator import (
    MAX_CARDS,
    MAX_TIMELINE,
    CallbackDelivery,
    Deliver,
    EmulatorBase,
    HttpReply,
)

from plugin_platform.api import EVENTS_PATH, SIGNATURE_HEADER, TIMESTAMP_HEADER, sign

CHAT = "chat-1"
USER = "user-1"


class TinychatEmulator(EmulatorBase):
    """See the module docstring."""

    platform = "tinychat"

    def __init__(
        self, *, bot_token: str, signing_secret: str, deliver: Deliver | None = None
    ) -> None:
        super().__init__(deliver=deliver)
        self.bot_token = bot_token
        self.signing_secret = signing_secret
        self.user_id = USER  #: the person who sends (``userId`` of a press: someone else)
        self._views: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._notices: deque[dict[str, str]] = deque(maxlen=MAX_TIMELINE)
        self._ids = itertools.count(1)

    # -- the platform API ------------------------------------------------------------------
    def handle_json_api(
        self,
        method: str,
        path: str,
        query: Mapping[str, str],
        headers: Mapping[str, str],
        data: Any,
    ) -> HttpReply | None:
        if not path.startswith("/tinychat/api/"):
            return None
        if headers.get("authorization") != f"Bearer {self.bot_token}":
            return HttpReply(401, {"ok": False, "error": "invalid token"})
        if method != "POST" or not isinstance(data, Mapping):
            return HttpReply(400, {"ok": False, "error": "POST a JSON object"})
        call = path[len("/tinychat/api/") :]
        with self.lock:
            if call == "post":
                message_id = f"m{next(self._ids)}"
                view = {"id": message_id, "kind": "message", "chat": str(data.get("chat"))}
                self._views[message_id] = view
                while len(self._views) > MAX_CARDS:
                    self._views.popitem(last=False)
                self._update(view, data)
                self.add_timeline({"kind": "card", "card": message_id, "from": "bot"})
                return HttpReply(200, {"ok": True, "id": message_id})
            if call == "edit":
                view = self._views.get(str(data.get("id")))
                if view is None:
                    return HttpReply(404, {"ok": False, "error": "message not found"})
                self._update(view, data)
                self.mark_changed()
                return HttpReply(200, {"ok": True})
            if call == "notice":
                self._notices.append({k: str(data.get(k)) for k in ("chat", "user", "text")})
                self.mark_changed()
                return HttpReply(200, {"ok": True})
        return HttpReply(404, {"ok": False, "error": "unknown method"})

    @staticmethod
    def _update(view: dict[str, Any], data: Mapping[str, Any]) -> None:
        view["text"] = str(data.get("text") or "")
        buttons = data.get("buttons") or []
        view["keyboard"] = [
            [{"text": str(b.get("text")), "data": str(b.get("data"))} for b in row]
            for row in buttons
            if isinstance(row, list)
        ]

    def extra_state(self) -> dict[str, Any]:
        return {"views": copy.deepcopy(dict(self._views)), "notices": list(self._notices)}

    def notices(self) -> list[dict[str, str]]:
        """The notices shown to one person each (oldest first)."""
        with self.lock:
            return list(self._notices)

    def reset(self) -> None:
        with self.lock:
            self._views.clear()
            self._notices.clear()
        super().reset()

    # -- the person ------------------------------------------------------------------------
    def _deliver_event(self, kind: str, payload: dict[str, Any]) -> CallbackDelivery:
        body = json.dumps(payload).encode("utf-8")
        timestamp = str(int(time.time()))
        headers = {
            "Content-Type": "application/json",
            TIMESTAMP_HEADER: timestamp,
            SIGNATURE_HEADER: sign(self.signing_secret, timestamp, body),
        }
        return self.send_callback(kind, f"{self.base_url}{EVENTS_PATH}", headers, body)

    def send_user_message(self, text: str) -> tuple[str, CallbackDelivery]:
        with self.lock:
            message_id = f"u{next(self._ids)}"
            self.add_timeline({"kind": "message", "from": "user", "text": text})
        payload = {"type": "message", "id": message_id, "chat": CHAT, "user": self.user_id}
        payload.update({"text": text, "sentAt": int(time.time() * 1000)})
        return message_id, self._deliver_event("message", payload)

    def card_action(
        self,
        card_id: str,
        action: str,
        form: Mapping[str, Any] | None = None,
        *,
        user_id: str | None = None,
    ) -> CallbackDelivery:
        with self.lock:
            view = self._views[card_id]  # KeyError: unknown message
            offered = {b["data"] for row in view["keyboard"] for b in row}
            chat = view["chat"]
        data = (form or {}).get("data")
        if action != "tap" or data not in offered:
            raise ValueError(f"message {card_id} offers no button {data!r}")
        payload = {"type": "button", "chat": chat, "user": user_id or self.user_id}
        payload.update({"message": card_id, "data": data, "sentAt": int(time.time() * 1000)})
        return self._deliver_event("button", payload)

"""A Slack emulator: the Web API methods SlackChannel calls, a DM view, Events or Socket Mode.

Methods (``POST /<method>`` with JSON bodies, ``Authorization: Bearer <token>``; answers
``{"ok": true, ...}`` or HTTP 200 ``{"ok": false, "error": "..."}`` as Slack does):

* ``chat.postMessage`` / ``chat.update`` (``text`` and Block Kit ``blocks``);
* ``chat.startStream`` / ``chat.appendStream`` / ``chat.stopStream`` (a streaming
  message: appended to while it streams, ``message_not_in_streaming_state`` after);
* ``chat.postEphemeral`` (a notice only ``user`` sees; the page labels it);
* ``assistant.threads.setStatus`` (shown while not empty);
* ``pins.add`` / ``pins.remove`` / ``pins.list`` (a message of the channel, by its
  ``ts``: ``already_pinned`` / ``no_pin`` for a repeat, ``message_not_found`` for an
  unknown one; the list has the latest pin first; the page marks pinned messages);
* ``apps.connections.open`` with the app-level token: a one-time Socket Mode URL
  (`channelkit.playground.slack_gateway`);
* ``auth.test`` (the token check ``channelkit serve`` makes at start): the bot's
  identity in the playground workspace.

A wrong token is ``invalid_auth``. The person's messages become ``message`` events in a
direct message; clicks on buttons (Stop, a form's Submit / Cancel, presentation buttons)
become ``block_actions`` payloads carrying the form's ``state.values``. With ``ingress``
``"events"`` they are signed HTTP POSTs (``v0`` signatures) to ``/slack/events`` and
``/slack/interactivity``; with ``"socket"`` they are ``events_api`` / ``interactive``
envelopes over the gateway, each waiting for its ACK. ``GET /_emulator/callbacks``
records every delivery with its ``transport`` (``events`` or ``socket``).
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, urlencode

from channelkit.platforms.slack.ingress import SIGNATURE_HEADER, TIMESTAMP_HEADER, sign
from channelkit.playground.bot_files import BotFiles, parse_multipart
from channelkit.playground.emulator import (
    CallbackDelivery,
    Deliver,
    EmulatedFile,
    EmulatorBase,
    HttpReply,
    Origin,
)
from channelkit.playground.person_files import PersonFiles
from channelkit.playground.slack_gateway import SlackSocketGateway

__all__ = ["BOT_USER_ID", "GROUP_CHANNEL", "SlackEmulator", "slack_view"]

#: the app's bot user (a mention of it is ``<@U0BOT>``)
BOT_USER_ID = "U0BOT"
#: the channel a person writes in with ``{"group": true}`` and no ``chatId``
GROUP_CHANNEL = "C0PLAYGROUND"

BOT_METHODS = frozenset(
    {
        "chat.postMessage",
        "chat.update",
        "chat.startStream",
        "chat.appendStream",
        "chat.stopStream",
        "chat.postEphemeral",
        "assistant.threads.setStatus",
        "pins.add",
        "pins.remove",
        "pins.list",
        "auth.test",
        "files.getUploadURLExternal",
        "files.completeUploadExternal",
    }
)
PIN_METHODS = frozenset({"pins.add", "pins.remove", "pins.list"})
APP_METHODS = frozenset({"apps.connections.open"})
SUBMIT, CANCEL, STOP = "ck:q:submit", "ck:q:cancel", "ck:stop"
TEAMMATE = "U0TEAMMATE"
#: a shared file's ``url_private`` (``/files-pri/<team>-<id>/<name>``) or download URL
_FILE_PATH_RE = re.compile(r"^/files-pri/([A-Z0-9]+)-(F[0-9a-f]+)(?:/download)?/[^/]+$")


#: an upload URL of the external upload: ``/upload/v1/<file id>``
_UPLOAD_PATH_RE = re.compile(r"^/upload/v1/(F[0-9A-F]{16})$")
#: uploads in progress the emulator keeps (the oldest dropped)
MAX_UPLOADS = 100


def _ok(**fields: Any) -> HttpReply:
    return HttpReply(200, {"ok": True, **fields})


def _error(error: str) -> HttpReply:
    return HttpReply(200, {"ok": False, "error": error})


def _text_of(obj: Any) -> str:
    return str(obj.get("text", "")) if isinstance(obj, Mapping) else ""


def _buttons(blocks: Any) -> list[dict[str, Any]]:
    out = []
    for block in blocks if isinstance(blocks, list) else []:
        if isinstance(block, Mapping) and block.get("type") == "actions":
            for element in block.get("elements") or []:
                if isinstance(element, Mapping) and element.get("type") == "button":
                    out.append(
                        {
                            "text": _text_of(element.get("text")),
                            "action_id": str(element.get("action_id", "")),
                            "value": str(element.get("value", "")),
                            "url": element.get("url"),
                            "block_id": block.get("block_id"),
                        }
                    )
    return out


def _questions(blocks: list[Any]) -> list[dict[str, Any]]:
    """The form's questions: a section's text, then its radio buttons or checkboxes."""
    questions: list[dict[str, Any]] = []
    title = ""
    for block in blocks:
        if not isinstance(block, Mapping):
            continue
        if block.get("type") == "section":
            title = _text_of(block.get("text")).replace("*", "")
        elif block.get("type") == "actions":
            for element in block.get("elements") or []:
                if element.get("type") in ("radio_buttons", "checkboxes"):
                    options = [
                        {"text": _text_of(o.get("text")), "value": str(o.get("value"))}
                        for o in element.get("options") or []
                    ]
                    questions.append(
                        {
                            "name": str(block.get("block_id")),
                            "actionId": element.get("action_id"),
                            "label": title,
                            "multi": element.get("type") == "checkboxes",
                            "options": options,
                        }
                    )
        elif block.get("type") == "input" and questions:
            element = block.get("element") or {}
            questions[-1]["other"] = {
                "name": str(block.get("block_id")),
                "actionId": element.get("action_id"),
                "placeholder": _text_of(block.get("label")) or "Other",
            }
    return questions


def slack_view(message: Mapping[str, Any]) -> dict[str, Any]:
    """The page's view of one bot message: a Block Kit form (``kind: question``) or a
    message with its buttons (``kind: message``; ``running`` while it streams)."""
    buttons = _buttons(message.get("blocks"))
    base = {
        "id": message["ts"],
        "updates": message.get("edits", 0),
        "toast": message.get("toast"),
        "ephemeral": message.get("ephemeral"),
        "pinned": bool(message.get("pinned")),
        "files": [dict(f) for f in message.get("files", ())],
    }
    if any(b["action_id"] == SUBMIT for b in buttons):
        return {
            **base,
            "kind": "question",
            "state": "pending",
            "title": "Question",
            "desc": "",
            "questions": _questions(list(message.get("blocks") or [])),
            "actions": ["submit", "cancel"],
            "button": "Submit",
            "awaitsAnswer": True,
        }
    keyboard = [
        [{"text": b["text"], "data": f"{b['action_id']} {b['value']}", "url": b["url"]}]
        for b in buttons
        if not b["url"]
    ]
    if message.get("streaming"):
        state = "running"
    elif message.get("edits"):
        state = "edited"
    else:
        state = "shown"
    text = str(message.get("text", ""))
    if message.get("ephemeral"):
        text = f"(only visible to {message['ephemeral']}) {text}"
    return {
        **base,
        "kind": "message",
        "state": state,
        "text": text,
        # how Slack reads the text: standard Markdown (a stream's ``markdown_text``) or
        # mrkdwn (``text`` of chat.postMessage / chat.update); the page draws either
        "markup": message.get("markup", "mrkdwn"),
        "keyboard": keyboard,
        "edited": bool(message.get("edits")),
        "streaming": bool(message.get("streaming")),
        "actions": ["tap", *(["stop"] if any(b["action_id"] == STOP for b in buttons) else [])],
        "awaitsAnswer": False,
    }


class SlackEmulator(EmulatorBase):
    """The emulated Slack workspace: one app, one person in a direct message with it."""

    platform = "slack"
    accepts_files = True

    def __init__(
        self,
        *,
        bot_token: str,
        app_token: str,
        signing_secret: str,
        events_url: str,
        interactivity_url: str,
        ingress: str = "events",
        user_id: str = "U0PLAYER",
        channel: str = "D0PLAYGROUND",
        team: str = "T0PLAYGROUND",
        deliver: Deliver | None = None,
    ) -> None:
        super().__init__(deliver=deliver)
        self.bot_token = bot_token
        self.app_token = app_token
        self.signing_secret = signing_secret
        self.events_url = events_url
        self.interactivity_url = interactivity_url
        self.ingress = ingress
        self.user_id = user_id
        self.channel = channel
        self.team = team
        self.gateway = SlackSocketGateway()
        self._status: dict[str, str] = {}
        self._pins: list[dict[str, Any]] = []  # pins.list items, oldest pin first
        self._ts = 0
        self._events = 0
        #: the files the person shared, served at their ``url_private`` (bot token only)
        self.person_files = PersonFiles()
        #: the files the bot uploaded (the external upload: URL, bytes, complete)
        self.bot_files = BotFiles()
        #: file id -> the upload in progress (name, length, bytes once posted); bounded
        self._uploads: dict[str, dict[str, Any]] = {}

    # -- Web API ---------------------------------------------------------------------------
    def _new_ts(self) -> str:  # lock held
        self._ts += 1
        return f"{int(time.time())}.{self._ts:06d}"

    def handle_json_api(
        self,
        method: str,
        path: str,
        query: Mapping[str, str],
        headers: Mapping[str, str],
        data: Any,
    ) -> HttpReply | None:
        name = path.lstrip("/")
        if method != "POST" or name not in BOT_METHODS | APP_METHODS:
            return None
        token = self.app_token if name in APP_METHODS else self.bot_token
        if headers.get("authorization") != f"Bearer {token}":
            return _error("invalid_auth")
        if name == "apps.connections.open":
            return _ok(url=self.gateway.open())
        if name == "auth.test":
            return _ok(team=self.team, team_id=self.team, user="channelkit", user_id="U0BOT")
        body = data if isinstance(data, Mapping) else {}
        if name.startswith("files."):
            return self._files_method(name, body)
        if not isinstance(body.get("channel") or body.get("channel_id"), str):
            return _error("channel_not_found")
        with self._lock:
            return self._answer(name, body)

    def _answer(self, name: str, body: Mapping[str, Any]) -> HttpReply:  # lock held
        channel = str(body.get("channel") or body.get("channel_id"))
        if name == "assistant.threads.setStatus":
            self._status[str(body.get("thread_ts", ""))] = str(body.get("status", ""))
            self._touch()
            return _ok()
        if name in PIN_METHODS:
            return self._pin_method(name, channel, body)
        if name in ("chat.postMessage", "chat.startStream", "chat.postEphemeral"):
            text = body.get("markdown_text") if name == "chat.startStream" else body.get("text")
            if name != "chat.startStream" and not text and not body.get("blocks"):
                return _error("no_text")
            ts = self._new_ts()
            message: dict[str, Any] = {
                "ts": ts,
                "channel": channel,
                "thread_ts": body.get("thread_ts"),
                "text": str(text or ""),
                "blocks": list(body.get("blocks") or []),
                "streaming": name == "chat.startStream",
                "markup": "markdown" if name == "chat.startStream" else "mrkdwn",
                "ephemeral": body.get("user") if name == "chat.postEphemeral" else None,
                "edits": 0,
            }
            self._put_card(ts, message)
            entry = {"kind": "card", "from": "bot", "card": ts, "msgId": ts}
            if body.get("thread_ts"):
                entry["threadId"] = str(body["thread_ts"])  # where the page shows it
            self._add_timeline(entry)
            if name == "chat.postEphemeral":
                return _ok(message_ts=ts)
            return _ok(channel=channel, ts=ts)
        found = self._cards.get(str(body.get("ts", "")))
        if found is None or found["channel"] != channel:
            return _error("message_not_found")
        message = found
        if name == "chat.update":
            message["text"] = str(body.get("text") or "")
            message["markup"] = "mrkdwn"
            if "blocks" in body:
                message["blocks"] = list(body.get("blocks") or [])
        elif not message.get("streaming"):
            return _error("message_not_in_streaming_state")
        else:
            message["text"] += str(body.get("markdown_text") or "")
            if name == "chat.stopStream":
                message["streaming"] = False
                message["blocks"] = list(body.get("blocks") or [])
        message["edits"] += 1
        self._touch()
        return _ok(channel=channel, ts=message["ts"])

    def _pin_method(self, name: str, channel: str, body: Mapping[str, Any]) -> HttpReply:
        """``pins.add`` / ``pins.remove`` / ``pins.list`` (lock held)."""
        # a message the emulator no longer holds (its bounded history) is no pin either
        self._pins = [p for p in self._pins if p["message"] in self._cards]
        if name == "pins.list":
            items = []
            for pin in reversed(self._pins):
                if pin["channel"] != channel:
                    continue
                held = self._cards[pin["message"]]
                shown = {"type": "message", "ts": held["ts"], "text": held["text"]}
                items.append({**pin, "message": {**shown, "pinned_to": [channel]}})
            return _ok(items=items)
        message = self._cards.get(str(body.get("timestamp", "")))
        if message is None or message["channel"] != channel or message.get("ephemeral"):
            return _error("message_not_found")
        pinned = bool(message.get("pinned"))
        if name == "pins.add":
            if pinned:
                return _error("already_pinned")
            message["pinned"] = True
            self._pins.append(
                {
                    "type": "message",
                    "channel": channel,
                    "created": int(time.time()),
                    "created_by": "U0BOT",
                    "message": message["ts"],
                }
            )
        else:
            if not pinned:
                return _error("no_pin")
            message["pinned"] = False
            self._pins = [p for p in self._pins if p["message"] != message["ts"]]
        self._touch()
        return _ok()

    # -- visible state ----------------------------------------------------------------------
    def extra_state(self) -> dict[str, Any]:
        return {
            "views": {ts: slack_view(m) for ts, m in self._cards.items()},
            "assistantStatus": next((s for s in reversed(self._status.values()) if s), ""),
            "ingress": self.ingress,
            "reactions": {},
        }

    def view(self, ts: str) -> dict[str, Any] | None:
        """The page's view of one bot message (None when unknown)."""
        with self._lock:
            message = self._cards.get(ts)
            return slack_view(message) if message is not None else None

    def ephemerals(self) -> list[dict[str, Any]]:
        """Every ephemeral notice: ``{ts, user, text}`` (oldest first)."""
        with self._lock:
            return [
                {"ts": m["ts"], "user": m["ephemeral"], "text": m["text"]}
                for m in self._cards.values()
                if m.get("ephemeral")
            ]

    # -- the person -> the app --------------------------------------------------------------
    def send_user_message(
        self,
        text: str,
        *,
        user_id: str | None = None,
        origin: Origin | None = None,
        files: list[dict[str, Any]] | None = None,
    ) -> tuple[str, CallbackDelivery]:
        """The person (or ``user_id``) types ``text`` in the direct message.

        ``origin`` (`Origin`): another person, a channel (`GROUP_CHANNEL` unless one is
        named), a mention of the bot (``<@U0BOT>`` before the text, delivered as the
        ``app_mention`` event Slack sends), a thread (``thread_ts``). ``files``: Slack
        file objects shared with the message (a ``file_share`` message; see
        `send_user_files()`).
        """
        origin = origin or Origin()
        user = origin.user_id or user_id or self.user_id
        channel = origin.chat_id or (GROUP_CHANNEL if origin.group else self.channel)
        in_channel = not channel.startswith("D")
        if origin.mentions_bot:
            text = f"<@{BOT_USER_ID}> {text}"
        with self._lock:
            ts = self._new_ts()
            self._events += 1
            event_id = f"Ev{self._events:08d}"
            entry: dict[str, Any] = {
                "kind": "message",
                "from": "user",
                "format": "text",
                "text": text,
                "msgId": ts,
            }
            if files:
                entry["files"] = [
                    {"name": f["name"], "contentType": f["mimetype"], "size": f["size"]}
                    for f in files
                ]
            self._add_timeline(entry)
        event: dict[str, Any] = {
            "type": "app_mention" if origin.mentions_bot and in_channel else "message",
            "channel_type": "channel" if in_channel else "im",
            "user": user,
            "text": text,
            "channel": channel,
            "ts": ts,
            "event_ts": ts,
            "team": self.team,
        }
        if origin.thread_id is not None:
            event["thread_ts"] = origin.thread_id
        if files:
            event["files"] = files
            if event["type"] == "message":
                event["subtype"] = "file_share"
        payload = {
            "type": "event_callback",
            "team_id": self.team,
            "api_app_id": "A0PLAYGROUND",
            "event_id": event_id,
            "event_time": int(time.time()),
            "event": event,
        }
        return ts, self._deliver_payload("message", payload)

    def send_user_files(
        self, text: str, files: tuple[EmulatedFile, ...], *, origin: Origin | None = None
    ) -> tuple[str, CallbackDelivery]:
        """The person shares ``files`` in one message with ``text`` (possibly empty):
        Slack file objects whose ``url_private`` / ``url_private_download`` point at
        this emulator's ``/files-pri/...`` (served with the bot token only)."""
        objects = []
        for file in files:
            key = self.person_files.keep(file)
            folder = f"{self.base_url}/files-pri/{self.team}-{key}"
            objects.append(
                {
                    "id": key,
                    "name": file.name,
                    "title": file.name,
                    "mimetype": file.content_type,
                    "filetype": file.name.rsplit(".", 1)[-1] if "." in file.name else "",
                    "size": len(file.data),
                    "mode": "hosted",
                    "url_private": f"{folder}/{quote(file.name)}",
                    "url_private_download": f"{folder}/download/{quote(file.name)}",
                }
            )
        return self.send_user_message(text, origin=origin, files=objects)

    def handle_api(
        self,
        method: str,
        path: str,
        query: Mapping[str, str],
        headers: Mapping[str, str],
        body: bytes,
    ) -> HttpReply | None:
        """``GET /files-pri/<team>-<file id>[/download]/<name>``: a shared file's bytes
        with ``Authorization: Bearer <bot token>``; without it, Slack's redirect to
        its sign-in page. Everything else: the Web API."""
        match = _FILE_PATH_RE.match(path)
        upload = _UPLOAD_PATH_RE.match(path)
        if upload is not None:
            return self._upload_bytes(method, upload.group(1), headers, body)
        if match is None:
            return super().handle_api(method, path, query, headers, body)
        team, key = match.groups()
        if method != "GET":
            reply = HttpReply(405, {"error": "method_not_allowed"})
        elif headers.get("authorization") != f"Bearer {self.bot_token}":
            # what Slack does for a download without a valid token: its sign-in page
            reply = HttpReply(
                302, None, raw=b"", headers=(("Location", "https://slack.com/signin"),)
            )
        elif team != self.team or (data := self.person_files.serve(key)) is None:
            reply = HttpReply(404, None, content_type="text/plain", raw=b"file_not_found")
        else:
            reply = HttpReply(200, None, content_type="application/octet-stream", raw=data)
        self._record(method, re.sub(r"/[^/]*$", "/<name>", path), {}, None, reply)
        return reply

    # -- the bot's files (external upload) --------------------------------------------------
    def _files_method(self, name: str, body: Mapping[str, Any]) -> HttpReply:
        """``files.getUploadURLExternal`` (an injected fault answers here) and
        ``files.completeUploadExternal`` (shares the posted bytes as a message)."""
        if name == "files.getUploadURLExternal":
            filename, length = body.get("filename"), body.get("length")
            if not isinstance(filename, str) or not filename:
                return _error("invalid_arguments")
            if isinstance(length, bool) or not isinstance(length, int) or length <= 0:
                return _error("missing_argument")
            fault = self.bot_files.take_fault()
            if fault is not None:
                if fault.status == 429:
                    return HttpReply(
                        429, {"ok": False, "error": "ratelimited"}, headers=(("Retry-After", "1"),)
                    )
                if fault.status >= 500:
                    return HttpReply(fault.status, {"ok": False, "error": fault.description})
                return _error(fault.description)
            file_id = "F" + uuid.uuid4().hex[:16].upper()
            with self._lock:
                self._uploads[file_id] = {"name": filename, "length": length, "file": None}
                while len(self._uploads) > MAX_UPLOADS:
                    del self._uploads[next(iter(self._uploads))]
            return _ok(upload_url=f"{self.base_url}/upload/v1/{file_id}", file_id=file_id)
        files = body.get("files")
        channel = body.get("channel_id")
        if not isinstance(files, list) or not files:
            return _error("invalid_arguments")
        if not isinstance(channel, str) or not channel:
            return _error("channel_not_found")
        views, shown = [], []
        with self._lock:
            for item in files:
                wanted = str(item.get("id")) if isinstance(item, Mapping) else ""
                pending = self._uploads.get(wanted)
                if pending is None or pending["file"] is None:
                    return _error("file_not_found")
                views.append(self.bot_files.view(self.bot_files.keep(pending["file"])))
                shown.append({"id": wanted, "title": item.get("title") or pending["name"]})
                del self._uploads[wanted]
            ts = self._new_ts()
            thread = body.get("thread_ts")
            message: dict[str, Any] = {
                "ts": ts,
                "channel": channel,
                "thread_ts": thread,
                "text": str(body.get("initial_comment") or ""),
                "blocks": [],
                "streaming": False,
                "markup": "mrkdwn",
                "ephemeral": None,
                "edits": 0,
                "files": views,
            }
            self._put_card(ts, message)
            entry = {"kind": "card", "from": "bot", "card": ts, "msgId": ts}
            if thread:
                entry["threadId"] = str(thread)
            self._add_timeline(entry)
        return _ok(files=shown)

    def _upload_bytes(
        self, method: str, file_id: str, headers: Mapping[str, str], body: bytes
    ) -> HttpReply:
        """``POST /upload/v1/<file id>``: the file's bytes (multipart or raw), checked
        against the announced length."""
        content_type = headers.get("content-type", "")
        with self._lock:
            pending = self._uploads.get(file_id)
        if method != "POST":
            reply = HttpReply(405, None, content_type="text/plain", raw=b"method not allowed")
        elif pending is None:
            reply = HttpReply(404, None, content_type="text/plain", raw=b"unknown upload")
        else:
            name, kind, data = pending["name"], "application/octet-stream", body
            if content_type.startswith("multipart/form-data"):
                try:
                    _, parts = parse_multipart(body, content_type)
                except ValueError:
                    parts = {}
                part = next(iter(parts.values()), None)
                if part is not None:
                    kind, data = part.content_type, part.data
            if len(data) != pending["length"]:
                reply = HttpReply(400, None, content_type="text/plain", raw=b"length mismatch")
            else:
                with self._lock:
                    pending["file"] = EmulatedFile(name, kind, data)
                reply = HttpReply(
                    200, None, content_type="text/plain", raw=b"OK - " + str(len(data)).encode()
                )
        self._record(method, "/upload/v1/<file>", {}, None, reply)
        return reply

    def card_action(
        self,
        card_id: str,
        action: str,
        form: Mapping[str, Any] | None = None,
        *,
        user_id: str | None = None,
    ) -> CallbackDelivery:
        """A click on a bot message: ``stop``, ``submit`` / ``cancel`` (a form; ``form``
        maps question names to the chosen value(s), an Other field to its text), or
        ``tap`` with ``form={"data": "<action_id> <value>"}``."""
        with self._lock:
            message = self._cards.get(str(card_id))
            if message is None:
                raise KeyError(card_id)
            message = json.loads(json.dumps(message))
        buttons = _buttons(message["blocks"])
        wanted = {"stop": STOP, "submit": SUBMIT, "cancel": CANCEL}.get(action)
        data = str((form or {}).get("data", "")) if action == "tap" else None
        button = next(
            (
                b
                for b in buttons
                if b["action_id"] == wanted or f"{b['action_id']} {b['value']}" == data
            ),
            None,
        )
        if button is None:
            raise ValueError("action: the message has no such button")
        values = _state_values(_questions(message["blocks"]), form or {})
        payload = {
            "type": "block_actions",
            "team": {"id": self.team},
            "user": {"id": user_id or self.user_id},
            "api_app_id": "A0PLAYGROUND",
            "trigger_id": uuid.uuid4().hex,
            "container": {"type": "message", "message_ts": message["ts"]},
            "channel": {"id": message["channel"]},
            "message": {"ts": message["ts"], "text": message["text"]},
            "state": {"values": values},
            "actions": [
                {
                    "type": "button",
                    "action_id": button["action_id"],
                    "block_id": button["block_id"],
                    "value": button["value"],
                    "text": {"type": "plain_text", "text": button["text"]},
                    "action_ts": f"{time.time():.6f}",
                }
            ],
        }
        return self._deliver_payload("block_actions", payload)

    def _deliver_payload(self, kind: str, payload: Mapping[str, Any]) -> CallbackDelivery:
        interactive = kind == "block_actions"
        if self.ingress == "socket":
            envelope_id, ack = self.gateway.deliver(
                "interactive" if interactive else "events_api", payload
            )
            result = (
                CallbackDelivery(200, json.dumps(ack))
                if ack is not None
                else CallbackDelivery(0, "no ACK")
            )
            self._record_callback(kind, "socket", result, envelopeId=envelope_id)
            return result
        raw = json.dumps(payload, ensure_ascii=False)
        if interactive:
            url, body = self.interactivity_url, urlencode({"payload": raw}).encode("utf-8")
            content_type = "application/x-www-form-urlencoded"
        else:
            url, body, content_type = self.events_url, raw.encode("utf-8"), "application/json"
        timestamp = str(int(time.time()))
        headers = {
            "Content-Type": content_type,
            TIMESTAMP_HEADER: timestamp,
            SIGNATURE_HEADER: sign(self.signing_secret, timestamp, body),
        }
        result = self.deliver(url, headers, body)
        self._record_callback(kind, "events", result, url=url)
        return result

    def handle_control(self, method: str, path: str, data: Any) -> HttpReply | None:
        """``/_emulator/files/...``: the bot's files and injected upload faults."""
        return self.bot_files.control(method, path, data)

    def reset(self) -> None:
        with self._lock:
            self._status.clear()
            self._pins.clear()
        self.person_files.clear()
        self.bot_files.clear()
        with self._lock:
            self._uploads.clear()
        super().reset()

    def close(self) -> None:
        self.gateway.close()


def _state_values(questions: list[dict[str, Any]], form: Mapping[str, Any]) -> dict[str, Any]:
    """``state.values`` of a form for the answers in ``form`` (as the page collects them)."""
    values: dict[str, Any] = {}
    for q in questions:
        picked = form.get(q["name"])
        chosen = [picked] if isinstance(picked, str) and picked else list(picked or [])
        options = [{"value": str(v)} for v in chosen if isinstance(v, str)]
        if q["multi"]:
            element: dict[str, Any] = {"type": "checkboxes", "selected_options": options}
        else:
            element = {"type": "radio_buttons", "selected_option": options[0] if options else None}
        values[q["name"]] = {q["actionId"]: element}
        other = q.get("other")
        if other:
            text = form.get(other["name"])
            values[other["name"]] = {
                other["actionId"]: {
                    "type": "plain_text_input",
                    "value": text if isinstance(text, str) else None,
                }
            }
    return values

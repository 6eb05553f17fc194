"""A DingTalk emulator: token endpoints, Card OpenAPI, robot API and signed callbacks.

Paths and bodies follow ``openapi/dingtalk.json``:

* ``POST /v1.0/oauth2/accessToken`` and ``GET /gettoken`` issue access tokens for the
  configured app key/secret; every other ``/v1.0`` call needs a valid
  ``x-acs-dingtalk-access-token`` (else 401 ``InvalidAuthentication``);
* ``POST /v1.0/card/instances/createAndDeliver``, ``PUT /v1.0/card/streaming``,
  ``PUT /v1.0/card/instances``, ``POST /v1.0/card/callbacks/register`` hold card
  instances (variables, streaming content, flowStatus, finalize/error flags);
* ``POST /v1.0/robot/oToMessages/batchSend``, ``POST /v1.0/robot/groupMessages/send``,
  session webhooks (``POST /robot/sendBySession``) add bot messages;
  ``POST /v1.0/robot/emotion/reply|recall`` add and remove reactions;
* ``POST /media/upload?access_token=..&type=image|file`` (multipart ``media``) keeps the
  bot's file and answers its ``media_id``; the robot's ``sampleImageMsg`` /
  ``sampleFile`` messages naming it show it in the chat (views ``"files"``, bytes at
  ``GET /_emulator/files/<key>``, faults by ``POST /_emulator/files/fail``:
  `channelkit.playground.bot_files`).

User input goes back to the SDK as the platform would send it. In Stream mode (the bot
called ``POST /v1.0/gateway/connections/open``, no token: see
`channelkit.playground.stream_gateway`) robot messages are ``CALLBACK`` frames on
the bot's WebSocket, and so are the actions on cards created with ``callbackType:
"STREAM"``. Otherwise a robot message goes to the robot callback URL signed with
``timestamp``/``sign`` headers, and card actions to the registered card callback URL
signed with ``x-ddpaas-signature-timestamp`` / ``x-ddpaas-signature``. The signatures are
computed here from DingTalk's documented algorithm, independently of the adapter's
verification code. ``GET /_emulator/callbacks`` names the transport of each delivery
(``stream`` or ``http``).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
import uuid
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from channelkit.core.catalog import CATALOG, LOCALES
from channelkit.playground.bot_files import BotFiles, parse_multipart
from channelkit.playground.emulator import (
    CallbackDelivery,
    Deliver,
    EmulatedFile,
    EmulatorBase,
    HttpReply,
    Origin,
)
from channelkit.playground.person_files import PersonFiles, media_kind
from channelkit.playground.stream_gateway import StreamGateway

#: Stream topics (DingTalk's names) of robot messages and card callbacks.
ROBOT_TOPIC = "/v1.0/im/bot/messages/get"
CARD_TOPIC = "/v1.0/card/instances/callback"

__all__ = [
    "QUESTION_TEMPLATE_ID",
    "STATUS_TEMPLATE_ID",
    "DingtalkEmulator",
    "dingtalk_card_signature",
    "dingtalk_robot_sign",
]

#: channelkit's built-in templates (see docs/platforms/dingtalk.md); others render raw.
STATUS_TEMPLATE_ID = "675cde2f-f526-40cb-b828-f5b2b57b8b77.schema"
QUESTION_TEMPLATE_ID = "c2a6355b-9724-4f7e-9653-d33fcb3311bb.schema"
STOP_ACTION_ID = "btn_stop"
TOKEN_LIFETIME = 7200
#: the robot's ``chatbotUserId`` (an @-mention of it lists this ``dingtalkId``)
BOT_DINGTALK_ID = "$:LWCP_v1:$bot"
#: the group a person writes in with ``{"group": true}`` and no ``chatId``
GROUP_CONVERSATION_ID = "cidPlaygroundGroup"
#: where the emulated temporary download URLs of the person's files point
_FILE_PREFIX = "/file/download/"


def _b64_hmac_sha256(key: str, message: str) -> str:
    mac = hmac.new(key.encode("utf-8"), message.encode("utf-8"), hashlib.sha256)
    return base64.b64encode(mac.digest()).decode("ascii")


def dingtalk_robot_sign(timestamp_ms: str, app_secret: str) -> str:
    """Robot callback ``sign``: Base64(HmacSHA256(appSecret, timestamp + "\\n" + appSecret))."""
    return _b64_hmac_sha256(app_secret, timestamp_ms + "\n" + app_secret)


def dingtalk_card_signature(timestamp: str, api_secret: str) -> str:
    """``x-ddpaas-signature`` of a card callback: Base64(HmacSHA256(apiSecret, timestamp))."""
    return _b64_hmac_sha256(api_secret, timestamp)


def _error(status: int, code: str, message: str) -> HttpReply:
    return HttpReply(status, {"code": code, "message": message, "requestid": uuid.uuid4().hex})


def _param_map_error(value: Any) -> str | None:
    if not isinstance(value, Mapping):
        return "cardData.cardParamMap must be an object"
    for key, item in value.items():
        if not isinstance(item, str):
            return f"cardParamMap.{key} must be a string"
    return None


class DingtalkEmulator(EmulatorBase):
    """The emulated DingTalk platform for one app (robot) and one person.

    ``robot_callback_url`` receives robot messages (the app's HTTP message URL);
    ``card_callback_url`` receives card actions when no ``/card/callbacks/register``
    registration matches the card's ``callbackRouteKey``. ``api_secret`` signs card
    callbacks (None: unsigned, as when no apiSecret was registered). ``deliver``
    replaces the HTTP POST to the SDK (tests route it into a Flask or Django test
    client). ``ingress`` is the app's message receiving mode: ``"stream"`` (robot
    messages are frames on the bot's Stream connection, waiting for it to connect),
    ``"http"`` (signed POSTs to ``robot_callback_url``) or None (Stream once a bot
    opened a Stream connection, HTTP before). Card actions follow each card's
    ``callbackType``. ``stream_port`` is the port of the Stream gateway's WebSocket
    server on 127.0.0.1 (0, the default: a free one).
    """

    platform = "dingtalk"
    accepts_files = True

    def __init__(
        self,
        *,
        app_key: str = "playground-app",
        app_secret: str = "playground-secret",
        api_secret: str | None = "playground-card-secret",
        robot_callback_url: str = "",
        card_callback_url: str = "",
        user_id: str = "user-1",
        user_name: str = "You",
        conversation_id: str = "cid-playground",
        deliver: Deliver | None = None,
        ingress: str | None = None,
        stream_port: int = 0,
    ) -> None:
        super().__init__(deliver=deliver)
        if ingress not in (None, "stream", "http"):
            raise ValueError('ingress: must be "stream", "http" or None')
        self.ingress = ingress
        self.app_key = app_key
        self.app_secret = app_secret
        self.api_secret = api_secret
        self.robot_callback_url = robot_callback_url
        self.card_callback_url = card_callback_url
        self.user_id = user_id
        self.user_name = user_name
        self.conversation_id = conversation_id
        self._routes: dict[str, dict[str, Any]] = {}
        #: base URLs of several SDK instances of one bot (``playground --instances N``):
        #: HTTP callbacks go to them in turn, each recorded with its ``instance`` index
        self.instance_urls: list[str] = []
        self._next_instance = 0
        self._reactions: dict[str, list[str]] = {}
        self._sessions: dict[str, str] = {}
        #: the files the person sent, by download code (`send_user_files`)
        self.person_files = PersonFiles()
        #: the files the bot uploaded (``/media/upload``), by media id
        self.bot_files = BotFiles()
        self._url_key = secrets.token_bytes(32)  # signs the temporary download URLs
        #: the Stream mode gateway (its WebSocket server starts with the first open)
        self.stream = StreamGateway(app_key)
        self.stream.listen_port = stream_port  # 0: a free port

    # -- tokens ---------------------------------------------------------------------------
    def _new_token(self) -> str:
        """A fresh access token (DingTalk issues a new one on every request)."""
        return self._issue_token("emu-", 12, TOKEN_LIFETIME)[0]

    # -- API --------------------------------------------------------------------------------
    def handle_api(
        self,
        method: str,
        path: str,
        query: Mapping[str, str],
        headers: Mapping[str, str],
        body: bytes,
    ) -> HttpReply | None:
        if path != "/media/upload":
            return super().handle_api(method, path, query, headers, body)
        shown = {k: v for k, v in query.items() if k != "access_token"}
        reply, recorded = self._media_upload(method, query, headers, body)
        self._record(method, path, shown, recorded, reply)
        return reply

    def _media_upload(
        self, method: str, query: Mapping[str, str], headers: Mapping[str, str], body: bytes
    ) -> tuple[HttpReply, Any]:
        """``POST /media/upload``: the bot's file (the ``media`` part) kept; its
        ``media_id``. Errors are legacy ``{errcode, errmsg}`` bodies."""
        if method != "POST":
            return HttpReply(405, {"errcode": 405, "errmsg": "method not allowed"}), None
        if not self._token_valid(query.get("access_token", "")):
            return HttpReply(200, {"errcode": 40014, "errmsg": "invalid access_token"}), None
        kind = query.get("type", "")
        if kind not in ("image", "file", "voice", "video"):
            return HttpReply(200, {"errcode": 40004, "errmsg": "type: invalid media type"}), None
        try:
            fields, parts = parse_multipart(body, headers.get("content-type", ""))
        except ValueError:
            return HttpReply(200, {"errcode": 43008, "errmsg": "media: needs multipart"}), None
        recorded: dict[str, Any] = {
            **fields,
            **{
                k: {"name": f.name, "contentType": f.content_type, "size": len(f.data)}
                for k, f in parts.items()
            },
        }
        file = parts.get("media")
        if file is None or not file.data:
            reply = HttpReply(200, {"errcode": 40004, "errmsg": "media: no non-empty file part"})
            return reply, recorded
        fault = self.bot_files.take_fault()
        if fault is not None:
            payload = {"errcode": fault.status, "errmsg": fault.description}
            return HttpReply(fault.status, payload), recorded
        media_id = "@" + self.bot_files.keep(file)
        answer = {
            "errcode": 0,
            "errmsg": "ok",
            "type": kind,
            "media_id": media_id,
            "created_at": int(time.time() * 1000),
        }
        return HttpReply(200, answer), recorded

    def handle_control(self, method: str, path: str, data: Any) -> HttpReply | None:
        return self.bot_files.control(method, path, data)

    def handle_json_api(
        self,
        method: str,
        path: str,
        query: Mapping[str, str],
        headers: Mapping[str, str],
        data: Any,
    ) -> HttpReply | None:
        if path == "/v1.0/oauth2/accessToken" and method == "POST":
            return self._access_token(data)
        if path == "/gettoken" and method == "GET":
            if query.get("appkey") != self.app_key or query.get("appsecret") != self.app_secret:
                return HttpReply(200, {"errcode": 40089, "errmsg": "invalid appkey or appsecret"})
            return HttpReply(
                200,
                {
                    "errcode": 0,
                    "errmsg": "ok",
                    "access_token": self._new_token(),
                    "expires_in": TOKEN_LIFETIME,
                },
            )
        if path == "/robot/sendBySession" and method == "POST":
            return self._session_webhook(query, data)
        if path == "/v1.0/gateway/connections/open" and method == "POST":
            return self._open_stream(data)
        if path.startswith(_FILE_PREFIX):
            return self._file_download(method, path, query)
        routes = {
            ("POST", "/v1.0/card/instances/createAndDeliver"): self._create_and_deliver,
            ("PUT", "/v1.0/card/streaming"): self._streaming,
            ("PUT", "/v1.0/card/instances"): self._update_instance,
            ("POST", "/v1.0/card/callbacks/register"): self._register_callback,
            ("POST", "/v1.0/robot/oToMessages/batchSend"): self._batch_send,
            ("POST", "/v1.0/robot/groupMessages/send"): self._group_send,
            ("POST", "/v1.0/robot/emotion/reply"): self._emotion_reply,
            ("POST", "/v1.0/robot/emotion/recall"): self._emotion_recall,
            ("POST", "/v1.0/robot/messageFiles/download"): self._message_file,
        }
        handler = routes.get((method, path))
        if handler is None:
            if path.startswith("/v1.0/"):
                return _error(404, "InvalidAction.NotFound", f"{method} {path} is not emulated")
            return None
        if not self._token_valid(headers.get("x-acs-dingtalk-access-token", "")):
            return _error(401, "InvalidAuthentication", "access token is invalid or expired")
        if not isinstance(data, Mapping):
            return _error(400, "MissingParameter", "the body must be a JSON object")
        return handler(data)

    def _access_token(self, data: Any) -> HttpReply:
        if not isinstance(data, Mapping) or not data.get("appKey") or not data.get("appSecret"):
            return _error(400, "MissingParameter", "appKey and appSecret are required")
        if data.get("appKey") != self.app_key or data.get("appSecret") != self.app_secret:
            return _error(400, "invalidClientIdOrSecret", "invalid appKey or appSecret")
        return HttpReply(200, {"accessToken": self._new_token(), "expireIn": TOKEN_LIFETIME})

    def _open_stream(self, data: Any) -> HttpReply:
        if not isinstance(data, Mapping) or not data.get("clientId"):
            return _error(400, "MissingParameter", "clientId and clientSecret are required")
        if data.get("clientId") != self.app_key or data.get("clientSecret") != self.app_secret:
            return _error(400, "invalidClientIdOrSecret", "invalid clientId or clientSecret")
        subscriptions = data.get("subscriptions")
        if not isinstance(subscriptions, list) or not subscriptions:
            return _error(400, "MissingParameter", "subscriptions are required")
        topics = [
            str(s["topic"])
            for s in subscriptions
            if isinstance(s, Mapping) and isinstance(s.get("topic"), str)
        ]
        endpoint, ticket = self.stream.open(topics)
        return HttpReply(200, {"endpoint": endpoint, "ticket": ticket})

    def _deliver_frame(self, kind: str, topic: str, payload: Mapping[str, Any]) -> CallbackDelivery:
        message_id, ack = self.stream.deliver(topic, payload)
        if ack is None:
            result = CallbackDelivery(status=0, body="no ACK within the timeout")
        else:
            result = CallbackDelivery(status=ack.code, body=ack.data)
        self._record_callback(kind, "stream", result, topic=topic, messageId=message_id)
        return result

    def _by_stream(self, topic: str) -> bool:
        if self.ingress is not None:
            return self.ingress == "stream"
        return self.stream.subscribed(topic)

    def close(self) -> None:
        """Stop the Stream gateway."""
        self.stream.close()

    def _create_and_deliver(self, data: Mapping[str, Any]) -> HttpReply:
        for field in ("cardTemplateId", "outTrackId", "openSpaceId"):
            if not isinstance(data.get(field), str) or not data[field]:
                return _error(400, "param.invalid", f"{field} is required")
        card_data = data.get("cardData")
        if not isinstance(card_data, Mapping):
            return _error(400, "param.invalid", "cardData is required")
        problem = _param_map_error(card_data.get("cardParamMap"))
        if problem:
            return _error(400, "param.invalid", problem)
        out_track_id = str(data["outTrackId"])
        space = str(data["openSpaceId"])
        space_type, _, space_id = space.removeprefix("dtv1.card//").partition(".")
        with self._lock:
            if out_track_id not in self._cards:
                template = str(data["cardTemplateId"])
                kind = {STATUS_TEMPLATE_ID: "status", QUESTION_TEMPLATE_ID: "question"}.get(
                    template, "custom"
                )
                self._put_card(
                    out_track_id,
                    {
                        "id": out_track_id,
                        "kind": kind,
                        "template": template,
                        "space": space,
                        "params": dict(card_data["cardParamMap"]),
                        "streaming": {},
                        "streamState": "none",
                        "callbackRouteKey": data.get("callbackRouteKey"),
                        "callbackType": data.get("callbackType"),
                        "updates": 0,
                        "createdAt": time.time(),
                    },
                )
                self._add_timeline({"kind": "card", "from": "bot", "card": out_track_id})
        return HttpReply(
            200,
            {
                "success": True,
                "result": {
                    "outTrackId": out_track_id,
                    "deliverResults": [
                        {
                            "spaceType": space_type,
                            "spaceId": space_id,
                            "success": True,
                            "carrierId": "pqk-" + uuid.uuid4().hex[:12],
                        }
                    ],
                },
            },
        )

    def _streaming(self, data: Mapping[str, Any]) -> HttpReply:
        for field, code in (
            ("outTrackId", "param.stream.outTrackId"),
            ("guid", "param.stream.guidEmpty"),
            ("key", "param.stream.keyEmpty"),
        ):
            if not isinstance(data.get(field), str) or not data[field]:
                return _error(400, code, f"{field} is required")
        if not isinstance(data.get("content"), str):
            return _error(400, "param.stream.contentEmpty", "content is required")
        if not isinstance(data.get("isFull"), bool):
            return _error(400, "param.stream.isFull", "isFull is null")
        with self._lock:
            card = self._cards.get(str(data["outTrackId"]))
            if card is None:
                return _error(400, "param.stream.outTrackId", "card is not exist")
            key = str(data["key"])
            previous = card["streaming"].get(key, "")
            value = data["content"] if data["isFull"] else previous + data["content"]
            card["streaming"][key] = value
            card["params"][key] = value
            if data.get("isError"):
                card["streamState"] = "failed"
            elif data.get("isFinalize"):
                card["streamState"] = "finished"
            else:
                card["streamState"] = "inputing"
            card["updates"] += 1
            self._touch()
        return HttpReply(200, {"success": True, "result": True})

    def _update_instance(self, data: Mapping[str, Any]) -> HttpReply:
        if not isinstance(data.get("outTrackId"), str) or not data["outTrackId"]:
            return _error(400, "param.outTrackIdEmpty", "outTrackId is required")
        card_data = data.get("cardData")
        private = data.get("privateData")
        if not card_data and not private:
            return _error(
                400, "param.cardDataAndPrivateDataBothEmpty", "cardData and privateData are empty"
            )
        new_params: Mapping[str, Any] = {}
        if card_data:
            if not isinstance(card_data, Mapping):
                return _error(400, "param.invalid", "cardData must be an object")
            problem = _param_map_error(card_data.get("cardParamMap"))
            if problem:
                return _error(400, "param.invalid", problem)
            new_params = card_data["cardParamMap"]
        options = data.get("cardUpdateOptions")
        merge = isinstance(options, Mapping) and options.get("updateCardDataByKey") is True
        with self._lock:
            card = self._cards.get(str(data["outTrackId"]))
            if card is None:
                return _error(400, "param.cardNotExist", "card is not exist")
            if card_data:
                if merge:
                    card["params"].update(new_params)
                else:
                    card["params"] = dict(new_params)
            if isinstance(private, Mapping):
                card.setdefault("private", {}).update(private)
            card["updates"] += 1
            self._touch()
        return HttpReply(200, {"success": True, "result": True})

    def _register_callback(self, data: Mapping[str, Any]) -> HttpReply:
        key = data.get("callbackRouteKey")
        url = data.get("callbackUrl")
        if not isinstance(key, str) or not key or not isinstance(url, str) or not url:
            return _error(400, "MissingParameter", "callbackRouteKey and callbackUrl are required")
        with self._lock:
            existing = self._routes.get(key)
            if existing is None or data.get("forceUpdate") is True:
                existing = {"callbackUrl": url, "apiSecret": data.get("apiSecret")}
                self._routes[key] = existing
        return HttpReply(
            200,
            {
                "success": True,
                "result": {
                    "callbackUrl": existing["callbackUrl"],
                    "apiSecret": existing["apiSecret"],
                },
            },
        )

    def _bot_message(self, msg_key: Any, msg_param: Any, via: str) -> HttpReply | None:
        if not isinstance(msg_key, str) or not isinstance(msg_param, str):
            return _error(400, "MissingParameter", "msgKey and msgParam are required")
        try:
            params = json.loads(msg_param)
        except ValueError:
            return _error(400, "param.invalid", "msgParam must be JSON text")
        if not isinstance(params, Mapping):
            return _error(400, "param.invalid", "msgParam must be a JSON object")
        if msg_key in ("sampleImageMsg", "sampleFile"):
            return self._bot_file_message(msg_key, params, via)
        text = params.get("text") or params.get("content") or ""
        with self._lock:
            self._add_timeline(
                {
                    "kind": "message",
                    "from": "bot",
                    "format": "markdown" if msg_key == "sampleMarkdown" else "text",
                    "title": params.get("title"),
                    "text": str(text),
                    "via": via,
                }
            )
        return None

    def _bot_file_message(
        self, msg_key: str, params: Mapping[str, Any], via: str
    ) -> HttpReply | None:
        """A robot image (``photoURL``) or file (``mediaId``, ``fileName``, ``fileType``)
        message naming a media id this emulator issued: shown as a card with its file."""
        field = "photoURL" if msg_key == "sampleImageMsg" else "mediaId"
        media_id = params.get(field)
        if msg_key == "sampleFile":
            for name in ("fileName", "fileType"):
                if not isinstance(params.get(name), str) or not params.get(name):
                    return _error(400, "param.invalid", f"msgParam.{name} is required")
        key = media_id[1:] if isinstance(media_id, str) and media_id.startswith("@") else ""
        if not key or self.bot_files.get(key) is None:
            return _error(400, "param.invalid", f"msgParam.{field}: unknown media id")
        view = self.bot_files.view(key)
        card_id = "file-" + uuid.uuid4().hex[:12]
        with self._lock:
            card: dict[str, Any] = {
                "id": card_id,
                "kind": "image" if msg_key == "sampleImageMsg" else "file",
                "params": {},
                "files": [view],
                "via": via,
            }
            self._put_card(card_id, card)
            self._add_timeline({"kind": "card", "from": "bot", "card": card_id})
        return None

    def _batch_send(self, data: Mapping[str, Any]) -> HttpReply:
        users = data.get("userIds")
        if not isinstance(users, list) or not users or not data.get("robotCode"):
            return _error(400, "MissingParameter", "robotCode and userIds are required")
        problem = self._bot_message(data.get("msgKey"), data.get("msgParam"), "oToMessages")
        if problem:
            return problem
        return HttpReply(
            200,
            {
                "processQueryKey": "pqk-" + uuid.uuid4().hex[:12],
                "invalidStaffIdList": [],
                "flowControlledStaffIdList": [],
                "filteredStaffIdList": [],
            },
        )

    def _group_send(self, data: Mapping[str, Any]) -> HttpReply:
        if not data.get("openConversationId") or not data.get("robotCode"):
            return _error(400, "MissingParameter", "openConversationId and robotCode are required")
        problem = self._bot_message(data.get("msgKey"), data.get("msgParam"), "groupMessages")
        if problem:
            return problem
        return HttpReply(200, {"processQueryKey": "pqk-" + uuid.uuid4().hex[:12]})

    def _session_webhook(self, query: Mapping[str, str], data: Any) -> HttpReply:
        session = query.get("session", "")
        with self._lock:
            known = session in self._sessions
        if not known:
            return HttpReply(200, {"errcode": 300001, "errmsg": "session is expired or unknown"})
        if not isinstance(data, Mapping):
            return HttpReply(200, {"errcode": 40035, "errmsg": "body must be JSON"})
        msgtype = data.get("msgtype")
        section = data.get(str(msgtype)) if isinstance(msgtype, str) else None
        if not isinstance(section, Mapping):
            return HttpReply(200, {"errcode": 40035, "errmsg": "missing message content"})
        text = section.get("text") if msgtype == "markdown" else section.get("content")
        with self._lock:
            self._add_timeline(
                {
                    "kind": "message",
                    "from": "bot",
                    "format": "markdown" if msgtype == "markdown" else "text",
                    "title": section.get("title"),
                    "text": str(text or ""),
                    "via": "sessionWebhook",
                }
            )
        return HttpReply(200, {"errcode": 0, "errmsg": "ok"})

    def _emotion(self, data: Mapping[str, Any], add: bool) -> HttpReply:
        msg_id = data.get("openMsgId")
        if (
            not isinstance(msg_id, str)
            or not data.get("openConversationId")
            or not data.get("robotCode")
        ):
            return _error(400, "MissingParameter", "robotCode, openMsgId, openConversationId")
        name = str(data.get("emotionName") or "")
        with self._lock:
            current = self._reactions.setdefault(msg_id, [])
            if add and name not in current:
                current.append(name)
            elif not add and name in current:
                current.remove(name)
            if len(self._reactions) > 1000:
                self._reactions.pop(next(iter(self._reactions)))
            self._touch()
        return HttpReply(200, {"success": True})

    def _emotion_reply(self, data: Mapping[str, Any]) -> HttpReply:
        return self._emotion(data, True)

    def _emotion_recall(self, data: Mapping[str, Any]) -> HttpReply:
        return self._emotion(data, False)

    def extra_state(self) -> dict[str, Any]:
        return {
            "reactions": {k: list(v) for k, v in self._reactions.items() if v},
            "views": {card_id: card_view(card) for card_id, card in self._cards.items()},
        }

    def reactions(self, msg_id: str) -> list[str]:
        """The reactions currently on a user message."""
        with self._lock:
            return list(self._reactions.get(msg_id, []))

    # -- user input -> signed callbacks ------------------------------------------------------
    # -- files the person sends ----------------------------------------------------------------
    def _message_file(self, data: Mapping[str, Any]) -> HttpReply:
        """``POST /v1.0/robot/messageFiles/download``: a download code (of this robot) for
        a temporary download URL, signed and valid for an hour."""
        code, robot = data.get("downloadCode"), data.get("robotCode")
        if not isinstance(code, str) or not code or not isinstance(robot, str) or not robot:
            return _error(400, "MissingParameter", "downloadCode and robotCode are required")
        if robot != self.app_key:
            return _error(400, "InvalidParameter.RobotCode", "robotCode is not this robot")
        file = self.person_files.get(code)
        if file is None:
            return _error(400, "InvalidParameter.DownloadCode", "downloadCode is invalid")
        expires = int(time.time()) + 3600
        path = f"{_FILE_PREFIX}{code}/{quote(file.name)}"
        url = f"{self.base_url}{path}?expires={expires}&sig={self._url_signature(path, expires)}"
        return HttpReply(200, {"downloadUrl": url})

    def reset(self) -> None:
        """Forget the person's files and the bot's too."""
        self.person_files.clear()
        self.bot_files.clear()
        super().reset()

    def _url_signature(self, path: str, expires: int) -> str:
        return hmac.new(self._url_key, f"{path}:{expires}".encode(), hashlib.sha256).hexdigest()

    def _file_download(self, method: str, path: str, query: Mapping[str, str]) -> HttpReply:
        """``GET /file/download/<code>/<name>?expires=&sig=``: the bytes, when the URL is
        one this emulator signed and it has not expired (no token: the URL is the key)."""
        expires = query.get("expires", "")
        valid = method == "GET" and expires.isdigit() and int(expires) > time.time()
        if valid:
            wanted = self._url_signature(path, int(expires))
            valid = hmac.compare_digest(wanted, query.get("sig", ""))
        code = path[len(_FILE_PREFIX) :].split("/", 1)[0]
        data = self.person_files.serve(code) if valid else None
        if data is None:
            return HttpReply(403, None, content_type="text/plain", raw=b"AccessDenied")
        return HttpReply(200, None, content_type="application/octet-stream", raw=data)

    def send_user_files(
        self, text: str, files: tuple[EmulatedFile, ...], *, origin: Origin | None = None
    ) -> tuple[str, CallbackDelivery]:
        """The person sends ``files`` (and ``text``) the way a DingTalk client does:
        pictures with text (or an @-mention) as one ``richText`` message, a picture alone
        as a ``picture`` message, every other file as its own ``file`` / ``audio`` /
        ``video`` message (any text then goes first as a ``text`` message). Returns the
        first message's id and the first failed delivery's answer (else the last)."""
        pictures = [f for f in files if media_kind(f.content_type) == "image"]
        others = [f for f in files if media_kind(f.content_type) != "image"]
        mention = origin is not None and origin.mentions_bot
        sent: list[tuple[str, CallbackDelivery]] = []

        def code(file: EmulatedFile) -> str:
            return self.person_files.keep(file, prefix="dc_")

        if pictures and (text or mention or len(pictures) > 1):
            rich: list[dict[str, Any]] = [{"text": text}] if text else []
            rich += [{"type": "picture", "downloadCode": code(f)} for f in pictures]
            sent.append(
                self.send_user_message(
                    text,
                    origin=origin,
                    msgtype="richText",
                    content={"richText": rich},
                    files=pictures,
                )
            )
        elif pictures:
            sent.append(
                self.send_user_message(
                    "",
                    origin=origin,
                    msgtype="picture",
                    content={"downloadCode": code(pictures[0])},
                    files=pictures,
                )
            )
        elif text:
            sent.append(self.send_user_message(text, origin=origin))
        for file in others:
            kind = {"audio": "audio", "video": "video"}.get(media_kind(file.content_type), "file")
            content: dict[str, Any] = {"downloadCode": code(file)}
            if kind == "file":
                content["fileName"] = file.name
            else:
                content["duration"] = 1000
            sent.append(
                self.send_user_message(
                    "", origin=origin, msgtype=kind, content=content, files=[file]
                )
            )
        failed = next((result for _, result in sent if result.status >= 400), None)
        return sent[0][0], failed or sent[-1][1]

    def send_user_message(
        self,
        text: str,
        *,
        origin: Origin | None = None,
        msgtype: str = "text",
        content: Mapping[str, Any] | None = None,
        files: list[EmulatedFile] | None = None,
    ) -> tuple[str, CallbackDelivery]:
        """The person types ``text``: a ``CALLBACK`` frame when the bot connects by
        Stream, else a signed robot callback, goes to the SDK.

        ``origin`` (`Origin`): another person (``senderStaffId``), a group
        (``conversationType`` 2, `GROUP_CONVERSATION_ID` unless a chat is named), an
        @-mention of the robot (``atUsers`` lists ``chatbotUserId``, ``isInAtList``).
        DingTalk has no threads: a ``thread_id`` is refused (``ValueError``).
        ``msgtype`` and ``content`` make another kind of message (a picture, file or
        richText: `send_user_files`), ``files`` is what the page shows of its files.
        Returns the message id and the SDK's answer.
        """
        origin = origin or Origin()
        if origin.thread_id is not None:
            raise ValueError("threadId: DingTalk conversations have no threads")
        user_id = origin.user_id or self.user_id
        conversation = origin.chat_id or (
            GROUP_CONVERSATION_ID if origin.group else self.conversation_id
        )
        msg_id = "msg" + uuid.uuid4().hex[:16]
        now_ms = int(time.time() * 1000)
        session = secrets.token_hex(8)
        with self._lock:
            self._sessions[session] = msg_id
            if len(self._sessions) > 1000:
                self._sessions.pop(next(iter(self._sessions)))
            entry: dict[str, Any] = {"kind": "message", "from": "user", "format": "text"}
            entry["text"] = text
            if files:
                entry["files"] = [
                    {"name": f.name, "contentType": f.content_type, "size": len(f.data)}
                    for f in files
                ]
            self._add_timeline({**entry, "msgId": msg_id})
        payload: dict[str, Any] = {
            "msgId": msg_id,
            "msgtype": msgtype,
            **({"content": dict(content)} if content is not None else {"text": {"content": text}}),
            "createAt": now_ms,
            "conversationType": "2" if origin.group else "1",
            "conversationId": conversation,
            "senderId": "$:LWCP_v1:$" + user_id,
            "senderStaffId": user_id,
            "senderNick": self.user_name if user_id == self.user_id else user_id,
            "senderCorpId": "ding-playground",
            "chatbotUserId": BOT_DINGTALK_ID,
            "chatbotCorpId": "ding-playground",
            "robotCode": self.app_key,
            "isAdmin": False,
            "isInAtList": origin.mentions_bot or not origin.group,
            "atUsers": [{"dingtalkId": BOT_DINGTALK_ID}] if origin.mentions_bot else [],
            "sessionWebhook": f"{self.base_url}/robot/sendBySession?session={session}",
            "sessionWebhookExpiredTime": now_ms + 90 * 60 * 1000,
        }
        if self._by_stream(ROBOT_TOPIC):  # the bot connects by Stream
            return msg_id, self._deliver_frame("robot", ROBOT_TOPIC, payload)
        timestamp = str(now_ms)
        headers = {
            "Content-Type": "application/json; charset=utf-8",
            "timestamp": timestamp,
            "sign": dingtalk_robot_sign(timestamp, self.app_secret),
        }
        body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        return msg_id, self._send_callback("robot", self.robot_callback_url, headers, body)

    def _send_callback(
        self, kind: str, url: str, headers: Mapping[str, str], body: bytes
    ) -> CallbackDelivery:
        if not self.instance_urls:
            return super()._send_callback(kind, url, headers, body)
        with self._lock:  # round robin, like a load balancer in front of the instances
            index = self._next_instance % len(self.instance_urls)
            self._next_instance += 1
        path = url.split("://", 1)[-1].partition("/")[2]
        target = f"{self.instance_urls[index].rstrip('/')}/{path}"
        result = self.deliver(target, headers, body)
        self._record_callback(kind, "http", result, url=target, instance=index)
        return result

    def _card_callback_target(self, card: Mapping[str, Any]) -> tuple[str, str | None]:
        route_key = card.get("callbackRouteKey")
        with self._lock:
            route = self._routes.get(route_key) if isinstance(route_key, str) else None
        if route is not None:
            secret = route.get("apiSecret")
            return str(route["callbackUrl"]), secret if isinstance(secret, str) and secret else None
        return self.card_callback_url, self.api_secret

    def card_action(
        self,
        card_id: str,
        action: str,
        form: Mapping[str, Any] | None = None,
        *,
        user_id: str | None = None,
    ) -> CallbackDelivery:
        """The person clicks on a card: ``stop``, ``submit`` (with ``form``) or ``cancel``.

        The card callback (``actionCallback``) goes to the SDK as a ``CALLBACK`` frame
        for a ``STREAM`` card of a bot connected by Stream, else signed over HTTP;
        returns the SDK's answer (the ACK's code and data for a frame).
        """
        card = self.card(card_id)
        if card is None:
            raise KeyError(card_id)
        buttons = {"status": ("stop",), "question": ("submit", "cancel")}.get(str(card.get("kind")))
        if buttons is not None and action not in buttons:
            raise ValueError(f"action: the card has no {action!r} button")
        params: dict[str, Any]
        if action == "stop":
            action_ids, params = [STOP_ACTION_ID], {}
        elif action == "submit":
            action_ids, params = ["submit"], {"form": dict(form or {})}
        elif action == "cancel":
            action_ids, params = ["cancel"], {"user_cancel": "true"}
        else:
            action_ids, params = [action], dict(form or {})
        payload = {
            "type": "actionCallback",
            "outTrackId": card_id,
            "corpId": "ding-playground",
            "userId": user_id or self.user_id,
            "content": json.dumps(
                {"cardPrivateData": {"actionIds": action_ids, "params": params}},
                ensure_ascii=False,
            ),
        }
        if card.get("callbackType") == "STREAM" and self._by_stream(CARD_TOPIC):
            return self._deliver_frame("card", CARD_TOPIC, payload)
        url, secret = self._card_callback_target(card)
        headers = {"Content-Type": "application/json; charset=utf-8"}
        if secret:
            timestamp = str(int(time.time() * 1000))
            headers["x-ddpaas-signature-timestamp"] = timestamp
            headers["x-ddpaas-signature"] = dingtalk_card_signature(timestamp, secret)
        body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        return self._send_callback("card", url, headers, body)


_TERMINAL_WORDS = {
    "completed": "completed",
    "failed": "failed",
    "stopped": "stopped",
    "cancelled": "cancelled",
    "unavailable": "failed",
}
# the same status words in every language of the catalog (a status line is localized)
_TERMINAL_WORDS.update(
    {
        CATALOG[locale][f"status.{word}"].lower(): state
        for locale in LOCALES
        for word, state in _TERMINAL_WORDS.items()
    }
)


def _form_questions(raw: Any) -> list[dict[str, Any]]:
    try:
        form = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return []
    fields = form.get("fields") if isinstance(form, Mapping) else None
    if not isinstance(fields, list):
        return []
    questions: list[dict[str, Any]] = []
    by_name: dict[str, dict[str, Any]] = {}
    for field in fields:
        if not isinstance(field, Mapping):
            continue
        kind = field.get("type")
        name = str(field.get("name", ""))
        if kind in ("CHECKBOX_GROUP", "MULTI_CHECKBOX_GROUP"):
            options = [
                {"value": str(o.get("value", "")), "text": str(o.get("text", o.get("value", "")))}
                for o in field.get("options", [])
                if isinstance(o, Mapping)
            ]
            question = {
                "name": name,
                "label": str(field.get("label", "")),
                "multi": kind == "MULTI_CHECKBOX_GROUP",
                "options": options,
                "other": None,
            }
            questions.append(question)
            by_name[name] = question
        elif kind == "TEXT" and name.endswith("_other") and name[: -len("_other")] in by_name:
            by_name[name[: -len("_other")]]["other"] = {
                "name": name,
                "placeholder": str(field.get("placeholder", "")),
            }
    return questions


def card_view(card: Mapping[str, Any]) -> dict[str, Any]:
    """A platform-neutral view of a DingTalk card for the page (kind, state, actions)."""
    params: Mapping[str, Any] = card.get("params", {})
    view: dict[str, Any] = {"id": card.get("id"), "kind": card.get("kind"), "actions": []}
    if card.get("kind") == "status":
        line = str(params.get("statusLine", ""))
        flow = str(params.get("flowStatus", ""))
        state = "running"
        if flow == "5" or card.get("streamState") == "failed":
            state = "failed"
        elif flow == "3":
            word = line.split(" ", 1)[0].lower() if line else ""
            state = _TERMINAL_WORDS.get(word, "completed")
        view.update(
            {
                "state": state,
                "statusLine": line,
                "content": str(params.get("content", "")),
            }
        )
        if params.get("stop_action") == "true" and state == "running":
            view["actions"] = ["stop"]
            # a template binds its Stop button's label to ``stop_text`` (default "Stop")
            view["stopLabel"] = str(params.get("stop_text") or "Stop")
    elif card.get("kind") in ("image", "file"):
        files = [dict(f) for f in card.get("files", ())]
        view.update({"state": "shown", "text": "", "files": files})
    elif card.get("kind") == "question":
        state = str(params.get("card_status", "pending"))
        view.update(
            {
                "state": state,
                "title": str(params.get("question_title", "")),
                "desc": str(params.get("question_desc", "")),
                "button": str(params.get("form_btn_text", "Submit")),
                "questions": _form_questions(params.get("form")),
            }
        )
        if state == "pending":
            view["actions"] = ["submit", "cancel"]
        view["awaitsAnswer"] = state == "pending"
    else:
        view.update(
            {"state": "shown", "content": json.dumps(dict(params), ensure_ascii=False, indent=1)}
        )
    return view

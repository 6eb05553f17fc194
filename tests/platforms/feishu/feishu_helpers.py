"""Builders for Feishu callbacks exactly as the platform sends them."""

from __future__ import annotations

import itertools
import json
from typing import Any

from channelkit.core import ChannelConfig
from channelkit.ingress import Headers, IngressRequest
from channelkit.platforms.feishu import FeishuChannel, FeishuConfig
from channelkit.platforms.feishu.crypto import encrypt_event, feishu_signature

#: every card action is a distinct callback (its own event_id), as on the platform
_CALLBACKS = itertools.count(1)

TOKEN = "verify-token"
ENCRYPT_KEY = "encrypt-key-123"


def request(
    payload: Any,
    *,
    path: str = "/feishu/events",
    encrypt_key: str | None = None,
    timestamp: str | None = None,
    nonce: str = "nonce-1",
    sign: bool = True,
    signature: str | None = None,
    raw: bytes | None = None,
) -> IngressRequest:
    """A POST as Feishu makes it (encrypted + signed when ``encrypt_key`` is given)."""
    if raw is not None:
        body = raw
    elif encrypt_key is not None:
        body = json.dumps({"encrypt": encrypt_event(encrypt_key, payload)}).encode()
    else:
        body = json.dumps(payload, ensure_ascii=False).encode()
    headers: dict[str, str] = {"Content-Type": "application/json"}
    if timestamp is not None:
        headers["X-Lark-Request-Timestamp"] = timestamp
        headers["X-Lark-Request-Nonce"] = nonce
    if encrypt_key is not None and sign and timestamp is not None:
        headers["X-Lark-Signature"] = signature or feishu_signature(
            timestamp, nonce, encrypt_key, body
        )
    elif signature is not None:
        headers["X-Lark-Signature"] = signature
    return IngressRequest(method="POST", path=path, headers=Headers(headers), body=body)


def channel_on(
    rt: Any,
    api: Any,
    bridge: Any,
    *,
    channel_config: ChannelConfig | None = None,
    store: Any = None,
    **settings: Any,
) -> FeishuChannel:
    """A webhook `FeishuChannel` of the test app on the test runtime ``rt`` (its pools,
    scheduler and fake clock), calling ``api`` and running ``bridge``. ``settings`` add to
    or override the app's config (``encrypt_key``, ``max_clock_skew_s``...);
    ``store``: the state store shared with other instances."""
    config = FeishuConfig.from_dict(
        {"app_id": "cli_1", "app_secret": "s", "verification_token": TOKEN, **settings}
    )
    return FeishuChannel(
        config,
        bridge,
        channel_config=channel_config or ChannelConfig(name="feishu"),
        api=api,
        executor=rt.pool,
        run_executor=rt.run_pool,
        scheduler=rt.scheduler,
        clock=rt.clock,
        store=store,
    )


def acking_like_the_web_layer(channel: Any) -> Any:
    """Make direct calls of ``channel``'s two handlers behave like the web layer: the
    handler answers, then its deferred work (``IngressResponse.after``) runs once.

    The unwrapped handlers stay reachable as ``type(channel).handle_event_request``.
    """

    def wrap(handler: Any) -> Any:
        def handle(req: IngressRequest) -> Any:
            response = handler(req)
            response.run_after()
            return response

        return handle

    channel.handle_event_request = wrap(channel.handle_event_request)
    channel.handle_card_request = wrap(channel.handle_card_request)
    return channel


def challenge(token: str = TOKEN, value: str = "ch-1") -> dict[str, Any]:
    return {"challenge": value, "token": token, "type": "url_verification"}


def message_event(
    text: str = "hello",
    *,
    token: str = TOKEN,
    open_id: str = "ou_owner",
    chat_id: str = "oc_chat",
    message_id: str = "om_in1",
    event_id: str = "ev-1",
    chat_type: str = "p2p",
) -> dict[str, Any]:
    return {
        "schema": "2.0",
        "header": {
            "event_id": event_id,
            "event_type": "im.message.receive_v1",
            "create_time": "1700000000000",
            "token": token,
            "app_id": "cli_1",
            "tenant_key": "t",
        },
        "event": {
            "sender": {"sender_id": {"open_id": open_id}, "sender_type": "user"},
            "message": {
                "message_id": message_id,
                "chat_id": chat_id,
                "chat_type": chat_type,
                "message_type": "text",
                "content": json.dumps({"text": text}),
            },
        },
    }


def card_action(
    value: dict[str, Any],
    *,
    token: str = TOKEN,
    open_id: str = "ou_owner",
    chat_id: str = "oc_chat",
    message_id: str = "om_card",
    form_value: dict[str, Any] | None = None,
    name: str | None = None,
) -> dict[str, Any]:
    action: dict[str, Any] = {"value": value, "tag": "button"}
    if form_value is not None:
        action["form_value"] = form_value
    if name is not None:
        action["name"] = name
    return {
        "schema": "2.0",
        "header": {
            "event_id": f"cb-{next(_CALLBACKS)}-" + json.dumps(value, sort_keys=True),
            "token": token,
            "create_time": "1700000000000000",
            "event_type": "card.action.trigger",
            "tenant_key": "t",
            "app_id": "cli_1",
        },
        "event": {
            "operator": {"open_id": open_id},
            "token": "c-delayed",
            "action": action,
            "host": "im_message",
            "context": {"open_message_id": message_id, "open_chat_id": chat_id},
        },
    }


# --- a fake Feishu OpenAPI on requests-mock -----------------------------------------

import re  # noqa: E402
import threading  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from urllib.parse import urlparse  # noqa: E402

import requests_mock  # noqa: E402

BASE_URL = "https://feishu.test"


@dataclass
class Call:
    method: str
    path: str
    body: Any
    at: float = 0.0

    @property
    def op(self) -> str:
        return op_name(self)

    @property
    def card(self) -> Any:
        """The card JSON carried by this call, if any."""
        body = self.body or {}
        op = self.op
        if op in ("send", "patch"):
            content = json.loads(body["content"])
            return content if "schema" in content else None
        if op == "create_card":
            return json.loads(body["data"])
        if op == "update_card":
            return json.loads(body["card"]["data"])
        return None


@dataclass
class FakeFeishu:
    """Records every call; ids are deterministic; failures and gates are switchable."""

    clock: Any = None
    calls: list[Call] = field(default_factory=list)
    fail: set[str] = field(default_factory=set)  # op names: create_card, stream, patch, send, ...
    gate: threading.Event | None = None  # blocks stream/patch writes while set-able
    gate_ops: tuple[str, ...] = ("stream", "patch")
    entered: threading.Event = field(default_factory=threading.Event)
    in_flight: int = 0
    max_in_flight: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    counter: int = 0

    def install(self, mocker: requests_mock.Mocker) -> None:
        routes = [
            ("POST", r"/open-apis/cardkit/v1/cards(\?|$)", "create_card"),
            ("PUT", r"/open-apis/cardkit/v1/cards/[^/]+/elements/[^/]+/content(\?|$)", "stream"),
            ("PATCH", r"/open-apis/cardkit/v1/cards/[^/]+/settings(\?|$)", "settings"),
            ("PUT", r"/open-apis/cardkit/v1/cards/[^/]+(\?|$)", "update_card"),
            ("POST", r"/open-apis/im/v1/messages(\?|$)", "send"),
            ("POST", r"/open-apis/im/v1/messages/[^/]+/reply(\?|$)", "send"),
            ("PATCH", r"/open-apis/im/v1/messages/[^/]+(\?|$)", "patch"),
            ("POST", r"/open-apis/im/v1/messages/[^/]+/reactions(\?|$)", "react"),
            ("DELETE", r"/open-apis/im/v1/messages/[^/]+/reactions/[^/]+(\?|$)", "unreact"),
        ]
        for method, pattern, op in routes:
            mocker.register_uri(
                method, re.compile(re.escape(BASE_URL) + pattern), json=self._handler(op)
            )

    def _handler(self, op: str) -> Any:
        def handle(req: Any, context: Any) -> Any:
            body = req.json() if req.body else None
            with self.lock:
                path = urlparse(req.url).path
                self.calls.append(
                    Call(req.method, path, body, self.clock.now() if self.clock else 0.0)
                )
                self.counter += 1
                n = self.counter
                self.in_flight += 1
                self.max_in_flight = max(self.max_in_flight, self.in_flight)
            try:
                if self.gate is not None and op in self.gate_ops:
                    self.entered.set()
                    assert self.gate.wait(5.0)
                if op in self.fail:
                    context.status_code = 400
                    return {"code": 230099, "msg": "failed"}
                data: dict[str, Any] = {}
                if op == "create_card":
                    data = {"card_id": f"card_{n}"}
                elif op == "send":
                    data = {"message_id": f"om_{n}"}
                elif op == "react":
                    data = {"reaction_id": f"re_{n}"}
                return {"code": 0, "msg": "ok", "data": data}
            finally:
                with self.lock:
                    self.in_flight -= 1

        return handle

    def ops(self, *names: str) -> list[Call]:
        """Calls whose op name (derived from method+path) is in ``names``."""
        return [c for c in self.calls if op_name(c) in names]


def op_name(call: Call) -> str:
    path = call.path
    if "/cardkit/v1/cards" in path:
        if path.endswith("/content"):
            return "stream"
        if path.endswith("/settings"):
            return "settings"
        return "create_card" if call.method == "POST" else "update_card"
    if "/reactions" in path:
        return "react" if call.method == "POST" else "unreact"
    if call.method == "PATCH":
        return "patch"
    return "send"

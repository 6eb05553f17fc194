"""Per-chat rate limits of the Slack, Discord, Feishu, DingTalk and Weixin emulators (off
until asked for; Telegram has its own, `channelkit.playground.telegram_limits`).

Each platform documents a limit per chat (or per message or card) for its writes: Slack
``chat.postMessage`` one a second per channel; Discord a per-channel message route;
Feishu five a second per chat for a new message, per message for a card patch, ten a
second per CardKit card; DingTalk a robot's messages per conversation, card updates per
card; Weixin publishes none. `write_key()` names the bucket a call writes into (from the
API path alone, so one hook in `EmulatorBase` serves every emulator) and `refusal()` is
the platform's own 429 shape: Slack ``{"ok": false, "error": "ratelimited"}`` with
``Retry-After``; Discord ``{"message", "retry_after", "global"}``; Feishu
``{"code": 99991400, ...}`` with ``x-ogw-ratelimit-reset``; DingTalk HTTP 403
``Forbidden.AccessDenied.QpsLimitForAppkeyAndApi``; Weixin ``ret -1`` / ``errcode 45011``.

``POST /_emulator/limits`` with ``{"enabled": true}`` turns them on (``false`` off), with
optional ``per_second`` and ``burst`` for every bucket; the answer (and ``GET``) shows the
settings and ``rejected_429``, the refusals so far. A reset turns them off.
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import parse_qsl

__all__ = ["LIMITS_PATH", "Reply", "WriteLimits", "refusal", "write_key"]

#: An answer of the emulator: ``(status, JSON payload, extra headers)`` (the emulator makes
#: its `HttpReply` of it; this module does not import the emulator, which imports it).
Reply = tuple[int, Any, tuple[tuple[str, str], ...]]

LIMITS_PATH = "/_emulator/limits"
#: Buckets kept at once (the least recently used goes past it).
MAX_KEYS = 10_000
_DEFAULTS = {"per_second": 1.0, "burst": 5.0}

_SLACK = re.compile(r"^(?:/api)?/(chat\.postMessage|chat\.startStream)$")
_DISCORD = re.compile(r"^(?:/api/v\d+)?/channels/(\d+)/messages(?:/\d+)?$")
_FEISHU_CREATE = re.compile(r"^/open-apis/im/v1/messages$")
_FEISHU_MESSAGE = re.compile(r"^/open-apis/im/v1/messages/([^/]+)(/reply)?$")
_FEISHU_CARD = re.compile(r"^/open-apis/cardkit/v1/cards/([^/]+)(?:/.*)?$")
_DINGTALK_MESSAGE = {
    "/v1.0/robot/groupMessages/send": "openConversationId",
    "/v1.0/robot/oToMessages/batchSend": "userIds",
}
_DINGTALK_CARD = ("/v1.0/card/streaming", "/v1.0/card/instances")


def _body(raw: bytes, headers: Mapping[str, str]) -> Mapping[str, Any]:
    """The JSON (or form) object of a request body; empty when it is neither."""
    if not raw:
        return {}
    if raw[:1] == b"{":
        import json

        try:
            parsed = json.loads(raw.decode("utf-8"))
        except ValueError:
            return {}
        return parsed if isinstance(parsed, dict) else {}
    if "form" in headers.get("content-type", ""):
        return dict(parse_qsl(raw.decode("utf-8", "replace")))
    return {}


def _first(value: Any) -> str | None:
    if isinstance(value, list):
        value = value[0] if value else None
    return str(value) if isinstance(value, str | int) and str(value) else None


def write_key(
    method: str, path: str, headers: Mapping[str, str], raw: bytes
) -> tuple[str, str] | None:
    """``(platform, bucket)`` of a call that writes into a chat, message or card; None
    for any other call."""
    if method == "POST" and (m := _SLACK.match(path)):
        channel = _first(_body(raw, headers).get("channel"))
        return ("slack", f"post:{channel}") if channel else None
    if method in ("POST", "PATCH") and (m := _DISCORD.match(path)):
        return "discord", f"message:{m.group(1)}"
    if method == "POST" and _FEISHU_CREATE.match(path):
        chat = _first(_body(raw, headers).get("receive_id"))
        return ("feishu", f"send:{chat}") if chat else None
    if method in ("POST", "PATCH") and (m := _FEISHU_MESSAGE.match(path)):
        if method == "POST" and not m.group(2):
            return None
        family = "send" if m.group(2) else "patch"
        return "feishu", f"{family}:{m.group(1)}"
    if method in ("PUT", "PATCH") and (m := _FEISHU_CARD.match(path)):
        return "feishu", f"card:{m.group(1)}"
    if method == "POST" and path in _DINGTALK_MESSAGE:
        chat = _first(_body(raw, headers).get(_DINGTALK_MESSAGE[path]))
        return ("dingtalk", f"message:{chat}") if chat else None
    if method == "POST" and path == "/v1.0/card/instances/createAndDeliver":
        space = _first(_body(raw, headers).get("openSpaceId")) or ""
        for kind in ("IM_GROUP.", "IM_ROBOT."):
            if kind in space:
                return "dingtalk", f"message:{space.split(kind, 1)[1]}"
        return None
    if method == "PUT" and path in _DINGTALK_CARD:
        card = _first(_body(raw, headers).get("outTrackId"))
        return ("dingtalk", f"card:{card}") if card else None
    if method == "POST" and path == "/ilink/bot/sendmessage":
        msg = _body(raw, headers).get("msg")
        person = _first(msg.get("to_user_id")) if isinstance(msg, Mapping) else None
        return ("weixin", f"message:{person}") if person else None
    return None


def _reply(status: int, payload: Any, headers: tuple[tuple[str, str], ...] = ()) -> Reply:
    return status, payload, headers


def refusal(platform: str, retry_after: float) -> Reply:
    """The 429 (DingTalk: 403) ``platform`` answers past a limit, in its own shape."""
    whole = max(1, math.ceil(retry_after))
    if platform == "slack":
        return _reply(
            429, {"ok": False, "error": "ratelimited"}, headers=(("Retry-After", str(whole)),)
        )
    if platform == "discord":
        return _reply(
            429,
            {
                "message": "You are being rate limited.",
                "retry_after": round(retry_after, 3),
                "global": False,
            },
            headers=(
                ("Retry-After", str(whole)),
                ("X-RateLimit-Scope", "shared"),
                ("X-RateLimit-Reset-After", f"{retry_after:.3f}"),
            ),
        )
    if platform == "feishu":
        return _reply(
            429,
            {"code": 99991400, "msg": "request trigger frequency limit"},
            headers=(("x-ogw-ratelimit-limit", "5"), ("x-ogw-ratelimit-reset", str(whole))),
        )
    if platform == "dingtalk":
        return _reply(
            403,
            {
                "code": "Forbidden.AccessDenied.QpsLimitForAppkeyAndApi",
                "message": "request exceeds the QPS limit",
                "requestid": "emulated",
            },
        )
    return _reply(200, {"ret": -1, "errcode": 45011, "errmsg": "api freq out of limit"})


class WriteLimits:
    """Token buckets per written chat, message or card on ``clock`` (seconds; monotonic
    by default; a test may hand its `FakeClock`'s ``now``). Thread-safe."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self.enabled = False
        self.settings = dict(_DEFAULTS)
        self.rejected = 0
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    def check(self, method: str, path: str, headers: Mapping[str, str], raw: bytes) -> Reply | None:
        """None when the call may go (its token taken, or it writes nothing limited), else
        the refusal (counted)."""
        if not self.enabled:
            return None
        found = write_key(method, path, headers, raw)
        if found is None:
            return None
        platform, key = found
        with self._lock:
            rate, burst = self.settings["per_second"], self.settings["burst"]
            now = self.clock()
            tokens, then = self._buckets.pop(key, (burst, now))
            tokens = min(burst, tokens + max(0.0, now - then) * rate)
            wait: float | None = None
            if tokens >= 1.0:
                tokens -= 1.0
            else:
                wait = (1.0 - tokens) / rate
                self.rejected += 1
            self._buckets[key] = (tokens, now)
            while len(self._buckets) > MAX_KEYS:
                self._buckets.popitem(last=False)
        return None if wait is None else refusal(platform, wait)

    def view(self) -> dict[str, Any]:
        with self._lock:
            return {"enabled": self.enabled, **self.settings, "rejected_429": self.rejected}

    def reset(self) -> None:
        with self._lock:
            self.enabled = False
            self.settings = dict(_DEFAULTS)
            self.rejected = 0
            self._buckets.clear()

    def control(self, method: str, path: str, data: Any) -> Reply | None:
        """``GET`` / ``POST /_emulator/limits``; None for any other path."""
        if path != LIMITS_PATH:
            return None
        if method == "GET":
            return _reply(200, self.view())
        if method != "POST":
            return _reply(405, {"error": "method not allowed"})
        body = data if isinstance(data, dict) else {}
        enabled = body.get("enabled", True)
        if not isinstance(enabled, bool):
            return _reply(400, {"error": "enabled must be true or false"})
        changes: dict[str, float] = {}
        for name in _DEFAULTS:
            if name not in body:
                continue
            value = body[name]
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                return _reply(400, {"error": f"{name} must be a number > 0"})
            if name == "burst" and value < 1:
                return _reply(400, {"error": "burst must be >= 1"})
            changes[name] = float(value)
        with self._lock:
            self.enabled = enabled
            self.settings.update(changes)
            self._buckets.clear()
        return _reply(200, self.view())

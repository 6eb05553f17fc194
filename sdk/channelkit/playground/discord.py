"""A Discord emulator: the REST routes a bot calls, the Gateway, signed interactions.

REST (``Authorization: Bot <token>``; paths with or without the ``/api/v10`` prefix;
answers shaped as Discord's, errors as ``{"message", "code"}``):

* ``POST /channels/{id}/messages``, ``GET`` / ``PATCH`` / ``DELETE
  /channels/{id}/messages/{message}``: ``content`` (at most 2,000 characters), ``embeds``
  (at most 10), ``components`` (action rows of buttons and select menus, or Components
  v2 with flag ``32768``), ``flags``; an empty message is code 50006, a bad field 50035
  naming it, an unknown message 10008;
* ``POST /channels/{id}/typing`` (the indicator shows for 10 s);
* ``PUT`` / ``DELETE /channels/{id}/messages/pins/{message}`` (and the older
  ``/channels/{id}/pins/{message}``), ``GET /channels/{id}/messages/pins``;
* ``POST /users/@me/channels`` (``recipient_id``: the DM channel), ``GET
  /channels/{id}``, ``GET /users/@me``, ``GET /gateway/bot``;
* ``POST /interactions/{id}/{token}/callback`` (no bot token: the interaction's token):
  types 4 (a message; flag 64 makes it ephemeral), 5 (deferred: a "thinking" message), 6
  (deferred update), 7 (update the component's message in place), 9 (a modal); once per
  interaction, within `INTERACTION_ACK_SECONDS` (real time) of its delivery, else 10062;
* ``POST /webhooks/{application}/{token}`` (followups, ephemeral with flag 64) and
  ``GET`` / ``PATCH`` / ``DELETE /webhooks/{application}/{token}/messages/{id|@original}``.

Rate limits: every bot route (interaction callbacks and followups excepted, as on
Discord) counts in a per-route bucket per top-level resource (the channel) on the
emulator's clock (the playground's, so a `FakeClock` moves it); each answer carries
``X-RateLimit-Limit`` / ``-Remaining`` / ``-Reset`` / ``-Reset-After`` / ``-Bucket``, and
a request over the limit is HTTP 429 with ``{"message", "retry_after", "global": false}``
and ``Retry-After``. `DEFAULT_LIMITS` holds the limits; `DiscordEmulator.set_limit()`
changes one, `DiscordEmulator.force_429()` answers the next requests of a route 429.

The person's messages are ``MESSAGE_CREATE`` dispatches on the Gateway
(`channelkit.playground.discord_gateway`). Clicks on buttons and select menus, and
modal submits, are ``INTERACTION_CREATE`` dispatches with ingress ``"gateway"``, or, with
``"interactions"``, POSTs to the bot's interactions endpoint signed with the emulator's
Ed25519 key (`DiscordEmulator.public_key` goes to the channel's config); the endpoint's
answer is applied as the interaction's response. Every interaction carries the clicking
person's client language as ``locale``: `DiscordEmulator.default_locale` (``"en-US"``; the
playground sets the channel's ``locale``, so its people use a client in that language)
unless `DiscordEmulator.set_locale()` or ``POST /_emulator/locale {"userId", "locale"}``
gave them another.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import re
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from channelkit.core.catalog import CATALOG
from channelkit.playground.bot_files import BotFiles, parse_multipart
from channelkit.playground.discord_gateway import DiscordGatewayServer
from channelkit.playground.emulator import (
    CallbackDelivery,
    Deliver,
    EmulatedFile,
    EmulatorBase,
    HttpReply,
    Origin,
)
from channelkit.playground.person_files import PersonFiles
from channelkit.runtime.clock import Clock, SystemClock

__all__ = [
    "APPLICATION_ID",
    "BOT_USER_ID",
    "DEFAULT_LIMITS",
    "DM_CHANNEL",
    "GROUP_CHANNEL",
    "GUILD_ID",
    "INTERACTION_ACK_SECONDS",
    "PERSON_ID",
    "DiscordEmulator",
    "discord_view",
]

#: The application, and its bot user (the same id, as for every new application).
APPLICATION_ID = "1100000000000000001"
BOT_USER_ID = APPLICATION_ID
BOT_NAME = "channelkit"
#: The emulator's person, their DM with the bot, the guild and its default text channel.
PERSON_ID = "1200000000000000001"
DM_CHANNEL = "1300000000000000001"
GUILD_ID = "1400000000000000001"
GROUP_CHANNEL = "1500000000000000001"

#: route -> (requests, window seconds) per top-level resource.
DEFAULT_LIMITS: Mapping[str, tuple[int, float]] = {
    "create_message": (5, 5.0),
    "edit_message": (5, 5.0),
    "delete_message": (5, 1.0),
    "get_message": (50, 1.0),
    "typing": (5, 5.0),
    "pin": (5, 5.0),
    "pins": (5, 5.0),
    "create_dm": (5, 5.0),
    "get_channel": (50, 1.0),
    "me": (50, 1.0),
}
#: Seconds (real time) an interaction may wait for its first response.
INTERACTION_ACK_SECONDS = 3.0
#: Seconds an interaction token accepts followups.
INTERACTION_TOKEN_SECONDS = 15 * 60.0
#: Seconds a typing indicator shows.
TYPING_SECONDS = 10.0
#: Interactions, channels, forced 429s remembered (oldest dropped).
MAX_KEPT = 1_000

#: Channel types of threads (announcement, public, private).
THREAD_TYPES = frozenset({10, 11, 12})
EPHEMERAL = 1 << 6
IS_COMPONENTS_V2 = 1 << 15
MAX_CONTENT = 2_000
MAX_EMBEDS = 10
MAX_CUSTOM_ID = 100
#: the client language of a person's interactions unless `set_locale()` gave another
DEFAULT_LOCALE = "en-US"
#: people whose client language the emulator remembers (the oldest forgotten first)
MAX_LOCALES = 1_000
#: the labels of a Stop button in every language the SDK shows it in (``stop`` clicks it)
STOP_LABELS = frozenset(table["button.stop"].strip().lower() for table in CATALOG.values())

_SNOWFLAKE = r"(\d{1,20})"
#: an attachment on the emulated CDN: ``/attachments/<channel>/<id>/<name>``
_CDN_PATH_RE = re.compile(r"^/attachments/[0-9]+/([0-9a-f]{16})/[^/]+$")
_PREFIX = re.compile(r"^/api(?:/v\d+)?(?=/)")
_ROUTES: list[tuple[str, re.Pattern[str], str]] = [
    (m, re.compile(p), name)
    for m, p, name in (
        ("GET", r"/users/@me", "me"),
        ("GET", r"/gateway(?:/bot)?", "gateway"),
        ("POST", r"/users/@me/channels", "create_dm"),
        ("GET", rf"/channels/{_SNOWFLAKE}", "get_channel"),
        ("POST", rf"/channels/{_SNOWFLAKE}/messages", "create_message"),
        ("GET", rf"/channels/{_SNOWFLAKE}/(?:messages/)?pins", "pins"),
        ("PUT", rf"/channels/{_SNOWFLAKE}/(?:messages/)?pins/{_SNOWFLAKE}", "pin"),
        ("DELETE", rf"/channels/{_SNOWFLAKE}/(?:messages/)?pins/{_SNOWFLAKE}", "pin"),
        ("GET", rf"/channels/{_SNOWFLAKE}/messages/{_SNOWFLAKE}", "get_message"),
        ("PATCH", rf"/channels/{_SNOWFLAKE}/messages/{_SNOWFLAKE}", "edit_message"),
        ("DELETE", rf"/channels/{_SNOWFLAKE}/messages/{_SNOWFLAKE}", "delete_message"),
        ("POST", rf"/channels/{_SNOWFLAKE}/typing", "typing"),
        ("POST", rf"/interactions/{_SNOWFLAKE}/([^/]+)/callback", "callback"),
        ("POST", rf"/webhooks/{_SNOWFLAKE}/([^/]+)", "followup"),
        ("GET", rf"/webhooks/{_SNOWFLAKE}/([^/]+)/messages/(@original|\d{{1,20}})", "wh_get"),
        ("PATCH", rf"/webhooks/{_SNOWFLAKE}/([^/]+)/messages/(@original|\d{{1,20}})", "wh_edit"),
        (
            "DELETE",
            rf"/webhooks/{_SNOWFLAKE}/([^/]+)/messages/(@original|\d{{1,20}})",
            "wh_delete",
        ),
    )
]
#: routes authenticated by the interaction token instead of the bot token (no bucket)
_TOKEN_ROUTES = frozenset({"callback", "followup", "wh_get", "wh_edit", "wh_delete"})


def _error(status: int, code: int, message: str, **extra: Any) -> HttpReply:
    return HttpReply(status, {"message": message, "code": code, **extra})


def _form_error(field: str, code: str, message: str) -> HttpReply:
    return _error(
        400,
        50035,
        "Invalid Form Body",
        errors={field: {"_errors": [{"code": code, "message": message}]}},
    )


def _no_content() -> HttpReply:
    return HttpReply(204, None, raw=b"")


def _user(user_id: str) -> dict[str, Any]:
    """A user object: people have a display name and an avatar; the bot has neither
    (``null``, as Discord sends for a bot without them)."""
    if user_id == BOT_USER_ID:
        return {
            "id": user_id,
            "username": BOT_NAME,
            "global_name": None,
            "discriminator": "0",
            "avatar": None,
            "bot": True,
        }
    name = "player" if user_id == PERSON_ID else f"user{user_id[-4:]}"
    return {
        "id": user_id,
        "username": name,
        "global_name": name.capitalize(),
        "discriminator": "0",
        "avatar": hashlib.md5(user_id.encode(), usedforsecurity=False).hexdigest(),
        "bot": False,
    }


def _now_iso(wall: float) -> str:
    seconds = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(wall))
    return f"{seconds}.{int((wall % 1) * 1_000_000):06d}+00:00"


# -- components -> the page's view -------------------------------------------------------------


def _walk(components: Any, out: dict[str, list[Any]]) -> None:
    """Collect text displays, buttons (by row) and select menus of a component tree."""
    for component in components if isinstance(components, list) else []:
        if not isinstance(component, Mapping):
            continue
        kind = component.get("type")
        if kind == 1:  # action row
            row = []
            for child in component.get("components") or []:
                if not isinstance(child, Mapping):
                    continue
                if child.get("type") == 2:
                    row.append(
                        {
                            "text": str(child.get("label") or child.get("emoji", {}).get("name")),
                            "data": child.get("custom_id"),
                            "url": child.get("url"),
                            "style": child.get("style"),
                            "disabled": bool(child.get("disabled")),
                        }
                    )
                elif child.get("type") in (3, 5, 6, 7, 8):
                    out["selects"].append(
                        {
                            "customId": child.get("custom_id"),
                            "placeholder": child.get("placeholder") or "",
                            "options": [
                                {"label": str(o.get("label", "")), "value": str(o.get("value"))}
                                for o in child.get("options") or []
                                if isinstance(o, Mapping)
                            ],
                            "minValues": child.get("min_values", 1),
                            "maxValues": child.get("max_values", 1),
                            "disabled": bool(child.get("disabled")),
                        }
                    )
            if row:
                out["keyboard"].append(row)
        elif kind == 10:  # text display
            out["text"].append(str(component.get("content", "")))
        elif kind in (9, 17):  # section, container
            _walk(component.get("components"), out)
            accessory = component.get("accessory")
            if isinstance(accessory, Mapping) and accessory.get("type") == 2:
                _walk([{"type": 1, "components": [accessory]}], out)


def _embed_text(embed: Mapping[str, Any]) -> str:
    parts = [str(embed.get(k)) for k in ("title", "description") if embed.get(k)]
    for item in embed.get("fields") or []:
        if isinstance(item, Mapping):
            parts.append(f"{item.get('name', '')}: {item.get('value', '')}")
    return "\n".join(parts)


def _is_stop(button: Mapping[str, Any]) -> bool:
    """A Stop button, in any language the SDK labels it in."""
    return str(button.get("text") or "").strip().lower() in STOP_LABELS


def discord_view(message: Mapping[str, Any]) -> dict[str, Any]:
    """The page's view of one bot message: its text (content, Components v2 text
    displays, embeds), ``keyboard`` (rows of buttons: ``text``, ``data`` = the
    ``custom_id``, ``url``), ``selects`` (menus with their options), ``modal`` (a modal
    the bot opened from it, or None), ``ephemeral`` (who alone sees it), ``pinned``."""
    found: dict[str, list[Any]] = {"text": [], "keyboard": [], "selects": []}
    _walk(message.get("components"), found)
    embeds = [e for e in message.get("embeds") or [] if isinstance(e, Mapping)]
    text = "\n".join(
        part
        for part in [str(message.get("content") or ""), *found["text"], *map(_embed_text, embeds)]
        if part
    )
    if message.get("thinking"):
        text = text or f"{BOT_NAME} is thinking…"
    buttons = [b for row in found["keyboard"] for b in row]
    live = [b for b in buttons if b["data"] and not b["disabled"]]
    actions = ["tap"] if live else []
    stop = next((b for b in live if _is_stop(b)), None)
    if stop is not None:
        actions.append("stop")
    if any(not s["disabled"] for s in found["selects"]):
        actions.append("select")
    if message.get("modal"):
        actions.append("modal")
    if message.get("deleted"):
        state, text, actions = "deleted", "", []
        found["keyboard"], found["selects"] = [], []
    elif message.get("thinking"):
        state = "thinking"
    elif message.get("edits"):
        state = "edited"
    else:
        state = "shown"
    return {
        "id": message["id"],
        "kind": "message",
        "state": state,
        "text": text,
        "embeds": [dict(e) for e in embeds],
        "keyboard": found["keyboard"],
        "selects": found["selects"],
        "modal": message.get("modal"),
        "channelId": message["channel_id"],
        "ephemeral": message.get("ephemeral"),
        "pinned": bool(message.get("pinned")),
        "files": [dict(f) for f in message.get("files", ())],
        "updates": message.get("edits", 0),
        "edited": bool(message.get("edits")),
        "toast": message.get("toast"),
        "actions": actions,
        "stopLabel": stop["text"] if stop is not None else None,
        "awaitsAnswer": False,  # the channel's pending requests tell (requestPending)
    }


# -- rate-limit buckets ------------------------------------------------------------------------


@dataclass
class _Window:
    started: float
    used: int = 0


class _Buckets:
    """Fixed windows per (route, top-level resource) on ``clock``; forced 429s."""

    def __init__(self, clock: Clock, limits: Mapping[str, tuple[int, float]]) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self.limits: dict[str, tuple[int, float]] = dict(limits)
        self._windows: OrderedDict[str, _Window] = OrderedDict()
        self._forced: dict[str, tuple[int, float]] = {}  # route -> (count, retry_after)
        self.counts: dict[str, int] = {"allowed": 0, "throttled": 0}

    def check(self, route: str, major: str) -> tuple[bool, tuple[tuple[str, str], ...], float]:
        """(allowed, headers, retry_after) for one request of ``route`` on ``major``."""
        with self._lock:
            forced = self._forced.get(route)
            if forced is not None and forced[0] > 0:
                count, retry_after = forced
                self._forced[route] = (count - 1, retry_after)
                self.counts["throttled"] += 1
                return False, self._throttle_headers(route, retry_after), retry_after
            limit = self.limits.get(route)
            if limit is None:
                self.counts["allowed"] += 1
                return True, (), 0.0
            size, window = limit
            now = self._clock.now()
            key = f"{route}:{major}"
            current = self._windows.get(key)
            if current is None or now >= current.started + window:
                current = _Window(now)
                self._windows[key] = current
                self._windows.move_to_end(key)
                while len(self._windows) > MAX_KEPT:
                    self._windows.popitem(last=False)
            reset_after = max(0.0, current.started + window - now)
            if current.used >= size:
                self.counts["throttled"] += 1
                return False, self._throttle_headers(route, reset_after, size), reset_after
            current.used += 1
            self.counts["allowed"] += 1
            headers = (
                ("X-RateLimit-Limit", str(size)),
                ("X-RateLimit-Remaining", str(size - current.used)),
                ("X-RateLimit-Reset", f"{self._clock.time() + reset_after:.3f}"),
                ("X-RateLimit-Reset-After", f"{reset_after:.3f}"),
                ("X-RateLimit-Bucket", _bucket_id(route)),
            )
            return True, headers, 0.0

    def _throttle_headers(
        self, route: str, retry_after: float, size: int = 1
    ) -> tuple[tuple[str, str], ...]:
        return (
            ("X-RateLimit-Limit", str(size)),
            ("X-RateLimit-Remaining", "0"),
            ("X-RateLimit-Reset", f"{self._clock.time() + retry_after:.3f}"),
            ("X-RateLimit-Reset-After", f"{retry_after:.3f}"),
            ("X-RateLimit-Bucket", _bucket_id(route)),
            ("X-RateLimit-Scope", "user"),
            ("Retry-After", str(max(1, math.ceil(retry_after)))),
        )

    def force(self, route: str, count: int, retry_after: float) -> None:
        with self._lock:
            self._forced[route] = (count, retry_after)

    def set_limit(self, route: str, limit: tuple[int, float] | None) -> None:
        with self._lock:
            if limit is None:
                self.limits.pop(route, None)
            else:
                self.limits[route] = limit
            self._windows.clear()

    def reset(self) -> None:
        with self._lock:
            self._windows.clear()
            self._forced.clear()
            self.counts = {"allowed": 0, "throttled": 0}


def _bucket_id(route: str) -> str:
    return hashlib.sha256(route.encode()).hexdigest()[:32]


def _put(store: OrderedDict[str, Any], key: str, value: Any) -> None:
    store[key] = value
    store.move_to_end(key)
    while len(store) > MAX_KEPT:
        store.popitem(last=False)


class DiscordEmulator(EmulatorBase):
    """The emulated Discord: one application and its bot, one person, their DM and a
    guild; see the module docstring.

    ``bot_token``: the token REST and the Gateway accept. ``interactions_url``: the
    bot's interactions endpoint (used with ``ingress="interactions"``). ``clock``: the
    rate-limit buckets' and signatures' clock (default the system clock).
    ``rate_limits``: route -> ``(requests, window seconds)`` (default `DEFAULT_LIMITS`;
    ``{}``: none).
    """

    platform = "discord"
    accepts_files = True

    def __init__(
        self,
        *,
        bot_token: str,
        interactions_url: str = "",
        ingress: str = "gateway",
        clock: Clock | None = None,
        rate_limits: Mapping[str, tuple[int, float]] | None = None,
        user_id: str = PERSON_ID,
        deliver: Deliver | None = None,
    ) -> None:
        if ingress not in ("gateway", "interactions"):
            raise ValueError(f"ingress: must be gateway or interactions (got {ingress!r})")
        super().__init__(deliver=deliver)
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
        from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

        self.bot_token = bot_token
        self.interactions_url = interactions_url
        self.ingress = ingress
        self.user_id = user_id
        self._person = user_id  # the member of DM_CHANNEL (user_id may be changed later)
        self.clock: Clock = clock or SystemClock()
        #: seconds (real time) an interaction waits for its first response (Discord: 3)
        self.interaction_ack_seconds = INTERACTION_ACK_SECONDS
        #: seconds (real time) a typing indicator shows after the bot asks (Discord: 10)
        self.typing_seconds = TYPING_SECONDS
        self._key = Ed25519PrivateKey.generate()
        #: the application's public key (hex): the channel verifies interactions with it
        self.public_key = self._key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw).hex()
        self.buckets = _Buckets(
            self.clock, DEFAULT_LIMITS if rate_limits is None else dict(rate_limits)
        )
        self.gateway = DiscordGatewayServer(
            bot_token, ready_user=_user(BOT_USER_ID), application_id=APPLICATION_ID
        )
        self._ids = 0
        self._channels: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._interactions: OrderedDict[str, dict[str, Any]] = OrderedDict()  # by token
        self._pins: dict[str, list[str]] = {}  # channel -> message ids, latest pin last
        self._sent: OrderedDict[str, dict[str, Any]] = OrderedDict()  # the person's, by id
        #: the files the person attached, served by the emulated CDN (signed URLs)
        self.person_files = PersonFiles()
        #: the files the bot uploaded (messages with attachments)
        self.bot_files = BotFiles()
        self._cdn_key = secrets.token_bytes(32)
        self._channel(DM_CHANNEL, kind=1, recipient=user_id)
        self._channel(GROUP_CHANNEL, kind=0)
        self._locales: OrderedDict[str, str] = OrderedDict()  # user id -> client language
        #: the client language of everyone `set_locale()` gave none (a Discord locale)
        self.default_locale = DEFAULT_LOCALE

    # -- people's client languages -----------------------------------------------------------
    def set_locale(self, user_id: str, locale: str | None) -> None:
        """``user_id``'s Discord client uses ``locale`` (``"zh-CN"``, ``"de"``, ``"en-US"``):
        their interactions carry it from now on (None: `default_locale` again)."""
        with self._lock:
            self._locales.pop(user_id, None)
            if locale is not None:
                self._locales[user_id] = locale
                while len(self._locales) > MAX_LOCALES:
                    self._locales.popitem(last=False)

    def locale_of(self, user_id: str) -> str:
        """The client language ``user_id``'s interactions carry."""
        with self._lock:
            return self._locales.get(user_id, self.default_locale)

    # -- ids and channels (lock held) --------------------------------------------------------
    def _snowflake(self) -> str:
        with self._lock:
            self._ids += 1
            # time in the high bits as Discord's, a counter below: unique and increasing
            ms = int(self.clock.time() * 1000) - 1_420_070_400_000
            return str((max(ms, 0) << 22) + self._ids % (1 << 22))

    def _channel(
        self,
        channel_id: str,
        *,
        kind: int,
        recipient: str | None = None,
        parent: str | None = None,
    ) -> dict[str, Any]:
        with self._lock:
            found = self._channels.get(channel_id)
            if found is not None:
                return found
            channel: dict[str, Any] = {"id": channel_id, "type": kind}
            if kind == 1:
                channel["recipients"] = [_user(recipient or self.user_id)]
            else:
                channel["guild_id"] = GUILD_ID
                channel["name"] = f"channel-{channel_id[-4:]}"
            if parent is not None:
                channel["parent_id"] = parent
            _put(self._channels, channel_id, channel)
            return channel

    def _dm_of(self, user_id: str) -> str:
        """The DM channel of the bot and ``user_id``: `DM_CHANNEL` for the emulator's
        person, a channel of their own for anybody else (a DM has two members)."""
        if user_id == self._person:
            return DM_CHANNEL
        with self._lock:
            for channel in self._channels.values():
                if channel["type"] == 1 and channel["recipients"][0]["id"] == user_id:
                    return str(channel["id"])
        channel_id = self._snowflake()
        self._channel(channel_id, kind=1, recipient=user_id)
        return channel_id

    # -- REST ------------------------------------------------------------------------------
    def handle_json_api(
        self,
        method: str,
        path: str,
        query: Mapping[str, str],
        headers: Mapping[str, str],
        data: Any,
    ) -> HttpReply | None:
        bare = _PREFIX.sub("", path)
        for route_method, pattern, name in _ROUTES:
            match = pattern.fullmatch(bare)
            if match is None or route_method != method:
                continue
            params = match.groups()
            if name not in _TOKEN_ROUTES:
                if headers.get("authorization") != f"Bot {self.bot_token}":
                    return _error(401, 0, "401: Unauthorized")
                major = params[0] if name not in ("me", "gateway", "create_dm") else ""
                allowed, limit_headers, retry_after = self.buckets.check(name, major)
                if not allowed:
                    body = {
                        "message": "You are being rate limited.",
                        "retry_after": round(retry_after, 3),
                        "global": False,
                    }
                    return HttpReply(429, body, headers=limit_headers)
                reply = self._route(name, method, params, query, data)
                return HttpReply(
                    reply.status, reply.payload, reply.content_type, reply.raw, limit_headers
                )
            return self._route(name, method, params, query, data)
        return None

    def _route(
        self,
        name: str,
        method: str,
        params: tuple[str, ...],
        query: Mapping[str, str],
        data: Any,
    ) -> HttpReply:
        body = data if isinstance(data, Mapping) else {}
        if name == "me":
            return HttpReply(200, _user(BOT_USER_ID))
        if name == "gateway":
            return HttpReply(
                200,
                {
                    "url": self.gateway.url,
                    "shards": 1,
                    "session_start_limit": {
                        "total": 1000,
                        "remaining": 999,
                        "reset_after": 86_400_000,
                        "max_concurrency": 1,
                    },
                },
            )
        if name == "create_dm":
            recipient = body.get("recipient_id")
            if not isinstance(recipient, str | int) or not str(recipient).isdigit():
                return _form_error("recipient_id", "NUMBER_TYPE_COERCE", "Value is not snowflake.")
            return HttpReply(200, self._channel(self._dm_of(str(recipient)), kind=1))
        if name == "get_channel":
            with self._lock:
                channel = self._channels.get(params[0])
            if channel is None:
                return _error(404, 10003, "Unknown Channel")
            return HttpReply(200, dict(channel))
        if name == "typing":
            with self._lock:
                self._typing_until = time.time() + self.typing_seconds
                self._touch()
            return _no_content()
        if name == "pins":
            return self._list_pins(params[0])
        if name == "pin":
            return self._pin(method, params[0], params[1])
        if name == "create_message":
            return self._create(params[0], body, author=BOT_USER_ID)
        if name in ("get_message", "edit_message", "delete_message"):
            return self._existing(method, params[0], params[1], body)
        return self._interaction_route(name, method, params, query, body)

    # -- messages (the bot's) ----------------------------------------------------------------
    def _check_message(self, body: Mapping[str, Any], *, edit: bool) -> HttpReply | None:
        content = body.get("content")
        if content is not None and not isinstance(content, str):
            return _form_error("content", "STRING_TYPE_CONVERT", "Could not interpret as string.")
        if isinstance(content, str) and len(content) > MAX_CONTENT:
            return _form_error(
                "content", "BASE_TYPE_MAX_LENGTH", f"Must be {MAX_CONTENT} or fewer in length."
            )
        embeds = body.get("embeds")
        if embeds is not None and (not isinstance(embeds, list) or len(embeds) > MAX_EMBEDS):
            return _form_error(
                "embeds", "BASE_TYPE_MAX_LENGTH", f"Must be {MAX_EMBEDS} or fewer in length."
            )
        components = body.get("components")
        if components is not None and not isinstance(components, list):
            return _form_error("components", "LIST_TYPE_CONVERT", "Must be an array.")
        flags = body.get("flags") or 0
        if not isinstance(flags, int):
            return _form_error("flags", "NUMBER_TYPE_COERCE", "Value is not int.")
        if flags & IS_COMPONENTS_V2 and (content or embeds):
            return _form_error(
                "content",
                "MESSAGE_CANNOT_USE_LEGACY_FIELDS_WITH_COMPONENTS_V2",
                "The 'content' and 'embeds' fields cannot be used with Components V2.",
            )
        found: dict[str, list[Any]] = {"text": [], "keyboard": [], "selects": []}
        _walk(components, found)
        for button in [b for row in found["keyboard"] for b in row] + found["selects"]:
            custom_id = button.get("data") or button.get("customId")
            if custom_id is not None and (
                not isinstance(custom_id, str) or not 0 < len(custom_id) <= MAX_CUSTOM_ID
            ):
                return _form_error(
                    "components", "BASE_TYPE_BAD_LENGTH", "custom_id: must be 1-100 characters."
                )
        if not edit and not (content or embeds or components or body.get("attachments")):
            return _error(400, 50006, "Cannot send an empty message")
        return None

    def _create(
        self,
        channel_id: str,
        body: Mapping[str, Any],
        *,
        author: str,
        ephemeral: str | None = None,
        interaction: Mapping[str, Any] | None = None,
        thinking: bool = False,
    ) -> HttpReply:
        if not thinking:
            problem = self._check_message(body, edit=False)
            if problem is not None:
                return problem
        channel = self._channel(channel_id, kind=0)
        message_id = self._snowflake()
        flags = int(body.get("flags") or 0)
        message: dict[str, Any] = {
            "id": message_id,
            "type": 20 if interaction is not None else 0,
            "channel_id": channel_id,
            "author": _user(author),
            "content": str(body.get("content") or ""),
            "embeds": list(body.get("embeds") or []),
            "components": list(body.get("components") or []),
            "attachments": [],
            "mentions": [],
            "mention_roles": [],
            "mention_everyone": False,
            "pinned": False,
            "tts": False,
            "flags": flags | (EPHEMERAL if ephemeral else 0),
            "timestamp": _now_iso(self.clock.time()),
            "edited_timestamp": None,
            "edits": 0,
            "ephemeral": ephemeral,
            "thinking": thinking,
        }
        if "guild_id" in channel:
            message["guild_id"] = channel["guild_id"]
        if body.get("message_reference"):
            message["message_reference"] = body["message_reference"]
        if interaction is not None:
            message["interaction_metadata"] = {
                "id": interaction["id"],
                "type": interaction["type"],
                "user": _user(interaction["user"]),
            }
        entry = {"kind": "card", "from": "bot", "card": message_id, "msgId": message_id}
        if channel["type"] in THREAD_TYPES:
            entry["threadId"] = channel_id
        with self._lock:
            self._put_card(message_id, message)
            self._add_timeline(entry)
            return HttpReply(200, _public(message))

    def _edit(self, message: dict[str, Any], body: Mapping[str, Any]) -> HttpReply:  # lock held
        problem = self._check_message(body, edit=True)
        if problem is not None:
            return problem
        for key in ("content", "embeds", "components"):
            if key in body:
                value = body[key]
                message[key] = str(value or "") if key == "content" else list(value or [])
        if "flags" in body and isinstance(body["flags"], int):
            keep = message["flags"] & EPHEMERAL
            message["flags"] = body["flags"] | keep
        if message.get("thinking"):
            message["thinking"] = False
        else:
            message["edits"] += 1
            message["edited_timestamp"] = _now_iso(self.clock.time())
        self._touch()
        return HttpReply(200, _public(message))

    def _existing(
        self, method: str, channel_id: str, message_id: str, body: Mapping[str, Any]
    ) -> HttpReply:
        with self._lock:
            message = self._live(message_id)
            if message is None or message["channel_id"] != channel_id or message["ephemeral"]:
                return _error(404, 10008, "Unknown Message")
            if method == "GET":
                return HttpReply(200, _public(message))
            if message["author"]["id"] != BOT_USER_ID and method == "PATCH":
                return _error(403, 50005, "Cannot edit a message authored by another user")
            if method == "PATCH":
                return self._edit(message, body)
            self._delete(message_id)
            return _no_content()

    def _delete(self, message_id: str) -> None:  # lock held
        message = self._cards.get(message_id)
        if message is not None:  # the page shows where it was
            message["deleted"] = True
            message["pinned"] = False
        for pins in self._pins.values():
            if message_id in pins:
                pins.remove(message_id)
        self._touch()

    def _live(self, message_id: str) -> dict[str, Any] | None:  # lock held
        """The message, unless unknown or deleted."""
        message = self._cards.get(message_id)
        return None if message is None or message.get("deleted") else message

    def _list_pins(self, channel_id: str) -> HttpReply:
        with self._lock:
            held = [m for m in self._pins.get(channel_id, []) if self._live(m) is not None]
            items = [
                {"pinned_at": self._cards[m].get("pinned_at"), "message": _public(self._cards[m])}
                for m in reversed(held)
            ]
        return HttpReply(200, {"items": items, "has_more": False})

    def _pin(self, method: str, channel_id: str, message_id: str) -> HttpReply:
        with self._lock:
            message = self._live(message_id)
            if message is None or message["channel_id"] != channel_id or message["ephemeral"]:
                return _error(404, 10008, "Unknown Message")
            pins = self._pins.setdefault(channel_id, [])
            if method == "PUT":
                if message_id not in pins:
                    pins.append(message_id)
                    message["pinned"] = True
                    message["pinned_at"] = _now_iso(self.clock.time())
            else:
                if message_id in pins:
                    pins.remove(message_id)
                message["pinned"] = False
            self._touch()
        return _no_content()

    # -- interactions ----------------------------------------------------------------------
    def _interaction_route(
        self,
        name: str,
        method: str,
        params: tuple[str, ...],
        query: Mapping[str, str],
        body: Mapping[str, Any],
    ) -> HttpReply:
        token = params[1]
        with self._lock:
            interaction = self._interactions.get(token)
        if name == "callback":
            if interaction is None or interaction["id"] != params[0]:
                return _error(404, 10062, "Unknown interaction")
            reply = self.apply_response(interaction, body)
            if reply.status != 200 or query.get("with_response") == "true":
                return reply
            return _no_content()
        if interaction is None or params[0] != APPLICATION_ID:
            return _error(401, 50027, "Invalid Webhook Token")
        if time.monotonic() > interaction["delivered"] + INTERACTION_TOKEN_SECONDS:
            return _error(401, 50027, "Invalid Webhook Token")
        if not interaction["responded"]:
            return _error(404, 10015, "Unknown Webhook")
        if name == "followup":
            flags = body.get("flags") or 0
            ephemeral = (
                interaction["user"] if isinstance(flags, int) and flags & EPHEMERAL else None
            )
            return self._create(
                interaction["channel_id"],
                body,
                author=BOT_USER_ID,
                ephemeral=ephemeral,
                interaction=interaction,
            )
        target = params[2]
        with self._lock:
            message_id = interaction.get("original") if target == "@original" else target
            message = self._live(str(message_id)) if message_id else None
            if message is None or message["channel_id"] != interaction["channel_id"]:
                return _error(404, 10008, "Unknown Message")
            if name == "wh_get":
                return HttpReply(200, _public(message))
            if name == "wh_edit":
                return self._edit(message, body)
            self._delete(str(message_id))
            return _no_content()

    def apply_response(self, interaction: dict[str, Any], body: Mapping[str, Any]) -> HttpReply:
        """Apply an interaction response (a REST callback or the endpoint's answer):
        200 with ``{"interaction", "resource"}``, or Discord's error."""
        kind = body.get("type")
        data = body.get("data") if isinstance(body.get("data"), Mapping) else {}
        assert isinstance(data, Mapping)
        with self._lock:
            if interaction["responded"]:
                return _error(400, 40060, "Interaction has already been acknowledged.")
            if time.monotonic() > interaction["delivered"] + self.interaction_ack_seconds:
                interaction["late"] = True
                self._touch()
                return _error(404, 10062, "Unknown interaction")
            source = self._live(str(interaction.get("message_id")))
            if kind not in (4, 5, 6, 7, 9) or (kind in (6, 7) and source is None):
                return _form_error(
                    "type", "INTERACTION_RESPONSE_TYPE_INVALID", "Invalid interaction response."
                )
            if kind == 9:
                if interaction["type"] == 5:
                    return _form_error(
                        "type", "INTERACTION_RESPONSE_TYPE_INVALID", "A modal cannot open a modal."
                    )
                if not isinstance(data.get("custom_id"), str) or not data.get("components"):
                    return _form_error("data", "BASE_TYPE_REQUIRED", "custom_id and components.")
                interaction["responded"] = 9
                interaction["done"] = True
                self._touch()
                if source is not None:
                    source["modal"] = {
                        "customId": data["custom_id"],
                        "title": str(data.get("title", "")),
                        "fields": _modal_fields(data.get("components")),
                        "user": interaction["user"],
                    }
                    self._touch()
                return HttpReply(200, {"interaction": _brief(interaction), "resource": {"type": 9}})
            interaction["responded"] = kind
        if kind in (4, 5):
            flags = data.get("flags") or 0
            ephemeral = (
                interaction["user"] if isinstance(flags, int) and flags & EPHEMERAL else None
            )
            reply = self._create(
                interaction["channel_id"],
                data,
                author=BOT_USER_ID,
                ephemeral=ephemeral,
                interaction=interaction,
                thinking=kind == 5,
            )
            if reply.status != 200:
                with self._lock:
                    interaction["responded"] = 0
                return reply
            message = reply.payload
        else:
            assert source is not None
            with self._lock:
                if kind == 7:
                    reply = self._edit(source, data)
                    if reply.status != 200:
                        interaction["responded"] = 0
                        return reply
                source.pop("modal", None)
                self._touch()
                message = _public(source)
        with self._lock:
            interaction["original"] = message["id"]
            interaction["done"] = True  # the response is visible
            self._touch()
        resource = {"type": kind, "message": message}
        return HttpReply(200, {"interaction": _brief(interaction), "resource": resource})

    def interactions(self) -> list[dict[str, Any]]:
        """Every interaction delivered: ``id``, ``type``, ``user``, ``customId``,
        ``responded`` (the response type, 0 for none yet), ``late`` (oldest first)."""
        with self._lock:
            return [
                {
                    "id": i["id"],
                    "type": i["type"],
                    "user": i["user"],
                    "customId": i.get("custom_id"),
                    "responded": i["responded"],
                    "late": bool(i.get("late")),
                    "messageId": i.get("message_id"),
                }
                for i in self._interactions.values()
            ]

    # -- visible state ---------------------------------------------------------------------
    def extra_state(self) -> dict[str, Any]:
        return {
            "views": {mid: discord_view(m) for mid, m in self._cards.items()},
            "ingress": self.ingress,
            "gateway": {
                "identified": self.gateway.identified,
                "counts": dict(self.gateway.counts),
            },
            "reactions": {},
        }

    def view(self, message_id: str) -> dict[str, Any] | None:
        """The page's view of one bot message (None when unknown; state ``deleted`` once
        deleted)."""
        with self._lock:
            message = self._cards.get(message_id)
            return discord_view(message) if message is not None else None

    def ephemerals(self) -> list[dict[str, Any]]:
        """Every ephemeral message: ``{id, user, text}`` (oldest first)."""
        with self._lock:
            return [
                {"id": m["id"], "user": m["ephemeral"], "text": discord_view(m)["text"]}
                for m in self._cards.values()
                if m.get("ephemeral") and not m.get("deleted")
            ]

    # -- the person -> the bot -------------------------------------------------------------
    def send_user_message(
        self,
        text: str,
        *,
        origin: Origin | None = None,
        attachments: list[dict[str, Any]] | None = None,
    ) -> tuple[str, CallbackDelivery]:
        """The person (or ``origin.user_id``) writes ``text``: a ``MESSAGE_CREATE``
        dispatch on the Gateway. ``origin``: a guild channel (`GROUP_CHANNEL` unless
        ``chat_id`` names one) with ``group``, a thread (``thread_id``: its own channel,
        whose parent is the guild channel), a mention of the bot (``<@id>`` before the
        text and the bot in ``mentions``)."""
        origin = origin or Origin()
        user = origin.user_id or self.user_id
        guild = origin.group or origin.thread_id is not None
        if origin.chat_id is not None:
            channel_id = origin.chat_id
            self._channel(channel_id, kind=0 if guild else 1, recipient=user)
        else:
            channel_id = GROUP_CHANNEL if guild else self._dm_of(user)
        if origin.thread_id is not None:
            self._channel(origin.thread_id, kind=11, parent=channel_id)
            channel_id = origin.thread_id
        with self._lock:
            in_guild = "guild_id" in self._channels[channel_id]
        if origin.mentions_bot:
            text = f"<@{BOT_USER_ID}> {text}"
        message_id = self._snowflake()
        event: dict[str, Any] = {
            "id": message_id,
            "type": 0,
            "channel_id": channel_id,
            "author": _user(user),
            "content": text,
            "timestamp": _now_iso(self.clock.time()),
            "edited_timestamp": None,
            "tts": False,
            "mention_everyone": "@everyone" in text or "@here" in text,
            "mentions": [_user(BOT_USER_ID)] if origin.mentions_bot else [],
            "mention_roles": [],
            "attachments": attachments or [],
            "embeds": [],
            "pinned": False,
            "flags": 0,
        }
        if in_guild:
            event["guild_id"] = GUILD_ID
            event["member"] = {"roles": [], "joined_at": event["timestamp"], "nick": None}
        entry: dict[str, Any] = {
            "kind": "message",
            "from": "user",
            "format": "text",
            "text": text,
            "msgId": message_id,
            "user": user,
            "channelId": channel_id,
        }
        if origin.thread_id is not None:
            entry["threadId"] = origin.thread_id
        if attachments:
            entry["files"] = [
                {"name": a["filename"], "contentType": a["content_type"], "size": a["size"]}
                for a in attachments
            ]
        with self._lock:
            self._add_timeline(entry)
            _put(self._sent, message_id, event)
        return message_id, self._dispatch("message", "MESSAGE_CREATE", event)

    def send_user_files(
        self, text: str, files: tuple[EmulatedFile, ...], *, origin: Origin | None = None
    ) -> tuple[str, CallbackDelivery]:
        """The person sends ``files`` in one message with ``text`` (possibly empty),
        as the attachment objects `attachment_objects()` makes."""
        attachments = self.attachment_objects(files)
        return self.send_user_message(text, origin=origin, attachments=attachments)

    def attachment_objects(self, files: tuple[EmulatedFile, ...]) -> list[dict[str, Any]]:
        """Keep ``files`` and describe them as a message's ``attachments``: each ``url``
        is this emulator's CDN path, signed like Discord's (``ex`` / ``is`` / ``hm``;
        valid for a day of the emulator's clock, refused when changed)."""
        now = int(self.clock.time())
        attachments = []
        with self._lock:
            folder = self._snowflake()
        for file in files:
            key = self.person_files.keep(file, prefix="")
            path = f"/attachments/{folder}/{key}/{quote(file.name)}"
            attachments.append(
                {
                    "id": key,
                    "filename": file.name,
                    "content_type": file.content_type,
                    "size": len(file.data),
                    "url": f"{self.base_url}{path}?{self._cdn_signature(path, now + 86400, now)}",
                    "proxy_url": f"{self.base_url}{path}",
                }
            )
        return attachments

    def _cdn_signature(self, path: str, expires: int, issued: int) -> str:
        query = f"ex={expires:x}&is={issued:x}"
        mac = hmac.new(self._cdn_key, f"{path}?{query}".encode(), hashlib.sha256).hexdigest()
        return f"{query}&hm={mac}"

    def handle_api(
        self,
        method: str,
        path: str,
        query: Mapping[str, str],
        headers: Mapping[str, str],
        body: bytes,
    ) -> HttpReply | None:
        """``GET /attachments/<channel>/<id>/<name>?ex=&is=&hm=``: an attachment's bytes
        when the signature is this emulator's and not expired (else Discord's CDN
        answer, 404 "This content is no longer available."); anything else: REST."""
        match = _CDN_PATH_RE.match(path)
        if match is None and headers.get("content-type", "").startswith("multipart/form-data"):
            return self._upload_api(method, path, query, headers, body)
        if match is None:
            return super().handle_api(method, path, query, headers, body)
        expires, issued = query.get("ex", ""), query.get("is", "")
        signed = False
        if re.fullmatch(r"[0-9a-f]{1,12}", expires) and re.fullmatch(r"[0-9a-f]{1,12}", issued):
            wanted = self._cdn_signature(path, int(expires, 16), int(issued, 16))
            signed = hmac.compare_digest(wanted.rsplit("=", 1)[1], query.get("hm", ""))
            signed = signed and int(expires, 16) > self.clock.time()
        data = self.person_files.serve(match.group(1)) if signed and method == "GET" else None
        if data is None:
            reply = HttpReply(
                404, None, content_type="text/plain", raw=b"This content is no longer available."
            )
        else:
            reply = HttpReply(200, None, content_type="application/octet-stream", raw=data)
        self._record(method, re.sub(r"/[^/]*$", "/<name>", path), {}, None, reply)
        return reply

    def _upload_api(
        self,
        method: str,
        path: str,
        query: Mapping[str, str],
        headers: Mapping[str, str],
        body: bytes,
    ) -> HttpReply | None:
        """A ``multipart/form-data`` REST call (a message with attachments):
        ``payload_json`` is the JSON body, each ``files[n]`` part a file kept in
        `bot_files` and listed on the message (``attachments`` and the view's ``files``)."""
        try:
            fields, parts = parse_multipart(body, headers.get("content-type", ""))
            data = json.loads(fields.get("payload_json") or "{}")
        except ValueError:
            data, parts = None, {}
        files = [parts[k] for k in sorted(parts) if k.startswith("files[")]
        shown = {
            **(data if isinstance(data, dict) else {}),
            "files": [
                {"name": f.name, "contentType": f.content_type, "size": len(f.data)} for f in files
            ],
        }
        fault = self.bot_files.take_fault() if files else None
        if not isinstance(data, dict):
            reply: HttpReply | None = _error(400, 50109, "The request body contains invalid JSON.")
        elif fault is not None and fault.status == 429:
            reply = HttpReply(
                429,
                {"message": fault.description, "retry_after": 1.0, "global": False},
                headers=(("Retry-After", "1"),),
            )
        elif fault is not None:
            reply = _error(fault.status, 0, fault.description)
        else:
            reply = self.handle_json_api(method, path, query, headers, data)
            if reply is not None and reply.status == 200 and files:
                reply = self._attach(reply, files)
        if reply is not None:
            self._record(method, path, query, shown, reply)
        return reply

    def _attach(self, reply: HttpReply, files: list[EmulatedFile]) -> HttpReply:
        """Put ``files`` on the message ``reply`` created; the reply with them."""
        message_id = reply.payload.get("id") if isinstance(reply.payload, dict) else None
        views = [self.bot_files.view(self.bot_files.keep(f)) for f in files]
        with self._lock:
            card = self._cards.get(str(message_id))
            if card is None:
                return reply
            card["files"] = views
            card["attachments"] = [
                {
                    "id": view["url"].rsplit("/", 1)[1],
                    "filename": view["name"],
                    "size": view["size"],
                    "content_type": view["contentType"],
                    "url": self.base_url + view["url"],
                    "proxy_url": self.base_url + view["url"],
                }
                for view in views
            ]
            self._touch()
            payload = _public(card)
        return HttpReply(reply.status, payload, reply.content_type, reply.raw, reply.headers)

    def redeliver(self, message_id: str) -> CallbackDelivery:
        """Dispatch a person's message again (the same ``MESSAGE_CREATE``, a new sequence
        number), as a platform retrying a delivery it thinks was lost; ``KeyError`` when
        the emulator no longer holds it."""
        with self._lock:
            event = self._sent[message_id]
        return self._dispatch("message", "MESSAGE_CREATE", event)

    def _dispatch(self, kind: str, event: str, data: Mapping[str, Any]) -> CallbackDelivery:
        seq = self.gateway.dispatch(event, data)
        if seq is None:
            result = CallbackDelivery(0, "the bot has not identified on the gateway")
        else:
            result = CallbackDelivery(200, json.dumps({"s": seq}))
        self._record_callback(kind, "gateway", result, event=event, seq=seq)
        return result

    def card_action(
        self,
        card_id: str,
        action: str,
        form: Mapping[str, Any] | None = None,
        *,
        user_id: str | None = None,
    ) -> CallbackDelivery:
        """A click on a bot message: ``tap`` (``form={"data": custom_id}``), ``stop`` (the
        button labelled Stop), ``select`` (``form={"customId", "values": [...]}``), or
        ``modal`` (the modal the bot opened from this message: ``form`` maps its fields'
        ``custom_id`` to the text)."""
        user = user_id or self.user_id
        form = form or {}
        with self._lock:
            message = self._live(str(card_id))
            if message is None:
                raise KeyError(card_id)
            view = discord_view(message)
            public = _public(message)
        buttons = [b for row in view["keyboard"] for b in row if b["data"] and not b["disabled"]]
        if action in ("tap", "stop"):
            wanted = str(form.get("data", ""))
            button = next(
                (
                    b
                    for b in buttons
                    if (action == "stop" and _is_stop(b))
                    or (action == "tap" and b["data"] == wanted)
                ),
                None,
            )
            if button is None:
                raise ValueError("action: the message has no such button")
            data: dict[str, Any] = {"custom_id": button["data"], "component_type": 2}
            kind = 3
        elif action == "select":
            custom_id, values = form.get("customId"), form.get("values")
            menu = next((s for s in view["selects"] if s["customId"] == custom_id), None)
            if menu is None or menu["disabled"]:
                raise ValueError("customId: the message has no such select menu")
            if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
                raise ValueError("values: must be a list of option values")
            offered = {o["value"] for o in menu["options"]}
            if any(v not in offered for v in values) or not (
                menu["minValues"] <= len(values) <= menu["maxValues"]
            ):
                raise ValueError("values: not options of the menu, or too many / too few")
            data = {"custom_id": custom_id, "component_type": 3, "values": list(values)}
            kind = 3
        elif action == "modal":
            modal = view.get("modal")
            if not modal:
                raise ValueError("action: no modal is open on this message")
            rows = [
                {
                    "type": 1,
                    "components": [
                        {
                            "type": 4,
                            "custom_id": f["customId"],
                            "value": str(form.get(f["customId"]) or ""),
                        }
                    ],
                }
                for f in modal["fields"]
            ]
            data = {"custom_id": modal["customId"], "components": rows}
            kind = 5
            with self._lock:
                message.pop("modal", None)
                self._touch()
        else:
            raise ValueError(f"action: must be tap, stop, select or modal (got {action!r})")
        return self._interact(kind, user, public, data)

    def _interact(
        self, kind: int, user: str, message: Mapping[str, Any], data: Mapping[str, Any]
    ) -> CallbackDelivery:
        interaction_id = self._snowflake()
        token = "aW50ZXJhY3Rpb24" + secrets.token_urlsafe(48)
        channel_id = str(message["channel_id"])
        with self._lock:
            channel = dict(self._channels.get(channel_id) or {"id": channel_id, "type": 0})
        payload: dict[str, Any] = {
            "id": interaction_id,
            "application_id": APPLICATION_ID,
            "type": kind,
            "token": token,
            "version": 1,
            "data": dict(data),
            "channel_id": channel_id,
            "channel": channel,
            "message": dict(message),
            "locale": self.locale_of(user),
            "app_permissions": "2248473465835073",
            "entitlements": [],
            "authorizing_integration_owners": {"0": GUILD_ID} if "guild_id" in channel else {},
            "context": 0 if "guild_id" in channel else 1,
        }
        if "guild_id" in channel:
            payload["guild_id"] = channel["guild_id"]
            payload["guild_locale"] = DEFAULT_LOCALE
            payload["member"] = {"user": _user(user), "roles": [], "permissions": "0"}
        else:
            payload["user"] = _user(user)
        record = {
            "id": interaction_id,
            "type": kind,
            "token": token,
            "user": user,
            "channel_id": channel_id,
            "message_id": message["id"],
            "custom_id": data.get("custom_id"),
            "responded": 0,
            "delivered": time.monotonic(),
        }
        with self._lock:
            _put(self._interactions, token, record)
        if self.ingress == "gateway":
            result = self._dispatch("interaction", "INTERACTION_CREATE", payload)
            if result.status != 200:
                return result
            # the bot answers with a REST callback: wait (bounded: Discord's 3 s) until
            # it shows, so what the click changed is visible when this returns
            deadline = time.monotonic() + self.interaction_ack_seconds
            with self._changed:
                while not record.get("done"):
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self._changed.wait(left)
                answered = record["responded"]
            body = json.loads(result.body)
            return CallbackDelivery(200, json.dumps({**body, "responded": answered}))
        result = self._post_interaction(payload)
        if result.status == 200:
            try:
                answer = json.loads(result.body)
            except ValueError:
                answer = None
            if isinstance(answer, Mapping):
                applied = self.apply_response(record, answer)
                if applied.status != 200:
                    return CallbackDelivery(502, json.dumps(applied.payload))
        return result

    # -- the signed HTTP endpoint ------------------------------------------------------------
    def sign(self, timestamp: str, body: bytes) -> str:
        """The ``X-Signature-Ed25519`` of ``body`` sent at ``timestamp`` (hex)."""
        return self._key.sign(timestamp.encode("ascii") + body).hex()

    def signed_headers(self, body: bytes, timestamp: str | None = None) -> dict[str, str]:
        """The headers Discord sends with ``body``: its signature and timestamp (now on
        the emulator's clock unless given)."""
        stamp = timestamp if timestamp is not None else str(int(self.clock.time()))
        return {
            "Content-Type": "application/json",
            "User-Agent": "Discord-Interactions/1.0 (+https://discord.com)",
            "X-Signature-Ed25519": self.sign(stamp, body),
            "X-Signature-Timestamp": stamp,
        }

    def _post_interaction(self, payload: Mapping[str, Any]) -> CallbackDelivery:
        if not self.interactions_url:
            return CallbackDelivery(0, "no interactions endpoint URL is set")
        body = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        result = self.deliver(self.interactions_url, self.signed_headers(body), body)
        self._record_callback(
            "ping" if payload.get("type") == 1 else "interaction",
            "interactions",
            result,
            url=self.interactions_url,
        )
        return result

    def ping(self) -> CallbackDelivery:
        """Send a PING (type 1) to the interactions endpoint, as the developer portal does
        when the URL is saved; the endpoint must answer ``{"type": 1}``."""
        return self._post_interaction(
            {
                "id": self._snowflake(),
                "application_id": APPLICATION_ID,
                "type": 1,
                "version": 1,
                "token": secrets.token_urlsafe(32),
            }
        )

    # -- controls --------------------------------------------------------------------------
    def handle_control(self, method: str, path: str, data: Any) -> HttpReply | None:
        files = self.bot_files.control(method, path, data)
        if files is not None:
            return files
        body = data if isinstance(data, Mapping) else {}
        if method == "POST" and path == "/_emulator/ping":
            result = self.ping()
            return HttpReply(200, {"status": result.status, "body": result.body})
        if method == "POST" and path == "/_emulator/redeliver":
            try:
                result = self.redeliver(str(body.get("msgId")))
            except KeyError:
                return HttpReply(404, {"error": "msgId: no such message of the person"})
            return HttpReply(200, {"status": result.status, "body": result.body})
        if method == "POST" and path == "/_emulator/locale":
            user, locale = body.get("userId"), body.get("locale")
            if not isinstance(user, str) or not user:
                return HttpReply(400, {"error": "userId: a user id"})
            if locale is not None and (not isinstance(locale, str) or not locale.strip()):
                return HttpReply(400, {"error": "locale: a language tag such as zh-CN, or null"})
            self.set_locale(user, locale)
            return HttpReply(200, {"ok": True})
        if method == "GET" and path == "/_emulator/interactions":
            return HttpReply(200, {"interactions": self.interactions()})
        if method == "POST" and path.startswith("/_emulator/gateway/"):
            fault = path[len("/_emulator/gateway/") :]
            faults: dict[str, Callable[[], bool]] = {
                "drop": self.gateway.drop,
                "reconnect": self.gateway.reconnect,
                "invalidate": lambda: self.gateway.invalidate_session(bool(body.get("resumable"))),
                "garbage": lambda: self.gateway.send_raw("{not json"),
            }
            done = faults.get(fault)
            if done is None:
                return HttpReply(404, {"error": "fault: drop, reconnect, invalidate or garbage"})
            return HttpReply(200, {"ok": bool(done())})
        if method == "POST" and path == "/_emulator/ratelimit":
            route = body.get("route")
            if route not in DEFAULT_LIMITS:
                return HttpReply(400, {"error": f"route: one of {', '.join(DEFAULT_LIMITS)}"})
            if "force429" in body:
                count, retry = body.get("force429"), body.get("retryAfter", 1.0)
                if not isinstance(count, int) or not isinstance(retry, int | float) or retry < 0:
                    return HttpReply(400, {"error": "force429: a count; retryAfter: seconds"})
                self.buckets.force(str(route), count, float(retry))
            else:
                limit, window = body.get("limit"), body.get("window")
                if limit is None:
                    self.buckets.set_limit(str(route), None)
                elif isinstance(limit, int) and limit > 0 and isinstance(window, int | float):
                    self.buckets.set_limit(str(route), (limit, float(window)))
                else:
                    return HttpReply(400, {"error": "limit: a positive count; window: seconds"})
            return HttpReply(200, {"ok": True})
        return None

    def set_limit(self, route: str, limit: int | None, window: float = 1.0) -> None:
        """Give ``route`` (a `DEFAULT_LIMITS` key) ``limit`` requests per ``window``
        seconds per channel (None: no limit)."""
        self.buckets.set_limit(route, None if limit is None else (limit, window))

    def force_429(self, route: str, count: int = 1, retry_after: float = 1.0) -> None:
        """Answer the next ``count`` requests of ``route`` 429 with ``retry_after``."""
        self.buckets.force(route, count, retry_after)

    def reset(self) -> None:
        with self._lock:
            self._pins.clear()
            self._interactions.clear()
            self._sent.clear()
            self._locales.clear()
        self.person_files.clear()
        self.bot_files.clear()
        self.buckets.reset()
        super().reset()

    def close(self) -> None:
        self.gateway.close()


def _public(message: Mapping[str, Any]) -> dict[str, Any]:
    """A message as Discord answers it (without the emulator's bookkeeping)."""
    hidden = {"edits", "ephemeral", "thinking", "modal", "toast", "pinned_at", "deleted"}
    out = {k: v for k, v in message.items() if k not in hidden}
    if message.get("thinking"):
        out["flags"] = int(out.get("flags") or 0) | 128  # LOADING
    return out


def _brief(interaction: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "id": interaction["id"],
        "type": interaction["type"],
        "response_message_id": interaction.get("original"),
        "response_message_loading": False,
        "response_message_ephemeral": False,
    }


def _modal_fields(components: Any) -> list[dict[str, Any]]:
    """A modal's text inputs: ``customId``, ``label``, ``style``, ``placeholder``."""
    out = []
    for row in components if isinstance(components, list) else []:
        children = row.get("components") if isinstance(row, Mapping) else None
        if isinstance(row, Mapping) and row.get("type") == 18:  # a label around one input
            children = [row.get("component")]
        for child in children or []:
            if isinstance(child, Mapping) and child.get("type") == 4:
                out.append(
                    {
                        "customId": str(child.get("custom_id")),
                        "label": str(child.get("label") or row.get("label") or ""),
                        "style": child.get("style", 1),
                        "placeholder": str(child.get("placeholder") or ""),
                    }
                )
    return out

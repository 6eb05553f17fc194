"""Shared plumbing of the platform emulators: recorded calls, a chat timeline, change waits.

An emulator is a WSGI application that answers a platform's OpenAPI paths (so channelkit's
generated clients make real HTTP calls to it), records every call, keeps the state a
person would see (messages, cards, reactions, typing) and sends user input back to the
SDK as properly signed platform callbacks (or frames on a long connection).
``GET /_emulator/calls`` returns the recorded calls, ``GET /_emulator/callbacks`` the
deliveries to the SDK (each with its ``transport``) and ``GET /_emulator/state`` the
visible state; all are bounded.

An emulator defined outside the package (a platform registered with
``register_platform``) subclasses `EmulatorBase` through public names only: `lock`,
`add_timeline`, `mark_changed`, `send_callback`, plus the hooks below.

The base also holds what the platforms' APIs have in common: access tokens (issued for a
lifetime, checked on every call, revoked for tests), JSON bodies parsed before a platform
handler sees them, and every answered call recorded with secrets redacted.
"""

from __future__ import annotations

import base64
import binascii
import copy
import json
import logging
import re
import secrets
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

import urllib3

from channelkit.playground.rate_limits import WriteLimits

__all__ = [
    "MAX_CALLS",
    "MAX_CARDS",
    "MAX_SEND_FILES",
    "MAX_SEND_FILE_BYTES",
    "MAX_TIMELINE",
    "CallbackDelivery",
    "Deliver",
    "EmulatedFile",
    "EmulatorBase",
    "HttpReply",
    "Origin",
    "http_deliver",
    "parse_send_files",
]

logger = logging.getLogger(__name__)

#: Recorded API calls kept (oldest dropped).
MAX_CALLS = 1_000
#: Card instances kept (oldest dropped).
MAX_CARDS = 1_000
#: Timeline entries (messages, card references) kept.
MAX_TIMELINE = 1_000
#: Longest wait a client may ask ``/_emulator/state`` for.
MAX_WAIT_SECONDS = 10.0
#: Timeout of the callbacks the emulator sends to the SDK.
CALLBACK_TIMEOUT = 10.0
#: Issued access tokens kept; past this many the store starts afresh.
MAX_TOKENS = 100
#: Files one ``POST /_emulator/send`` may carry, and the bytes of each (decoded).
MAX_SEND_FILES = 10
MAX_SEND_FILE_BYTES = 32 * 1024 * 1024

#: who may click in ``/_emulator/cards/<id>/action`` (``userId``: a teammate, not the owner)
_USER_ID_RE = re.compile(r"[A-Za-z0-9_-]{1,64}")
#: a chat or thread id in ``/_emulator/send`` (each platform's id shapes)
_CHAT_ID_RE = re.compile(r"[A-Za-z0-9_.:@$-]{1,128}")


@dataclass(frozen=True)
class Origin:
    """Where an emulated person writes from (the extras of ``POST /_emulator/send``).

    ``user_id`` (None: the emulator's person), ``chat_id`` (None: the person's direct
    chat, or the emulator's group when ``group``), ``group`` (a group chat),
    ``mentions_bot`` (the message mentions the bot the platform's structured way) and
    ``thread_id`` (a thread / topic where the platform has them).
    """

    user_id: str | None = None
    chat_id: str | None = None
    group: bool = False
    mentions_bot: bool = False
    thread_id: str | None = None

    @classmethod
    def from_request(cls, data: Mapping[str, Any]) -> Origin:
        """Read the extras of a send request; ``ValueError`` names the bad field."""
        values: dict[str, Any] = {}
        for key, name, pattern in (
            ("userId", "user_id", _USER_ID_RE),
            ("chatId", "chat_id", _CHAT_ID_RE),
            ("threadId", "thread_id", _CHAT_ID_RE),
        ):
            value = data.get(key)
            if value is None:
                continue
            if not isinstance(value, str) or not pattern.fullmatch(value):
                raise ValueError(
                    f"{key}: must be an id of 1-{64 if key == 'userId' else 128} "
                    "characters (letters, digits, _ - and, for chats, . : @ $)"
                )
            values[name] = value
        for key, name in (("group", "group"), ("mentionsBot", "mentions_bot")):
            value = data.get(key)
            if value is None:
                continue
            if not isinstance(value, bool):
                raise ValueError(f"{key}: must be true or false")
            values[name] = value
        return cls(**values)


@dataclass(frozen=True)
class EmulatedFile:
    """A file the emulated person sends (``files`` of ``POST /_emulator/send``)."""

    name: str
    content_type: str
    data: bytes


def parse_send_files(value: Any) -> tuple[EmulatedFile, ...]:
    """``files`` of a send request: a list of ``{"name", "contentType", "base64"}``;
    ``ValueError`` names the bad field (``files[1].base64``)."""
    if value is None:
        return ()
    if not isinstance(value, list) or len(value) > MAX_SEND_FILES:
        raise ValueError(f"files: must be a list of at most {MAX_SEND_FILES} files")
    files = []
    for index, item in enumerate(value):
        where = f"files[{index}]"
        if not isinstance(item, Mapping):
            raise ValueError(f"{where}: must be an object with name, contentType, base64")
        name, kind, encoded = item.get("name"), item.get("contentType"), item.get("base64")
        if not isinstance(name, str) or not 1 <= len(name) <= 255:
            raise ValueError(f"{where}.name: must be a file name of 1-255 characters")
        if not isinstance(kind, str) or not re.fullmatch(r"[\w.+-]+/[\w.+-]+", kind):
            raise ValueError(f"{where}.contentType: must be a media type such as image/png")
        if not isinstance(encoded, str) or len(encoded) > (MAX_SEND_FILE_BYTES // 3 + 1) * 4:
            raise ValueError(
                f"{where}.base64: must be base64 of at most {MAX_SEND_FILE_BYTES} bytes"
            )
        try:
            data = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError(f"{where}.base64: is not valid base64") from None
        files.append(EmulatedFile(name, kind, data))
    return tuple(files)


_SECRET_KEYS = frozenset(
    {
        "appsecret",
        "app_secret",
        "apisecret",
        "client_secret",
        "secret",
        "accesstoken",
        "access_token",
        "tenant_access_token",
        "app_access_token",
        "token",
        "secret_token",
        "encrypt_key",
        "verification_token",
        "clientsecret",
        "ticket",
    }
)


@dataclass(frozen=True)
class CallbackDelivery:
    """What the SDK answered to a callback the emulator sent."""

    status: int
    body: str


#: ``deliver(url, headers, body) -> CallbackDelivery``: how callbacks reach the SDK.
Deliver = Callable[[str, Mapping[str, str], bytes], CallbackDelivery]


#: The emulators' one connection pool for callbacks (urllib3's pools are thread-safe).
#: A callback made through ``requests.post`` built a session per call and read the
#: process environment for proxies each time (about half again the CPU of a callback);
#: a callback to the SDK on this machine never goes through a proxy.
_CALLBACK_POOL = urllib3.PoolManager(num_pools=32, maxsize=16)


def http_deliver(url: str, headers: Mapping[str, str], body: bytes) -> CallbackDelivery:
    """Deliver a callback over real HTTP (the default)."""
    try:
        response = _CALLBACK_POOL.request(
            "POST",
            url,
            body=body,
            headers=dict(headers),
            timeout=urllib3.Timeout(connect=CALLBACK_TIMEOUT, read=CALLBACK_TIMEOUT),
            retries=False,
        )
    except urllib3.exceptions.HTTPError as exc:
        logger.warning("emulator callback to %s failed: %s", url, type(exc).__name__)
        return CallbackDelivery(status=0, body=str(exc))
    return CallbackDelivery(status=response.status, body=response.data.decode("utf-8", "replace"))


@dataclass(frozen=True)
class HttpReply:
    """An emulator response."""

    status: int
    payload: Any = None
    content_type: str = "application/json"
    raw: bytes | None = None
    #: further response headers (e.g. Discord's ``X-RateLimit-*``)
    headers: tuple[tuple[str, str], ...] = ()

    def encode(self) -> bytes:
        if self.raw is not None:
            return self.raw
        return json.dumps(self.payload, ensure_ascii=False).encode("utf-8")


def redact(value: Any) -> Any:
    """A copy of ``value`` with secret-looking fields replaced by ``"***"``."""
    if isinstance(value, Mapping):
        return {
            k: ("***" if str(k).lower() in _SECRET_KEYS and v not in (None, "") else redact(v))
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [redact(v) for v in value]
    return value


class EmulatorBase:
    """State, recording and the WSGI plumbing every platform emulator shares.

    Subclasses implement `handle_api()` (the platform paths) and
    `handle_control()` (``/_emulator/...`` actions specific to the platform).
    Everything is guarded by one lock; `wait_for_change()` lets the page long-poll.
    """

    platform = "generic"

    def __init__(self, *, deliver: Deliver | None = None, max_calls: int = MAX_CALLS) -> None:
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._version = 0
        self._seq = 0
        self._calls: deque[dict[str, Any]] = deque(maxlen=max_calls)
        self._timeline: deque[dict[str, Any]] = deque(maxlen=MAX_TIMELINE)
        self._cards: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._callbacks: deque[dict[str, Any]] = deque(maxlen=max_calls)
        self._typing_until = 0.0
        self._tokens: dict[str, float] = {}  # access token -> expiry (epoch seconds)
        self._current_token: str | None = None
        self.deliver: Deliver = deliver or http_deliver
        self.base_url = ""
        self.static_dir: str | None = None
        #: True while the SDK holds a request for the person, including those no card
        #: shows (a text permission prompt, answered with ``/approve`` or ``/deny``); the
        #: playground wires it to its channel. None: only the cards tell.
        self.request_pending: Callable[[], bool] | None = None
        #: the platform's per-chat write limits (off until ``POST /_emulator/limits``;
        #: rate_limits.py): a write past them gets the platform's own 429
        self.write_limits = WriteLimits()

    # -- state helpers (call with the lock held) ----------------------------------------
    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def _touch(self) -> None:
        self._version += 1
        self._changed.notify_all()

    def _add_timeline(self, entry: dict[str, Any]) -> dict[str, Any]:
        entry = {"seq": self._next_seq(), "at": time.time(), **entry}
        self._timeline.append(entry)
        self._touch()
        return entry

    def _put_card(self, card_id: str, card: dict[str, Any]) -> None:
        self._cards[card_id] = card
        self._cards.move_to_end(card_id)
        while len(self._cards) > MAX_CARDS:
            self._cards.popitem(last=False)
        self._touch()

    def _record(
        self,
        method: str,
        path: str,
        query: Mapping[str, str],
        body: Any,
        reply: HttpReply,
    ) -> None:
        with self._lock:
            self._calls.append(
                {
                    "seq": self._next_seq(),
                    "at": time.time(),
                    "method": method,
                    "path": path,
                    "query": redact(dict(query)),
                    "body": redact(body),
                    "status": reply.status,
                    "response": redact(reply.payload),
                }
            )
            self._touch()

    # -- the same helpers under public names, for emulators outside the package -----------
    @property
    def lock(self) -> threading.RLock:
        """The emulator's re-entrant lock: hold it while reading or changing its state."""
        return self._lock

    def add_timeline(self, entry: dict[str, Any]) -> dict[str, Any]:
        """Append a chat entry (``kind``, ``from``, ...) with its ``seq`` and time; the
        stored entry. Hold `lock`."""
        return self._add_timeline(entry)

    def mark_changed(self) -> None:
        """Say the visible state changed (wakes `wait_for_change`). Hold `lock`."""
        self._touch()

    def send_callback(
        self, kind: str, url: str, headers: Mapping[str, str], body: bytes
    ) -> CallbackDelivery:
        """Deliver one callback to the SDK over `deliver` and record it (``kind`` names
        it in ``/_emulator/callbacks``); the SDK's answer. Call it without `lock`."""
        return self._send_callback(kind, url, headers, body)

    # -- access tokens -------------------------------------------------------------------
    def _issue_token(
        self, prefix: str, nbytes: int, lifetime: float, *, renew_below: float | None = None
    ) -> tuple[str, float]:
        """A token and its seconds left: a new one valid for ``lifetime``, or, with
        ``renew_below``, the last one again while more than that many seconds remain."""
        now = time.time()
        with self._lock:
            token = self._current_token
            expiry = self._tokens.get(token, 0.0) if token else 0.0
            if renew_below is None or token is None or expiry - now < renew_below:
                token = prefix + secrets.token_hex(nbytes)
                if len(self._tokens) > MAX_TOKENS:
                    self._tokens.clear()
                self._tokens[token] = now + lifetime
                self._current_token = token
                expiry = now + lifetime
        return token, expiry - now

    def _token_valid(self, token: str) -> bool:
        """True if ``token`` was issued, not revoked, and has not expired."""
        with self._lock:
            expiry = self._tokens.get(token)
        return expiry is not None and expiry > time.time()

    def revoke_tokens(self) -> None:
        """Invalidate every issued token (the next API call is rejected as the platform
        rejects an invalid token)."""
        with self._lock:
            self._tokens.clear()
            self._current_token = None

    # -- public inspection --------------------------------------------------------------
    @property
    def version(self) -> int:
        """Increases on every change of calls or visible state."""
        with self._lock:
            return self._version

    def calls(self, path: str | None = None, method: str | None = None) -> list[dict[str, Any]]:
        """The recorded API calls (oldest first), optionally filtered."""
        with self._lock:
            out = [copy.deepcopy(c) for c in self._calls]
        if path is not None:
            out = [c for c in out if c["path"] == path]
        if method is not None:
            out = [c for c in out if c["method"] == method.upper()]
        return out

    def callbacks(self) -> list[dict[str, Any]]:
        """The callbacks sent to the SDK and its answers (oldest first)."""
        with self._lock:
            return [copy.deepcopy(c) for c in self._callbacks]

    def cards(self) -> dict[str, dict[str, Any]]:
        """Card instances by id (a snapshot)."""
        with self._lock:
            return copy.deepcopy(dict(self._cards))

    def card(self, card_id: str) -> dict[str, Any] | None:
        """One card instance (a snapshot) or None."""
        with self._lock:
            card = self._cards.get(card_id)
            return copy.deepcopy(card) if card is not None else None

    def timeline(self) -> list[dict[str, Any]]:
        """Chat entries in order: user/bot messages and card references."""
        with self._lock:
            return [copy.deepcopy(t) for t in self._timeline]

    def state(self) -> dict[str, Any]:
        """Everything the page shows.

        ``waitingCards`` are the cards and messages whose question waits for the person's
        answer (views with ``awaitsAnswer``); ``requestPending`` is
        `request_pending`'s answer; ``waiting`` is either. While it is true the run
        is the person's turn, so the page shows no working indicator (whatever reaction
        or status stays on).
        """
        pending = self._request_is_pending()  # outside the lock: it asks the SDK
        with self._lock:
            extra = self.extra_state()
            views = extra.get("views") or {}
            waiting = [key for key, view in views.items() if view.get("awaitsAnswer")]
            return {
                "platform": self.platform,
                "version": self._version,
                "timeline": [copy.deepcopy(t) for t in self._timeline],
                "cards": copy.deepcopy(dict(self._cards)),
                "typing": self._typing_until > time.time(),
                "typingUntil": self._typing_until,
                **extra,
                "waitingCards": waiting,
                "requestPending": pending,
                "waiting": bool(waiting) or pending,
            }

    def _request_is_pending(self) -> bool:
        probe = self.request_pending
        if probe is None:
            return False
        try:
            return bool(probe())
        except Exception:
            logger.exception("the request_pending probe failed")
            return False

    def extra_state(self) -> dict[str, Any]:
        """Platform-specific additions to `state()` (lock held)."""
        return {}

    def wait_for_change(self, since: int, timeout: float) -> int:
        """Block until the version exceeds ``since`` or ``timeout`` passes; the version."""
        deadline = time.monotonic() + max(0.0, min(timeout, MAX_WAIT_SECONDS))
        with self._changed:
            while self._version <= since:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._changed.wait(remaining)
            return self._version

    def reset(self) -> None:
        """Forget calls, cards and the timeline (credentials and tokens stay)."""
        with self._lock:
            self._calls.clear()
            self._timeline.clear()
            self._cards.clear()
            self._callbacks.clear()
            self._touch()
        self.write_limits.reset()

    def _send_callback(
        self, kind: str, url: str, headers: Mapping[str, str], body: bytes
    ) -> CallbackDelivery:
        result = self.deliver(url, headers, body)
        self._record_callback(kind, "http", result, url=url)
        return result

    def _record_callback(
        self, kind: str, transport: str, result: CallbackDelivery, **details: Any
    ) -> None:
        """Record one delivery to the SDK: its ``transport`` (``http``, or a long
        connection such as ``stream``) and the SDK's answer."""
        with self._lock:
            self._callbacks.append(
                {
                    "seq": self._next_seq(),
                    "kind": kind,
                    "transport": transport,
                    **details,
                    "status": result.status,
                    "response": result.body[:2000],
                }
            )
            self._touch()

    def close(self) -> None:
        """Release what the emulator started (servers, threads); the WSGI app stays."""

    def _set_toast(self, card_id: str, kind: str, text: str) -> None:
        """Show a short notice (a platform toast / callback answer) on a card."""
        with self._lock:
            card = self._cards.get(card_id)
            if card is not None:
                card["toast"] = {"type": kind, "text": text[:200], "at": time.time()}
                self._touch()

    # -- subclass hooks -----------------------------------------------------------------
    def send_user_message(
        self, text: str, *, origin: Origin | None = None
    ) -> tuple[str, CallbackDelivery]:
        """The person types ``text`` (from ``origin``: another person, chat, a group,
        a mention, a thread); the platform's callback goes to the SDK.

        Returns the new message's id and the SDK's answer; ``ValueError`` when the
        platform cannot emulate ``origin``.
        """
        raise NotImplementedError

    #: True when `send_user_files()` is implemented (``files`` in ``/_emulator/send``)
    accepts_files: bool = False

    def send_user_files(
        self, text: str, files: tuple[EmulatedFile, ...], *, origin: Origin | None = None
    ) -> tuple[str, CallbackDelivery]:
        """The person sends ``files`` (with ``text`` as their caption, possibly empty);
        the emulator keeps the bytes and serves them through the platform's download
        API. Emulators that set `accepts_files` implement it."""
        raise ValueError(f"files: the {self.platform} emulator takes no files yet")

    def card_action(
        self,
        card_id: str,
        action: str,
        form: Mapping[str, Any] | None = None,
        *,
        user_id: str | None = None,
    ) -> CallbackDelivery:
        """The person clicks on a card or message (``KeyError``: unknown card;
        ``ValueError``: the card offers no such action)."""
        raise NotImplementedError

    def handle_api(
        self,
        method: str,
        path: str,
        query: Mapping[str, str],
        headers: Mapping[str, str],
        body: bytes,
    ) -> HttpReply | None:
        """Answer a platform API call; None when the path is not the platform's.

        By default the body is parsed as JSON (None when it is not), handed to
        `handle_json_api()`, and an answered call is recorded.
        """
        data = parse_json_body(body)
        reply = self.handle_json_api(method, path, query, headers, data)
        if reply is not None:
            self._record(method, path, query, data, reply)
        return reply

    def handle_json_api(
        self,
        method: str,
        path: str,
        query: Mapping[str, str],
        headers: Mapping[str, str],
        data: Any,
    ) -> HttpReply | None:
        """Answer a platform API call whose body was parsed as JSON (``data``, None when
        the body is empty or not JSON); None when the path is not the platform's."""
        raise NotImplementedError

    def handle_control(self, method: str, path: str, data: Any) -> HttpReply | None:
        """Answer a platform-specific ``/_emulator/...`` call; None if unknown."""
        return None

    # -- WSGI -----------------------------------------------------------------------------
    def _control(self, method: str, path: str, query: Mapping[str, str], body: bytes) -> HttpReply:
        if method == "GET" and path == "/_emulator/calls":
            since = _int(query.get("since"), 0)
            calls = [c for c in self.calls() if c["seq"] > since]
            return HttpReply(200, {"calls": calls})
        if method == "GET" and path == "/_emulator/callbacks":
            return HttpReply(200, {"callbacks": self.callbacks()})
        if method == "GET" and path == "/_emulator/state":
            since = _int(query.get("since"), -1)
            wait = _float(query.get("wait"), 0.0)
            if since >= 0 and wait > 0:
                self.wait_for_change(since, wait)
            return HttpReply(200, self.state())
        if method == "POST" and path == "/_emulator/reset":
            self.reset()
            return HttpReply(200, {"ok": True})
        try:
            data = json.loads(body.decode("utf-8")) if body else {}
        except ValueError:
            return HttpReply(400, {"error": "body must be JSON"})
        if method == "POST" and path == "/_emulator/send":
            return self._control_send(data)
        if method == "POST" and path.startswith("/_emulator/cards/") and path.endswith("/action"):
            return self._control_action(path[len("/_emulator/cards/") : -len("/action")], data)
        reply = self.handle_control(method, path, data)
        if reply is None and (limits := self.write_limits.control(method, path, data)):
            status, payload, headers = limits
            reply = HttpReply(status, payload, headers=headers)
        return reply or HttpReply(404, {"error": "unknown emulator path"})

    def _control_send(self, data: Any) -> HttpReply:
        text = data.get("text") if isinstance(data, Mapping) else None
        try:
            files = parse_send_files(data.get("files")) if isinstance(data, Mapping) else ()
        except ValueError as exc:
            return HttpReply(400, {"error": str(exc)})
        if files and not self.accepts_files:
            return HttpReply(
                400, {"error": f"files: the {self.platform} emulator takes no files yet"}
            )
        if files and (text is None or (isinstance(text, str) and not text.strip())):
            text = ""  # a file alone
        elif not isinstance(text, str) or not text.strip():
            return HttpReply(400, {"error": "text: must be a non-empty string"})
        try:
            origin = Origin.from_request(data)
        except ValueError as exc:
            return HttpReply(400, {"error": str(exc)})
        if files:
            try:
                msg_id, result = self.send_user_files(text.strip(), files, origin=origin)
            except ValueError as exc:
                return HttpReply(400, {"error": str(exc)})
            return HttpReply(200, {"msgId": msg_id, "status": result.status, "body": result.body})
        try:
            # an emulator written before origins (a plugin's) still gets plain sends
            msg_id, result = (
                self.send_user_message(text.strip())
                if origin == Origin()
                else self.send_user_message(text.strip(), origin=origin)
            )
        except ValueError as exc:  # the platform has no such chat (e.g. no groups)
            return HttpReply(400, {"error": str(exc)})
        return HttpReply(200, {"msgId": msg_id, "status": result.status, "body": result.body})

    def _control_action(self, card_id: str, data: Any) -> HttpReply:
        if not isinstance(data, Mapping) or not isinstance(data.get("action"), str):
            return HttpReply(400, {"error": "action: must be a string"})
        form = data.get("form")
        user_id = data.get("userId")
        if user_id is not None and (
            not isinstance(user_id, str) or not _USER_ID_RE.fullmatch(user_id)
        ):
            return HttpReply(400, {"error": "userId: 1-64 characters of A-Z a-z 0-9 _ -"})
        try:
            result = self.card_action(
                card_id,
                data["action"],
                form if isinstance(form, Mapping) else None,
                user_id=user_id,
            )
        except KeyError:
            return HttpReply(404, {"error": f"card {card_id} not found"})
        except ValueError as exc:
            return HttpReply(400, {"error": str(exc)})
        return HttpReply(200, {"status": result.status, "body": result.body})

    def _static(self, path: str) -> HttpReply | None:
        from channelkit.playground.static_files import read_static

        name = "index.html" if path in ("/", "/index.html") else path[len("/static/") :]
        if path not in ("/", "/index.html") and not path.startswith("/static/"):
            return None
        found = read_static(name)
        if found is None:
            return HttpReply(404, {"error": "not found"})
        data, content_type = found
        return HttpReply(200, None, content_type=content_type, raw=data)

    def __call__(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        method = str(environ.get("REQUEST_METHOD", "GET")).upper()
        path = str(environ.get("PATH_INFO", "") or "/")
        query = dict(parse_qsl(str(environ.get("QUERY_STRING", "")), keep_blank_values=True))
        headers = {
            key[5:].replace("_", "-").lower(): str(value)
            for key, value in environ.items()
            if key.startswith("HTTP_")
        }
        if environ.get("CONTENT_TYPE"):
            headers["content-type"] = str(environ["CONTENT_TYPE"])
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        body = environ["wsgi.input"].read(length) if length > 0 else b""
        try:
            if path.startswith("/_emulator/"):
                reply = self._control(method, path, query, body)
            elif (refused := self.write_limits.check(method, path, headers, body)) is not None:
                status, payload, extra = refused
                reply = HttpReply(status, payload, headers=extra)
                self._record(method, path, query, parse_json_body(body), reply)
            else:
                api = self.handle_api(method, path, query, headers, body)
                if api is not None:
                    reply = api
                else:
                    reply = self._static(path) or HttpReply(404, {"error": "not found"})
        except Exception:
            logger.exception("emulator failed on %s %s", method, path)
            reply = HttpReply(500, {"error": "emulator error"})
        data = reply.encode()
        content_type = reply.content_type
        if content_type == "application/json":
            content_type = "application/json; charset=utf-8"
        start_response(
            f"{reply.status} {'OK' if reply.status < 400 else 'Error'}",
            [
                ("Content-Type", content_type),
                ("Content-Length", str(len(data))),
                ("Cache-Control", "no-store"),
                *reply.headers,
            ],
        )
        return [data]


def parse_json_body(body: bytes) -> Any:
    """The JSON body, or None when it is not JSON."""
    if not body:
        return None
    try:
        return json.loads(body.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        return None


def _int(raw: str | None, default: int) -> int:
    try:
        return int(raw) if raw is not None else default
    except ValueError:
        return default


def _float(raw: str | None, default: float) -> float:
    try:
        return float(raw) if raw is not None else default
    except ValueError:
        return default

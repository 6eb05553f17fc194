"""The local admin endpoint: answer pairing requests of a running bot over HTTP.

`AdminEndpoint` serves a small JSON API on 127.0.0.1 only, every request carrying
``Authorization: Bearer <token>`` (compared in constant time; 401 otherwise). It is how
``channelkit pairing`` reaches a bot whose pairing records live in its process's memory
(no ``state.redis``); ``channelkit serve --admin-port N`` starts it with the token from
the ``CHANNELKIT_ADMIN_TOKEN`` environment variable.

* ``GET /pairing/<channel>`` - ``{"codes": [{"code", "user", "chat", "at"}], "paired": [...]}``
* ``POST /pairing/<channel>/approve`` / ``deny`` with ``{"code": "..."}`` - ``{"user"}``,
  404 when the code is unknown, expired or answered already
* ``POST /pairing/<channel>/revoke`` with ``{"user": "..."}`` - 404 when not paired

An unknown channel is 404, a malformed body 400; bodies are at most 4 KiB.
"""

from __future__ import annotations

import hmac
import json
import logging
import threading
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from channelkit.errors import ConfigurationError

__all__ = ["ADMIN_HOST", "ADMIN_TOKEN_ENV", "AdminEndpoint", "admin_app"]

logger = logging.getLogger(__name__)

#: The admin endpoint listens here only.
ADMIN_HOST = "127.0.0.1"
#: The environment variable holding the admin token (serve and ``channelkit pairing``).
ADMIN_TOKEN_ENV = "CHANNELKIT_ADMIN_TOKEN"
_MAX_BODY = 4096

_Start = Callable[[str, list[tuple[str, str]]], Any]


def _reply(start: _Start, status: int, body: dict[str, Any]) -> list[bytes]:
    data = json.dumps(body).encode("utf-8")
    reason = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found"}
    start(
        f"{status} {reason.get(status, 'Error')}",
        [("Content-Type", "application/json"), ("Content-Length", str(len(data)))],
    )
    return [data]


def admin_app(channels: Iterable[Any], token: str) -> Callable[[dict[str, Any], _Start], Any]:
    """The WSGI app of the admin API over ``channels`` (by name), guarded by ``token``."""
    if not isinstance(token, str) or len(token) < 16:
        raise ConfigurationError("must be at least 16 characters", path=ADMIN_TOKEN_ENV)
    by_name = {channel.name: channel for channel in channels}
    expected = f"Bearer {token}".encode()

    def app(environ: dict[str, Any], start: _Start) -> list[bytes]:
        given = str(environ.get("HTTP_AUTHORIZATION", "")).encode()
        if not hmac.compare_digest(given, expected):
            return _reply(start, 401, {"error": "a valid admin token is required"})
        parts = [p for p in str(environ.get("PATH_INFO", "")).split("/") if p]
        if len(parts) not in (2, 3) or parts[0] != "pairing":
            return _reply(start, 404, {"error": "unknown path"})
        channel = by_name.get(parts[1])
        if channel is None:
            return _reply(start, 404, {"error": f"no channel {parts[1]!r}"})
        gate = channel.access
        method = environ.get("REQUEST_METHOD", "GET")
        if len(parts) == 2 and method == "GET":
            codes = [
                {"code": r.code, "user": r.user_id, "chat": r.chat_id, "at": r.created_at}
                for r in gate.pairing_codes()
            ]
            return _reply(start, 200, {"codes": codes, "paired": gate.paired_users()})
        if len(parts) != 3 or method != "POST" or parts[2] not in ("approve", "deny", "revoke"):
            return _reply(start, 404, {"error": "unknown path"})
        body = _body(environ)
        field = "user" if parts[2] == "revoke" else "code"
        value = body.get(field) if isinstance(body, dict) else None
        if not isinstance(value, str) or not value.strip():
            return _reply(start, 400, {"error": f"{field}: must be a non-empty string"})
        if parts[2] == "revoke":
            if not gate.revoke(value):
                return _reply(start, 404, {"error": f"{value} is not paired"})
            return _reply(start, 200, {"user": value})
        request = gate.approve(value) if parts[2] == "approve" else gate.deny(value)
        if request is None:
            return _reply(start, 404, {"error": "no such code (unknown, expired or answered)"})
        logger.info("[%s] pairing %s: %s", channel.name, parts[2], request.user_id)
        return _reply(start, 200, {"code": request.code, "user": request.user_id})

    return app


def _body(environ: dict[str, Any]) -> Any:
    try:
        length = int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return None
    if length <= 0 or length > _MAX_BODY:
        return None
    try:
        return json.loads(environ["wsgi.input"].read(length).decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        return None


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("admin %s", format % args)


class AdminEndpoint:
    """The admin API on ``127.0.0.1:port`` (0: a free port) in a daemon thread.

    ``AdminEndpoint(channels, token, port=0)``; ``url`` is known at once; `stop()` (or
    the context manager) closes it.
    """

    def __init__(self, channels: Iterable[Any], token: str, *, port: int = 0) -> None:
        app = admin_app(channels, token)
        self._server = make_server(
            ADMIN_HOST, port, app, server_class=_Server, handler_class=_Quiet
        )
        self.port = int(self._server.server_address[1])
        self.url = f"http://{ADMIN_HOST}:{self.port}"
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.2},
            name=f"channelkit-admin-{self.port}",
            daemon=True,
        )
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop serving and close the socket (idempotent)."""
        if self._thread.is_alive():
            self._server.shutdown()
            self._thread.join(timeout)
        self._server.server_close()

    def __enter__(self) -> AdminEndpoint:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

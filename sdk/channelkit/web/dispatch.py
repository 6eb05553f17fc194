"""Route table and dispatch shared by the WSGI app, the Flask blueprint and Django views.

`IngressDispatcher` collects the `IngressRoute`
objects of every channel (anything with ``ingress_routes()``), answers ``404`` for
unknown paths and ``405`` (with ``Allow``) for wrong methods, and turns any exception a
handler raises into a ``500`` so nothing ever propagates into the web server.
`read_body()` reads a request body once, refusing more than ``MAX_BODY_BYTES``;
an error the server raises while the body is read (a malformed chunked body, a client
that went away) becomes `UnreadableBody`, answered 400.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import IO, Any

from channelkit.errors import BadContentLength, BodyTooLarge, UnreadableBody
from channelkit.ingress import (
    MAX_BODY_BYTES,
    Headers,
    IngressRequest,
    IngressResponse,
    IngressRoute,
    SupportsIngress,
)
from channelkit.observability import hub

__all__ = [
    "HEALTHZ_PATH",
    "BadContentLength",
    "BodyTooLarge",
    "IngressDispatcher",
    "UnreadableBody",
    "collect_routes",
    "environ_headers",
    "read_body",
]

logger = logging.getLogger(__name__)


#: The built-in health endpoint (GET; ``{"ok": true}``, or a ``health`` report).
HEALTHZ_PATH = "/healthz"


def read_body(
    stream: IO[bytes] | Any,
    content_length: str | int | None,
    *,
    limit: int = MAX_BODY_BYTES,
    terminated: bool = True,
) -> bytes:
    """Read a request body once.

    With a Content-Length larger than ``limit`` nothing is read and `BodyTooLarge`
    is raised. Without one, the body is empty unless ``terminated`` says the stream ends
    at the end of the body (chunked input behind a server that sets
    ``wsgi.input_terminated``, or a framework's already-limited stream); then at most
    ``limit + 1`` bytes are read and the same error is raised when it is larger.
    Any error raised by the stream itself (a malformed chunked body under gunicorn, a
    reset connection) is raised as `UnreadableBody`.
    """
    length: int | None
    if content_length in (None, ""):
        length = None
    else:
        text = str(content_length).strip()
        # RFC 9110: 1*DIGIT. int() would also take "+5", "1_0" and non-ASCII digits,
        # reading a different length than the server framed.
        if not (text.isascii() and text.isdigit()):
            raise BadContentLength(str(content_length)[:32])
        length = int(text) if len(text) <= 32 else limit + 1  # 33+ digits: too large
    if length is not None and length > limit:
        raise BodyTooLarge(length)
    if length == 0 or (length is None and not terminated):
        return b""
    to_read = limit + 1 if length is None else length
    chunks: list[bytes] = []
    remaining = to_read
    while remaining > 0:
        try:
            chunk = stream.read(min(remaining, 65536))
        except Exception as exc:  # the server's framing error, whatever its type
            raise UnreadableBody(type(exc).__name__) from None
        if not isinstance(chunk, bytes | bytearray):
            raise UnreadableBody(type(chunk).__name__)
        if not chunk:
            break
        chunks.append(bytes(chunk))
        remaining -= len(chunk)
    data = b"".join(chunks)
    if len(data) > limit:
        raise BodyTooLarge(len(data))
    return data


def collect_routes(
    channels: Iterable[SupportsIngress | IngressRoute],
) -> list[IngressRoute]:
    """Every route of ``channels`` (adapters with ``ingress_routes()`` or bare routes)."""
    routes: list[IngressRoute] = []
    for item in channels:
        if isinstance(item, IngressRoute):
            routes.append(item)
            continue
        get_routes = getattr(item, "ingress_routes", None)
        if not callable(get_routes):
            raise TypeError(
                f"channels: {type(item).__name__} has no ingress_routes() and is not an "
                "IngressRoute"
            )
        routes.extend(get_routes())
    return routes


def _normalize_path(path: str) -> str:
    if not path.startswith("/"):
        path = "/" + path
    if len(path) > 1 and path.endswith("/"):
        path = path.rstrip("/") or "/"
    return path


def _route_platform(route: IngressRoute) -> str:
    """The platform a channel route belongs to: its name's first word (the adapters
    name their routes ``<platform>-<what>``, e.g. ``telegram-webhook``)."""
    head = route.name.split("-", 1)[0]
    return head if head.isidentifier() and head.islower() else "other"


def _healthz(_: IngressRequest) -> IngressResponse:
    return IngressResponse.json(200, {"ok": True})


class IngressDispatcher:
    """Maps ``(method, path)`` to an adapter handler; never raises.

    ``channels`` are adapters exposing ``ingress_routes()`` (or bare ``IngressRoute``
    objects). Two routes for the same path and method raise ``ValueError`` at
    construction. ``healthz`` adds ``GET /healthz``: ``{"ok": true}``, or with
    ``health`` (a callable returning a document with ``ok``, e.g.
    `channelkit.web.health.health_report()` of the channels) that document, 200 when
    it is ok and 503 otherwise.
    """

    def __init__(
        self,
        channels: Iterable[SupportsIngress | IngressRoute],
        *,
        healthz: bool = True,
        max_body_bytes: int = MAX_BODY_BYTES,
        health: Callable[[], Mapping[str, Any]] | None = None,
    ) -> None:
        self.max_body_bytes = max_body_bytes
        self._table: dict[str, dict[str, IngressRoute]] = {}
        routes = collect_routes(channels)
        if healthz:
            handler: Callable[[IngressRequest], IngressResponse] = _healthz
            if health is not None:
                from channelkit.web.health import health_response

                handler = health_response(health)
            routes.append(IngressRoute(HEALTHZ_PATH, handler, methods=("GET",), name="healthz"))
        for route in routes:
            path = _normalize_path(route.path)
            by_method = self._table.setdefault(path, {})
            for method in route.methods:
                key = method.upper()
                if key in by_method:
                    raise ValueError(f"routes: {key} {path} is mounted twice")
                by_method[key] = route

    @property
    def paths(self) -> list[str]:
        """Every mounted path, sorted."""
        return sorted(self._table)

    def routes(self) -> list[tuple[str, tuple[str, ...]]]:
        """``(path, methods)`` for every mounted path."""
        return [(path, self.allowed(path)) for path in self.paths]

    def allowed(self, path: str) -> tuple[str, ...]:
        """The methods mounted at ``path`` (empty when the path is unknown)."""
        return tuple(sorted(self._table.get(_normalize_path(path), {})))

    def preflight(self, method: str, path: str) -> IngressResponse | None:
        """The 404/405 answer for ``method path`` before any body is read, else None."""
        by_method = self._table.get(_normalize_path(path))
        if by_method is None:
            return IngressResponse.json(404, {"error": "not_found"})
        if method.upper() not in by_method and not (
            method.upper() == "HEAD" and "GET" in by_method
        ):
            allow = ", ".join(sorted(by_method))
            return IngressResponse(
                status=405,
                body=b'{"error":"method_not_allowed"}',
                headers=(("Content-Type", "application/json"), ("Allow", allow)),
            )
        return None

    def dispatch(self, request: IngressRequest) -> IngressResponse:
        """Run the handler for ``request``; 404/405 for unknown routes, 500 on a crash."""
        early = self.preflight(request.method, request.path)
        if early is not None:
            return early
        by_method = self._table[_normalize_path(request.path)]
        method = request.method.upper()
        route = by_method.get(method) or by_method["GET"]
        try:
            response: object = route.handler(request)
        except Exception:
            logger.exception("ingress handler %s %s raised", method, request.path)
            return IngressResponse.json(500, {"error": "internal_error"})
        if not isinstance(response, IngressResponse):
            logger.error("ingress handler %s %s returned %r", method, request.path, response)
            return IngressResponse.json(500, {"error": "internal_error"})
        if response.status in (401, 403):
            # the adapters answer a missing or wrong signature (or secret token) so
            hub.ingress(_route_platform(route), "bad_signature")
        return response

    def read_or_refuse(
        self,
        stream: IO[bytes] | Any,
        content_length: str | int | None,
        *,
        terminated: bool = True,
    ) -> bytes | IngressResponse:
        """The request body (`read_body()` under ``max_body_bytes``), or its refusal.

        A body too large answers 413; an unreadable body or a malformed Content-Length
        answers 400 (``unreadable_body`` / ``bad_content_length``).
        """
        try:
            return read_body(
                stream, content_length, limit=self.max_body_bytes, terminated=terminated
            )
        except BodyTooLarge:
            return self.too_large()
        except UnreadableBody:
            return self.bad_request("unreadable_body")
        except BadContentLength:
            return self.bad_request("bad_content_length")

    @staticmethod
    def too_large() -> IngressResponse:
        """The 413 answer."""
        return IngressResponse.json(413, {"error": "payload_too_large"})

    @staticmethod
    def bad_request(reason: str = "bad_request") -> IngressResponse:
        """A 400 answer."""
        return IngressResponse.json(400, {"error": reason})


def environ_headers(environ: Mapping[str, Any]) -> Headers:
    """The request headers of a WSGI environ (or Django's ``request.META``)."""
    pairs: list[tuple[str, str]] = []
    for key, value in environ.items():
        if key.startswith("HTTP_"):
            pairs.append((key[5:].replace("_", "-").title(), str(value)))
        elif key in ("CONTENT_TYPE", "CONTENT_LENGTH") and value:
            pairs.append((key.replace("_", "-").title(), str(value)))
    return Headers(pairs)


def query_dict(pairs: Iterable[tuple[str, str]] | Mapping[str, str]) -> dict[str, str]:
    """First value per query key."""
    items = pairs.items() if isinstance(pairs, Mapping) else pairs
    out: dict[str, str] = {}
    for key, value in items:
        out.setdefault(key, value)
    return out

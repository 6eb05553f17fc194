"""The framework-neutral WSGI application: ``create_wsgi_app(channels)``.

Serve it with any WSGI server (gunicorn, waitress, ``wsgiref`` for local tests)::

    from channelkit.web import create_wsgi_app
    application = create_wsgi_app([dingtalk_channel])

Every adapter's ingress routes are mounted at the paths the adapter declares (for
example ``/dingtalk/robot`` and ``/dingtalk/card``) plus ``GET /healthz``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any
from urllib.parse import parse_qsl

from channelkit.ingress import (
    MAX_BODY_BYTES,
    IngressRequest,
    IngressResponse,
    IngressRoute,
    SupportsIngress,
)
from channelkit.web.dispatch import IngressDispatcher, environ_headers, query_dict

__all__ = ["WSGIApp", "create_wsgi_app", "request_from_environ"]

logger = logging.getLogger(__name__)

StartResponse = Callable[..., Any]
WSGIApplication = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]

_REASONS = {
    200: "OK",
    201: "Created",
    202: "Accepted",
    204: "No Content",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    409: "Conflict",
    413: "Payload Too Large",
    429: "Too Many Requests",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


def _status_line(status: int) -> str:
    return f"{status} {_REASONS.get(status, 'Status')}"


def request_from_environ(environ: dict[str, Any], body: bytes) -> IngressRequest:
    """Build an `IngressRequest` from a WSGI environ and its already-read body.

    ``path`` is ``PATH_INFO``: the route path inside the application, without the
    ``SCRIPT_NAME`` prefix the app may be mounted under (as in the Flask and Django
    integrations, where it is the mounted route path).
    """
    path = str(environ.get("PATH_INFO", "") or "/")
    return IngressRequest(
        method=str(environ.get("REQUEST_METHOD", "GET")).upper(),
        path=path,
        headers=environ_headers(environ),
        body=body,
        query=query_dict(parse_qsl(str(environ.get("QUERY_STRING", "")), keep_blank_values=True)),
        remote_addr=environ.get("REMOTE_ADDR"),
    )


class _AfterBody:
    """The response body; the server's ``close()`` (PEP 3333) runs the deferred work.

    A WSGI server calls ``close()`` once the response has been sent (or the client went
    away), so a handler's deferred work (responders, card writes) starts only after its
    ACK is on the wire.
    """

    def __init__(self, response: IngressResponse) -> None:
        self._response = response

    def __iter__(self) -> Iterator[bytes]:
        yield self._response.body

    def close(self) -> None:
        self._response.run_after()


class WSGIApp:
    """A WSGI callable dispatching to channel ingress handlers.

    ``fallback`` (another WSGI app) receives requests for paths no channel mounts instead
    of the 404 (the playground uses it for its emulator and page).
    """

    def __init__(
        self,
        dispatcher: IngressDispatcher,
        *,
        fallback: WSGIApplication | None = None,
    ) -> None:
        self.dispatcher = dispatcher
        self.fallback = fallback

    def _respond(self, response: IngressResponse, start_response: StartResponse) -> Iterable[bytes]:
        headers = list(response.headers)
        if not any(name.lower() == "content-length" for name, _ in headers):
            headers.append(("Content-Length", str(len(response.body))))
        start_response(_status_line(response.status), headers)
        if not response.after:
            return [response.body]
        return _AfterBody(response)

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        try:
            method = str(environ.get("REQUEST_METHOD", "GET")).upper()
            path = str(environ.get("PATH_INFO", "") or "/")
            early = self.dispatcher.preflight(method, path)
            if early is not None:
                if early.status == 404 and self.fallback is not None:
                    return self.fallback(environ, start_response)
                return self._respond(early, start_response)
            body = self.dispatcher.read_or_refuse(
                environ.get("wsgi.input"),
                environ.get("CONTENT_LENGTH"),
                terminated=bool(environ.get("wsgi.input_terminated", False)),
            )
            if isinstance(body, IngressResponse):
                return self._respond(body, start_response)
            request = request_from_environ(environ, body)
            response = self.dispatcher.dispatch(request)
            if method == "HEAD":
                response = IngressResponse(response.status, b"", response.headers, response.after)
            return self._respond(response, start_response)
        except Exception:  # never raise into the server
            logger.exception("channelkit WSGI app failed")
            return self._respond(
                IngressResponse.json(500, {"error": "internal_error"}), start_response
            )


def create_wsgi_app(
    channels: Iterable[SupportsIngress | IngressRoute],
    *,
    healthz: bool = True,
    max_body_bytes: int = MAX_BODY_BYTES,
    fallback: WSGIApplication | None = None,
    health: Callable[[], Mapping[str, Any]] | None = None,
) -> WSGIApp:
    """A WSGI application mounting every channel's ingress routes (plus ``/healthz``).

    Bodies are read once (Content-Length) and refused with 413 when larger than
    ``max_body_bytes`` (1 MiB) before anything more is read; unknown paths answer 404,
    wrong methods 405 with ``Allow``; a handler that raises answers 500. Signature
    rejections (401/403) come from the adapters' handlers unchanged. ``health`` makes
    ``/healthz`` answer a report (see `IngressDispatcher`).
    """
    return WSGIApp(
        IngressDispatcher(channels, healthz=healthz, max_body_bytes=max_body_bytes, health=health),
        fallback=fallback,
    )

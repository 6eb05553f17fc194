"""A body stream that fails while it is read is a 400, never a 500 or a traceback."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from channelkit.ingress import IngressResponse, IngressRoute
from channelkit.web import create_wsgi_app
from channelkit.web.dispatch import UnreadableBody, read_body


class InvalidChunkSize(Exception):
    """What gunicorn raises for a malformed chunked body."""


class BrokenStream:
    def read(self, size: int = -1) -> bytes:
        raise InvalidChunkSize("invalid chunk size: b'zz'")


def _call(app: Any, environ: dict[str, Any]) -> tuple[str, bytes]:
    seen: list[str] = []
    body = b"".join(app(environ, lambda status, headers: seen.append(status)))
    return seen[0], body


@pytest.mark.parametrize(
    "extra",
    [
        {"wsgi.input_terminated": True},  # chunked: no Content-Length
        {"CONTENT_LENGTH": "10"},
    ],
)
def test_a_malformed_chunked_body_answers_400(
    extra: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    called: list[Any] = []
    route = IngressRoute(
        "/hook", lambda r: called.append(r) or IngressResponse.json(200, {}), ("POST",)
    )
    app = create_wsgi_app([route])
    environ = {"REQUEST_METHOD": "POST", "PATH_INFO": "/hook", "wsgi.input": BrokenStream()}
    environ.update(extra)
    with caplog.at_level(logging.DEBUG):
        status, body = _call(app, environ)
    assert status.startswith("400") and b"unreadable_body" in body
    assert called == []
    assert not [r for r in caplog.records if r.exc_info]


def test_read_body_raises_unreadable_body_for_a_failing_stream() -> None:
    with pytest.raises(UnreadableBody):
        read_body(BrokenStream(), "5")
    with pytest.raises(UnreadableBody):
        read_body(None, "5")

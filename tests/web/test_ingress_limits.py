"""Body framing and limits on every web path (WSGI, Flask, Django) under hostile input."""

from __future__ import annotations

import io
import sys
import types
from typing import Any

import pytest
from channelkit.ingress import loads_json
from channelkit.web import (
    MAX_BODY_BYTES,
    IngressRequest,
    IngressResponse,
    IngressRoute,
    create_wsgi_app,
)
from hypothesis import given, settings
from hypothesis import strategies as st


class _Echo:
    def __init__(self) -> None:
        self.seen: list[IngressRequest] = []

    def handle(self, request: IngressRequest) -> IngressResponse:
        self.seen.append(request)
        return IngressResponse.json(200, {"len": len(request.body), "path": request.path})

    def ingress_routes(self) -> list[IngressRoute]:
        return [IngressRoute("/echo", self.handle, ("POST",))]


class _CountingStream(io.BytesIO):
    """A request stream that records how many bytes were read from it."""

    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.consumed = 0

    def read(self, size: int | None = -1) -> bytes:
        chunk = super().read(size)
        self.consumed += len(chunk)
        return chunk


def _environ(path: str, stream: Any, content_length: str | None, **extra: Any) -> dict[str, Any]:
    environ: dict[str, Any] = {
        "REQUEST_METHOD": "POST",
        "SCRIPT_NAME": "",
        "PATH_INFO": path,
        "QUERY_STRING": "",
        "SERVER_NAME": "127.0.0.1",
        "SERVER_PORT": "80",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "wsgi.url_scheme": "http",
        "wsgi.input": stream,
        "wsgi.errors": sys.stderr,
        "wsgi.version": (1, 0),
        "wsgi.multithread": True,
        "wsgi.multiprocess": False,
        "wsgi.run_once": False,
        "CONTENT_TYPE": "application/json",
        **extra,
    }
    if content_length is not None:
        environ["CONTENT_LENGTH"] = content_length
    return environ


def _call(app: Any, environ: dict[str, Any]) -> tuple[int, bytes]:
    captured: dict[str, Any] = {}

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> None:
        captured["status"] = int(status.split()[0])

    result = app(environ, start_response)
    try:
        body = b"".join(result)
    finally:
        close = getattr(result, "close", None)
        if close is not None:
            close()
    return captured["status"], body


def test_loads_json_turns_every_failure_into_value_error() -> None:
    for bad in (b"[" * 100_000 + b"]" * 100_000, b"\xff\xfe", b"{", "\ud800"):
        with pytest.raises(ValueError):
            loads_json(bad)
    assert loads_json(b'{"a": [1]}') == {"a": [1]}


@pytest.mark.parametrize("value", ["+5", "1_0", "\u0665", "-1", " 5 5", "5.0", "0x10"])
def test_content_length_must_be_plain_digits(value: str) -> None:
    app = create_wsgi_app([_Echo()])
    stream = _CountingStream(b"0123456789")
    status, _ = _call(app, _environ("/echo", stream, value))
    assert status == 400 and stream.consumed == 0


def test_an_absurd_content_length_is_413_without_reading() -> None:
    app = create_wsgi_app([_Echo()])
    stream = _CountingStream(b"x")
    for value in ("9" * 40, "5" * 5000):  # int() refuses > 4300 digits: no crash either
        assert _call(app, _environ("/echo", stream, value))[0] == 413
    assert stream.consumed == 0


def test_the_app_works_mounted_under_a_script_name() -> None:
    # gunicorn --env SCRIPT_NAME=/hooks, or werkzeug's DispatcherMiddleware
    echo = _Echo()
    app = create_wsgi_app([echo])
    status, body = _call(app, _environ("/echo", io.BytesIO(b"{}"), "2", SCRIPT_NAME="/hooks"))
    assert status == 200 and body == b'{"len":2,"path":"/echo"}'


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    content_length=st.one_of(st.none(), st.text(max_size=12), st.integers(-5, 10**7).map(str)),
    body=st.binary(max_size=64),
    terminated=st.booleans(),
)
def test_fuzz_framing_never_fails(
    content_length: str | None, body: bytes, terminated: bool
) -> None:
    app = create_wsgi_app([_Echo()], max_body_bytes=32)
    stream = _CountingStream(body)
    extra = {"wsgi.input_terminated": True} if terminated else {}
    status, _ = _call(app, _environ("/echo", stream, content_length, **extra))
    assert status in (200, 400, 413)
    assert stream.consumed <= 33


# -- Flask and Django: chunked uploads without Content-Length --------------------------


def test_flask_reads_a_chunked_body_and_refuses_an_oversized_one() -> None:
    flask = pytest.importorskip("flask")
    from channelkit.web.flask import create_blueprint

    app = flask.Flask("ck-limits")
    app.register_blueprint(create_blueprint([_Echo()]))
    terminated = {"wsgi.input_terminated": True, "HTTP_TRANSFER_ENCODING": "chunked"}
    small = _CountingStream(b'{"a":1}')
    status, body = _call(app, _environ("/echo", small, None, **terminated))
    assert status == 200 and body.startswith(b'{"len":7')
    big = _CountingStream(b"y" * (MAX_BODY_BYTES + 100))
    status, _ = _call(app, _environ("/echo", big, None, **terminated))
    assert status == 413 and big.consumed <= MAX_BODY_BYTES + 1
    for bad in ("+5", "1_0"):
        assert _call(app, _environ("/echo", io.BytesIO(b"12345"), bad))[0] == 400


def test_django_never_reads_past_the_limit_and_never_fails() -> None:
    pytest.importorskip("django")
    from test_web_frameworks import _django_settings

    _django_settings()
    from channelkit.web.django import urlpatterns
    from django.core.handlers.wsgi import WSGIHandler
    from django.test import override_settings

    echo = _Echo()
    module = types.ModuleType("channelkit_test_urls_limits")
    module.urlpatterns = urlpatterns([echo])  # type: ignore[attr-defined]
    sys.modules[module.__name__] = module
    try:
        with override_settings(ROOT_URLCONF=module.__name__):
            app = WSGIHandler()
            # Django frames bodies by Content-Length only: a chunked body reads as empty
            chunked = _CountingStream(b"y" * (MAX_BODY_BYTES + 100))
            terminated = {"wsgi.input_terminated": True, "HTTP_TRANSFER_ENCODING": "chunked"}
            status, body = _call(app, _environ("/echo", chunked, None, **terminated))
            assert status == 200 and body.startswith(b'{"len":0')
            assert chunked.consumed <= MAX_BODY_BYTES + 1
            declared = _CountingStream(b"y" * 10)
            status, _ = _call(app, _environ("/echo", declared, str(MAX_BODY_BYTES + 1)))
            assert status == 413 and declared.consumed == 0
            ok = _CountingStream(b'{"a":1}')
            status, body = _call(app, _environ("/echo", ok, "7"))
            assert status == 200 and body.startswith(b'{"len":7')
    finally:
        sys.modules.pop(module.__name__, None)


# -- a body stream that fails while it is read: 400 on every web path ------------------


class _InvalidChunkSize(Exception):
    """What gunicorn raises for a malformed chunked body."""


class _FailingStream:
    """A request stream that fails on read, like a malformed chunked body or a reset peer."""

    def __init__(self, error: BaseException) -> None:
        self.error = error
        self.reads = 0

    def read(self, *args: Any) -> bytes:
        self.reads += 1
        raise self.error

    def readline(self, *args: Any) -> bytes:
        return self.read()


_FAILURES = [_InvalidChunkSize("invalid chunk size: b'zz'"), ConnectionResetError(104, "reset")]


def _unreadable_cases() -> list[Any]:
    return [
        pytest.param(error, extra, id=f"{type(error).__name__}-{name}")
        for error in _FAILURES
        for name, extra in (
            ("length", {"CONTENT_LENGTH": "10"}),
            ("chunked", {"wsgi.input_terminated": True, "HTTP_TRANSFER_ENCODING": "chunked"}),
        )
    ]


def _assert_unreadable_is_400(
    app: Any, echo: _Echo, error: BaseException, extra: dict[str, Any], caplog: Any
) -> None:
    stream = _FailingStream(error)
    content_length = extra.pop("CONTENT_LENGTH", None)
    with caplog.at_level("DEBUG"):
        status, body = _call(app, _environ("/echo", stream, content_length, **extra))
    assert status == 400 and b"unreadable_body" in body
    assert stream.reads >= 1  # the failure was met, not avoided
    assert echo.seen == []  # the handler never ran
    assert not [r for r in caplog.records if r.exc_info]


@pytest.mark.parametrize(("error", "extra"), _unreadable_cases())
def test_an_unreadable_body_is_400_through_the_wsgi_app(
    error: BaseException, extra: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    echo = _Echo()
    _assert_unreadable_is_400(create_wsgi_app([echo]), echo, error, dict(extra), caplog)


@pytest.mark.parametrize(("error", "extra"), _unreadable_cases())
def test_an_unreadable_body_is_400_through_flask(
    error: BaseException, extra: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    flask = pytest.importorskip("flask")
    from channelkit.web.flask import create_blueprint

    echo = _Echo()
    app = flask.Flask("ck-unreadable")
    app.register_blueprint(create_blueprint([echo]))
    _assert_unreadable_is_400(app, echo, error, dict(extra), caplog)


@pytest.mark.parametrize(
    ("error", "extra"),
    [case for case in _unreadable_cases() if "length" in str(case.id)],  # Django: no chunked
)
def test_an_unreadable_body_is_400_through_django(
    error: BaseException, extra: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    pytest.importorskip("django")
    from test_web_frameworks import _django_settings

    _django_settings()
    from channelkit.web.django import urlpatterns
    from django.core.handlers.wsgi import WSGIHandler
    from django.test import override_settings

    echo = _Echo()
    module = types.ModuleType("channelkit_test_urls_unreadable")
    module.urlpatterns = urlpatterns([echo])  # type: ignore[attr-defined]
    sys.modules[module.__name__] = module
    try:
        with override_settings(ROOT_URLCONF=module.__name__):
            _assert_unreadable_is_400(WSGIHandler(), echo, error, dict(extra), caplog)
    finally:
        sys.modules.pop(module.__name__, None)

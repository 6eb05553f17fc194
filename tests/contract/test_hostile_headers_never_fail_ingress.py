"""Hostile request headers never fail an ingress route, on every chat platform.

Every registered chat platform is started through its playground in an ingress mode
that mounts HTTP routes; every route gets requests whose headers are hostile: non-ASCII
(Latin-1 as a WSGI server decodes them, and beyond), huge, missing, duplicated (as a
server joins them, and as a repeated pair), plausible-looking but malformed (non-ASCII
digits in a timestamp, a signature of the right shape with one foreign character). The
answer is always a refusal (4xx) or the platform's ACK, never a 500, and nothing is
logged with a traceback (nor at ERROR).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest
from channelkit.ingress import Headers, IngressRequest, IngressRoute
from channelkit.platforms import PLATFORMS
from channelkit.playground import Playground
from channelkit.runtime import FakeClock
from channelkit.web.dispatch import IngressDispatcher
from contract_drivers import DRIVERS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st


def _declared(attribute: str) -> tuple[str, ...]:
    """Headers a platform defined outside the package declares on its contract driver
    (``signature_headers`` / ``timestamp_headers``)."""
    return tuple(h for driver in DRIVERS.values() for h in getattr(driver, attribute, ()))


#: Signature, timestamp and token headers of every platform (each route gets all of
#: them: a header another platform reads must be harmless too; a plug-in's from its
#: driver), plus the generic ones.
SIGNATURE_HEADERS = (
    "X-Slack-Signature",
    "X-Slack-Request-Timestamp",
    "X-Slack-Retry-Num",
    "timestamp",
    "sign",
    "x-ddpaas-signature-timestamp",
    "x-ddpaas-signature",
    "X-Lark-Signature",
    "X-Lark-Request-Timestamp",
    "X-Lark-Request-Nonce",
    "X-Telegram-Bot-Api-Secret-Token",
    "X-Signature-Ed25519",
    "X-Signature-Timestamp",
    *_declared("signature_headers"),
)
TIMESTAMP_HEADERS = (
    "X-Slack-Request-Timestamp",
    "timestamp",
    "x-ddpaas-signature-timestamp",
    "X-Lark-Request-Timestamp",
    "X-Signature-Timestamp",
    *_declared("timestamp_headers"),
)
GENERIC_HEADERS = ("Content-Type", "Content-Length", "Host", "User-Agent")
BODIES = (
    b"",
    b"{}",
    b'{"type":"event_callback","event":{"type":"message","text":"hi"}}',
    b"payload=%7B%7D",
    b'{"encrypt":"AAAA"}',
    b'{"update_id":1,"message":{"text":"hi"}}',
)


def _chat_platforms() -> list[str]:
    return [
        name
        for name, spec in PLATFORMS.items()
        if spec.kind == "chat" and spec.playground is not None
    ]


@pytest.fixture(scope="module", params=_chat_platforms())
def mounted(request: pytest.FixtureRequest) -> Iterator[tuple[IngressDispatcher, list[Any]]]:
    """The platform's playground in its first ingress mode that mounts HTTP routes, the
    routes behind the dispatcher the web layers use; skipped for a platform that only
    has long connections (no request headers to send)."""
    name = request.param
    for mode in PLATFORMS[name].ingress:
        clock = FakeClock(start=time.monotonic(), wall_start=time.time())
        with Playground(platform=name, ingress=mode, agent="echo", clock=clock) as pg:
            routes: list[IngressRoute] = list(pg.channel.ingress_routes())
            if routes:
                yield IngressDispatcher(routes, healthz=False), routes
                return
    pytest.skip(f"{name}: only long connections ({', '.join(PLATFORMS[name].ingress)})")


class _Recorder(logging.Handler):
    """Records every channelkit log record with a traceback or at ERROR and above."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.bad: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info or record.levelno >= logging.ERROR:
            self.bad.append(record)


@pytest.fixture
def recorder() -> Iterator[_Recorder]:
    handler = _Recorder()
    logger = logging.getLogger("channelkit")
    logger.addHandler(handler)
    previous = logger.level
    logger.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(previous)


def _send(
    dispatcher: IngressDispatcher, route: Any, pairs: list[tuple[str, str]], body: bytes
) -> int:
    request = IngressRequest("POST", route.path, Headers(pairs), body)
    response = dispatcher.dispatch(request)  # the ACK only: deferred work is not run
    return response.status


def _check(recorder: _Recorder, status: int, pairs: list[tuple[str, str]]) -> None:
    shown = [(k, v[:40]) for k, v in pairs]
    assert status < 500, f"HTTP {status} for headers {shown}"
    assert recorder.bad == [], [r.getMessage()[:200] for r in recorder.bad]


# -- generated header values ---------------------------------------------------------------

_text = st.text(st.characters(exclude_categories=["Cs"]), max_size=40)
_latin1 = st.text(st.characters(min_codepoint=0x80, max_codepoint=0xFF), min_size=1, max_size=40)
_huge = st.builds(
    lambda c, n: c * n,
    st.sampled_from(["a", "9", "é", "\u4e2d", " "]),
    st.integers(1_000, 70_000),
)
_fresh = st.builds(lambda: str(int(time.time())))
_lookalike = st.one_of(
    st.sampled_from(["\u0661\u0667\u0660\u0660", "１７００", "+1700000000", " 1700000000 ", "1_7"]),
    st.builds(lambda c: "v0=" + "a" * 63 + c, st.characters(min_codepoint=0x80)),
    st.builds(lambda c: "v0=" + "a" * 64 + c, st.characters()),
)
_value = st.one_of(_text, _latin1, _huge, _fresh, _lookalike)
_joined = st.builds(lambda a, b: f"{a}, {b}", _value, _value)  # duplicated, joined
_headers = st.lists(
    st.tuples(st.sampled_from(SIGNATURE_HEADERS + GENERIC_HEADERS), st.one_of(_value, _joined)),
    max_size=8,  # repeated names stay as repeated pairs; missing ones are absent
)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(pairs=_headers, body=st.sampled_from(BODIES), index=st.integers(0, 7))
def test_generated_hostile_headers_get_a_refusal_or_an_ack(
    mounted: tuple[IngressDispatcher, list[Any]],
    recorder: _Recorder,
    pairs: list[tuple[str, str]],
    body: bytes,
    index: int,
) -> None:
    dispatcher, routes = mounted
    route = routes[index % len(routes)]
    recorder.bad.clear()
    _check(recorder, _send(dispatcher, route, pairs, body), pairs)


@pytest.mark.parametrize(
    "signature",
    [
        "v0=" + "é" * 64,  # the reported case: non-ASCII where hex is expected
        "v0=" + "a" * 63 + "\u4e2d",
        "\u00ff" * 10,
        "\u4e2d\u6587",
        "x" * 100_000,
    ],
    ids=["latin1-hex", "cjk-last", "latin1", "cjk", "huge"],
)
def test_a_fresh_timestamp_with_a_non_ascii_signature_is_refused(
    mounted: tuple[IngressDispatcher, list[Any]], recorder: _Recorder, signature: str
) -> None:
    dispatcher, routes = mounted
    now = str(int(time.time()))
    now_ms = str(int(time.time() * 1000))
    for route in routes:
        pairs = [
            (name, now_ms if name.startswith(("timestamp", "x-ddpaas")) else now)
            for name in TIMESTAMP_HEADERS
        ]
        pairs += [(name, signature) for name in SIGNATURE_HEADERS if name not in TIMESTAMP_HEADERS]
        for body in (b"{}", BODIES[2]):
            recorder.bad.clear()
            status = _send(dispatcher, route, pairs, body)
            _check(recorder, status, pairs)
            assert 400 <= status < 500 or status == 200, status

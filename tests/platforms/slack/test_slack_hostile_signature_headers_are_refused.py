"""Slack: a malformed signature or timestamp header is a 401, never an exception."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
import requests_mock as rm
from channelkit.ingress import Headers, IngressRequest
from channelkit.platforms.slack.ingress import SIGNATURE_HEADER, TIMESTAMP_HEADER
from channelkit.testing import ScriptedBridge

from tests.platforms.slack.slack_env import Env, mock_web_api


@pytest.fixture
def env(rt) -> Iterator[Env]:  # type: ignore[no-untyped-def]
    with rm.Mocker() as m:
        mock_web_api(m)
        made = Env(rt, m, ScriptedBridge([]))
        yield made
        made.channel.close(2.0)


@pytest.mark.parametrize(
    ("timestamp", "signature"),
    [
        (None, "v0=" + "é" * 64),  # non-ASCII where hex is expected, fresh timestamp
        (None, "v0=" + "a" * 63 + "中"),
        (None, "ÿ" * 10),
        (None, "x" * 100_000),
        ("١٧٠٠٠٠٠٠٠٠", "v0=" + "a" * 64),  # non-ASCII digits
        ("1_700_000_000", "v0=" + "a" * 64),
        (" 1700000000 ", "v0=" + "a" * 64),
        ("9" * 5_000, "v0=" + "a" * 64),
    ],
    ids=[
        "latin1-hex",
        "cjk-last",
        "latin1",
        "huge-signature",
        "arabic-digits",
        "underscores",
        "spaces",
        "huge-timestamp",
    ],
)
def test_a_malformed_signature_header_is_a_401_without_a_traceback(
    env: Env, caplog: pytest.LogCaptureFixture, timestamp: str | None, signature: str
) -> None:
    caplog.set_level(logging.DEBUG, logger="channelkit")
    ts = str(int(env.rt.clock.time())) if timestamp is None else timestamp
    headers = Headers({TIMESTAMP_HEADER: ts, SIGNATURE_HEADER: signature})
    response = env.respond(IngressRequest("POST", env.route.path, headers, env.event_body("hi")))
    assert response.status == 401
    assert [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR] == []

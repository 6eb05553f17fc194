"""The overall deadline covers the status line and headers too (a peer trickling them one
byte at a time fails at the deadline), defaults to 10 s for the whole call, and bounds the
token fetches as well (DingTalk's included)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
from channelkit.errors import ReadTimeout, TransportError
from channelkit.http.auth import DingTalkTokenProvider
from channelkit.http.transport import DEFAULT_TIMEOUT, Transport, normalize_timeout
from channelkit.platforms.dingtalk.api import CardApi

from tests.platforms.slow_peer import Reply, SlowPeer, serve

DEADLINE = 0.5


def _token(method: str, path: str, body: object) -> Reply:
    return Reply(body=json.dumps({"accessToken": "tok", "expireIn": 7200}).encode(), drip=True)


@pytest.fixture()
def dripping_peer() -> Iterator[SlowPeer]:
    """Every answer, status line first, one byte every 0.1 s: no single read waits long."""
    yield from serve(_token, drip_interval=0.1)


def test_a_peer_trickling_its_status_line_fails_at_the_overall_deadline(
    dripping_peer: SlowPeer,
) -> None:
    transport = Transport()
    try:
        started = time.monotonic()
        with pytest.raises(ReadTimeout) as caught:
            transport.request("GET", dripping_peer.url + "/x", timeout=(DEADLINE, DEADLINE))
        elapsed = time.monotonic() - started
    finally:
        transport.close()
    assert caught.value.timeout is True and "overall deadline" in str(caught.value)
    # the status line alone takes 1.5 s at this pace: the call ended at its deadline
    assert DEADLINE - 0.05 <= elapsed < DEADLINE + 0.4


def test_the_default_is_ten_seconds_for_the_whole_call_connect_included() -> None:
    assert DEFAULT_TIMEOUT == (3.05, 10.0)
    assert normalize_timeout(None, DEFAULT_TIMEOUT) == (3.05, 10.0)
    # one number is the overall deadline; the connection is made within it
    assert normalize_timeout(10, DEFAULT_TIMEOUT) == (3.05, 10.0)
    assert normalize_timeout(0.5, DEFAULT_TIMEOUT) == (0.5, 0.5)
    with pytest.raises(Exception, match="positive"):
        normalize_timeout(float("nan"), DEFAULT_TIMEOUT)


def test_a_token_fetch_from_a_trickling_peer_fails_at_the_request_timeout(
    dripping_peer: SlowPeer,
) -> None:
    api = CardApi.create("ding-robot", "secret", base_url=dripping_peer.url, timeout=DEADLINE)
    try:
        provider = api._client.token_provider
        assert isinstance(provider, DingTalkTokenProvider)
        started = time.monotonic()
        with pytest.raises(TransportError) as caught:
            api.send_group_markdown("cid", "t", "x")
        elapsed = time.monotonic() - started
    finally:
        api.close()
    assert caught.value.timeout is True
    assert elapsed < DEADLINE + 0.4
    assert [p for _m, p, _b in dripping_peer.requests] == ["/v1.0/oauth2/accessToken"]

"""Feishu requests are one-use: signed or plain, a replay never starts a second run."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from channelkit.ingress import Headers, IngressRequest
from channelkit.platforms.feishu import FeishuChannel
from channelkit.platforms.feishu.api import FeishuApi
from channelkit.testing import ScriptedBridge
from feishu_helpers import ENCRYPT_KEY, channel_on, message_event, request


def _channel(rt: Any, api: FeishuApi, encrypt_key: str | None) -> FeishuChannel:
    settings: dict[str, Any] = {"encrypt_key": encrypt_key} if encrypt_key else {}
    return channel_on(rt, api, ScriptedBridge([]), **settings)


@pytest.fixture
def plain(rt: Any, api: FeishuApi) -> Iterator[FeishuChannel]:
    channel = _channel(rt, api, None)
    yield channel
    channel.close(timeout=2.0)


@pytest.fixture
def encrypted(rt: Any, api: FeishuApi) -> Iterator[FeishuChannel]:
    channel = _channel(rt, api, ENCRYPT_KEY)
    yield channel
    channel.close(timeout=2.0)


def _event(message_id: str, event_id: str, created_ms: int) -> dict[str, Any]:
    payload = message_event("hello", message_id=message_id, event_id=event_id)
    payload["header"]["create_time"] = str(created_ms)
    return payload


def test_a_plain_event_replayed_after_11_minutes_is_refused(rt: Any, plain: FeishuChannel) -> None:
    req = request(_event("om_1", "ev-1", int(rt.clock.time() * 1000)))
    first = plain.handle_event_request(req)
    assert first.status == 200 and first.after
    rt.clock.advance(11 * 60)
    replay = plain.handle_event_request(req)
    assert replay.status in (401, 403) and not replay.after


def test_a_plain_event_replayed_at_once_is_refused(rt: Any, plain: FeishuChannel) -> None:
    req = request(_event("om_1", "ev-1", int(rt.clock.time() * 1000)))
    assert plain.handle_event_request(req).after
    replay = plain.handle_event_request(req)
    assert replay.status == 403 and not replay.after


def test_a_plain_event_without_the_verification_token_is_refused(
    rt: Any, plain: FeishuChannel
) -> None:
    payload = _event("om_1", "ev-1", int(rt.clock.time() * 1000))
    del payload["header"]["token"]
    response = plain.handle_event_request(request(payload))
    assert response.status == 401 and not response.after


def test_a_signed_event_replayed_after_1000_other_messages_is_refused(
    rt: Any, encrypted: FeishuChannel
) -> None:
    now_ms = int(rt.clock.time() * 1000)
    ts = str(int(rt.clock.time()))
    original = request(_event("om_0", "ev-0", now_ms), encrypt_key=ENCRYPT_KEY, timestamp=ts)
    assert encrypted.handle_event_request(original).after
    for n in range(1, 1_001):
        other = request(
            _event(f"om_{n}", f"ev-{n}", now_ms),
            encrypt_key=ENCRYPT_KEY,
            timestamp=ts,
            nonce=f"n-{n}",
        )
        assert encrypted.handle_event_request(other).status == 200
    replay = encrypted.handle_event_request(original)
    assert replay.status == 403 and not replay.after


def test_a_non_ascii_signature_is_refused_without_a_traceback(
    rt: Any, encrypted: FeishuChannel, caplog: pytest.LogCaptureFixture
) -> None:
    good = request(
        _event("om_1", "ev-1", int(rt.clock.time() * 1000)),
        encrypt_key=ENCRYPT_KEY,
        timestamp=str(int(rt.clock.time())),
    )
    headers = dict(good.headers.items())
    headers["X-Lark-Signature"] = "é" * 64
    response = encrypted.handle_event_request(
        IngressRequest("POST", "/feishu/events", Headers(headers), good.body)
    )
    assert response.status == 401 and not response.after
    assert not [r for r in caplog.records if r.exc_info]

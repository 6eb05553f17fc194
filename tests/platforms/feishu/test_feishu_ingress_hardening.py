"""Hostile input on the Feishu ingress: JSON, tokens, timestamps, unsigned work, fuzzing."""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterator
from typing import Any

import pytest
from channelkit.ingress import Headers, IngressRequest
from channelkit.platforms.feishu import FeishuChannel
from channelkit.platforms.feishu import ingress as feishu_ingress
from channelkit.platforms.feishu.api import FeishuApi
from channelkit.platforms.feishu.crypto import encrypt_event, feishu_signature
from channelkit.platforms.feishu.ingress import (
    FeishuIngressVerifier,
    IngressRejected,
    parse_card_action,
    parse_message_event,
)
from channelkit.testing import ScriptedBridge
from feishu_helpers import (
    ENCRYPT_KEY,
    TOKEN,
    FakeFeishu,
    challenge,
    channel_on,
    message_event,
    request,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

NOW = 1_700_000_000.0
FUZZ = settings(
    max_examples=120,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


def verifier(encrypt_key: str | None = None) -> FeishuIngressVerifier:
    return FeishuIngressVerifier(TOKEN, encrypt_key, time=lambda: NOW, max_clock_skew_s=300)


def rejected(v: FeishuIngressVerifier, req: IngressRequest) -> int:
    with pytest.raises(IngressRejected) as info:
        v.verify(req)
    return info.value.status


def test_deeply_nested_and_non_utf8_bodies_are_400() -> None:
    for raw in (b"[" * 100_000 + b"]" * 100_000, b'{"a":' * 50_000, b"\xff{}"):
        assert rejected(verifier(), request(None, raw=raw)) == 400


def test_a_token_with_a_lone_surrogate_is_401_not_an_exception() -> None:
    assert rejected(verifier(), request(None, raw=b'{"token": "\\ud800"}')) == 401
    assert rejected(verifier(), request(None, raw=b'{"header": {"token": "\\udfff"}}')) == 401


@pytest.mark.parametrize(
    "ts", ["nan", "NaN", "inf", "-inf", "1.7e9", "1_700_000_000", "-1700000000", "", "9" * 400]
)
def test_timestamps_must_be_plain_digits(ts: str) -> None:
    # "nan" used to pass the freshness check (every comparison with NaN is False)
    req = request(challenge(), timestamp=ts)
    assert rejected(verifier(), req) == 401
    signed = request(message_event(), encrypt_key=ENCRYPT_KEY, timestamp=ts)
    assert rejected(verifier(ENCRYPT_KEY), signed) == 401


def test_unsigned_encrypted_bodies_beyond_a_challenge_are_refused_before_decrypting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[int] = []
    real = feishu_ingress.decrypt_event

    def counting(key: str, encrypted: str) -> Any:
        calls.append(len(encrypted))
        return real(key, encrypted)

    monkeypatch.setattr(feishu_ingress, "decrypt_event", counting)
    big = base64.b64encode(os.urandom(16 + 16 * 4000)).decode()
    raw = json.dumps({"encrypt": big}).encode()
    assert rejected(verifier(ENCRYPT_KEY), request(None, raw=raw)) == 401
    assert calls == []  # no AES work for an unauthenticated request
    # the (unsigned) encrypted URL challenge still works
    result = verifier(ENCRYPT_KEY).verify(request(challenge(), encrypt_key=ENCRYPT_KEY))
    assert result.challenge == "ch-1" and len(calls) == 1


def test_parsers_survive_deeply_nested_embedded_json() -> None:
    nested = "[" * 100_000 + "]" * 100_000
    action = parse_card_action(
        {"schema": "2.0", "event": {"operator": {"open_id": "ou"}, "action": {"value": nested}}}
    )
    assert action is not None and action.value == {}
    event = message_event()
    event["event"]["message"]["content"] = nested
    assert parse_message_event(event) is None


# -- the adapter ------------------------------------------------------------------------


@pytest.fixture
def encrypted_channel(rt: Any, api: FeishuApi) -> Iterator[FeishuChannel]:
    channel = channel_on(
        rt, api, ScriptedBridge([]), encrypt_key=ENCRYPT_KEY, max_clock_skew_s=1800
    )
    yield channel
    channel.close(timeout=2.0)


def _signed(payload: Any, ts: str, path: str = "/feishu/events") -> IngressRequest:
    return request(payload, path=path, encrypt_key=ENCRYPT_KEY, timestamp=ts)


def test_a_replayed_event_is_refused_for_the_whole_skew_window(
    rt: Any, encrypted_channel: FeishuChannel
) -> None:
    ts = str(int(rt.clock.time()))
    req = _signed(message_event(event_id="ev-replay"), ts)
    first = encrypted_channel.handle_event_request(req)
    assert first.status == 200 and first.after
    rt.clock.advance(1500)  # past the 10 min dedup TTL, inside the 30 min skew window
    replay = encrypted_channel.handle_event_request(req)
    assert replay.status == 403 and not replay.after
    first.run_after()


_names = st.sampled_from(
    ["X-Lark-Request-Timestamp", "X-Lark-Request-Nonce", "X-Lark-Signature", "Content-Type"]
)
_headers = st.dictionaries(
    _names,
    st.one_of(st.text(max_size=40), st.just(str(int(NOW))), st.just("nonce-1")),
    max_size=4,
)
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner),
    max_leaves=20,
)
_bodies = st.one_of(
    st.binary(max_size=300),
    _json.map(lambda v: json.dumps(v).encode()),
    st.builds(lambda v: json.dumps({"encrypt": v}).encode(), st.text(max_size=200)),
    st.builds(
        lambda v: json.dumps({"encrypt": encrypt_event(ENCRYPT_KEY, v)}).encode(),
        _json,
    ),
)


def test_fuzz_handlers_never_fail_and_unsigned_requests_change_nothing(
    rt: Any, fake: FakeFeishu, encrypted_channel: FeishuChannel
) -> None:
    ch = encrypted_channel

    def state() -> tuple[int, ...]:
        return (len(ch._events_seen), len(fake.calls), len(ch.output))

    before = state()

    @FUZZ
    @given(headers=_headers, body=_bodies, card=st.booleans())
    def check(headers: dict[str, str], body: bytes, card: bool) -> None:
        path = "/feishu/card" if card else "/feishu/events"
        handler = ch.handle_card_request if card else ch.handle_event_request
        response = handler(IngressRequest("POST", path, Headers(headers), body))
        assert response.status < 500
        if response.status != 200:
            assert not response.after
        assert state() == before  # without a valid signature nothing is recorded or sent

    check()


def test_fuzz_signed_bodies_never_fail(rt: Any, encrypted_channel: FeishuChannel) -> None:
    ch = encrypted_channel

    @FUZZ
    @given(payload=_json, card=st.booleans())
    def check(payload: Any, card: bool) -> None:
        ts = str(int(rt.clock.time()))
        body = json.dumps({"encrypt": encrypt_event(ENCRYPT_KEY, payload)}).encode()
        headers = {
            "X-Lark-Request-Timestamp": ts,
            "X-Lark-Request-Nonce": "n",
            "X-Lark-Signature": feishu_signature(ts, "n", ENCRYPT_KEY, body),
        }
        handler = ch.handle_card_request if card else ch.handle_event_request
        response = handler(IngressRequest("POST", "/feishu/x", Headers(headers), body))
        assert response.status in (200, 400, 401)

    check()

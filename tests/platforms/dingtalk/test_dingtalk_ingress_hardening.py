"""Hostile input on the DingTalk ingress: timestamps, bodies, replays, fuzzing."""

from __future__ import annotations

import json
import math

import pytest
from channelkit.errors import ConfigurationError
from channelkit.ingress import Headers, IngressRequest
from channelkit.platforms.dingtalk import DingtalkConfig, card_signature, robot_signature
from channelkit.platforms.dingtalk.ingress import (
    check_card_signature,
    check_robot_signature,
    parse_card_callback,
)
from dingtalk_helpers import AdapterHarness
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

NOW = 1_700_000_000.0
FUZZ = settings(
    max_examples=120,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@pytest.mark.parametrize(
    "ts",
    [
        "1" + "0" * 400,  # overflowed the float conversion (500 before)
        "9" * 5000,  # beyond int()'s digit limit
        "-1700000000000",
        "+1700000000000",
        "1_700_000_000_000",
        "1.7e12",
        "nan",
        "\u0661\u0667\u0660\u0660\u0660\u0660\u0660\u0660\u0660\u0660",  # Arabic-Indic digits
        " ",
    ],
)
def test_malformed_timestamps_are_rejected_not_crashing(ts: str) -> None:
    headers = {"timestamp": ts, "sign": robot_signature(ts, "secret")}
    assert check_robot_signature(headers, "secret", now=NOW) in (401, 403)
    card = {"x-ddpaas-signature-timestamp": ts, "x-ddpaas-signature": card_signature(ts, "api")}
    assert check_card_signature(card, "api", now=NOW) in (401, 403)


def test_huge_timestamp_answers_403_through_the_handler(adapter) -> None:  # type: ignore[no-untyped-def]
    h = adapter()
    response = h.robot_request(h.robot_payload("hi"), ts="1" + "0" * 400, after=False)
    assert response.status == 403 and not response.after
    assert h.channel.map_sizes()["seen"] == 0


def test_deeply_nested_or_non_utf8_bodies_answer_400(adapter) -> None:  # type: ignore[no-untyped-def]
    h = adapter(secret="card-secret")
    for body in (b"[" * 100_000 + b"]" * 100_000, b"\xff\xfe{}", b"{" * 50_000):
        assert h.robot_request(None, body=body, after=False).status == 400
        h.clock.advance(0.001)  # each request is signed at its own millisecond (one-use)
        ts = str(int(h.clock.time() * 1000))
        headers = {
            "x-ddpaas-signature-timestamp": ts,
            "x-ddpaas-signature": card_signature(ts, "card-secret"),
        }
        assert h.card_request(None, headers=headers, body=body, after=False).status == 400


def test_card_callback_with_deeply_nested_embedded_json_is_ignored() -> None:
    nested = "[" * 100_000 + "]" * 100_000
    payload = {"userId": "u1", "outTrackId": "t1", "value": nested, "content": nested}
    assert parse_card_callback(payload) is None
    assert parse_card_callback(json.dumps(payload)) is None


def test_a_replayed_robot_message_is_refused_for_the_whole_skew_window(adapter) -> None:  # type: ignore[no-untyped-def]
    h = adapter()
    payload = h.robot_payload("hello")
    ts = str(int(h.clock.time() * 1000))
    first = h.robot_request(payload, ts=ts, after=False)
    assert first.status == 200 and first.after
    # 20 minutes later the same signed request is still inside the 1 h skew window
    h.clock.advance(1200)
    replay = h.robot_request(payload, ts=ts, after=False)
    assert replay.status == 403 and not replay.after
    first.run_after()


def test_empty_card_callback_secret_and_bad_skew_are_configuration_errors() -> None:
    with pytest.raises(ConfigurationError, match="cardCallbackSecret"):
        DingtalkConfig(client_id="c", client_secret="s", card_callback_secret="")
    with pytest.raises(ConfigurationError, match="cardCallbackSecret"):
        DingtalkConfig.from_dict({"clientId": "c", "clientSecret": "s", "cardCallbackSecret": " "})
    for skew in (math.nan, math.inf, 0.0, -5.0):
        with pytest.raises(ConfigurationError, match="robotMaxSkewSeconds"):
            DingtalkConfig(client_id="c", client_secret="s", robot_max_skew_seconds=skew)


# -- fuzzing ------------------------------------------------------------------------------

_header_names = st.sampled_from(
    ["timestamp", "sign", "x-ddpaas-signature-timestamp", "x-ddpaas-signature", "content-type"]
)
_header_values = st.one_of(
    st.text(max_size=40),
    st.integers(min_value=-(10**20), max_value=10**20).map(str),
    st.just(str(int(NOW * 1000))),
)
_headers = st.dictionaries(_header_names, _header_values, max_size=5)
_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner),
    max_leaves=20,
)
_bodies = st.one_of(
    st.binary(max_size=300),
    _json_values.map(lambda v: json.dumps(v).encode()),
    st.builds(
        lambda extra: json.dumps(
            {"userId": "staff-1", "outTrackId": "t", "value": extra, "msgId": "m"}
        ).encode(),
        _json_values,
    ),
)


def _state(h: AdapterHarness) -> tuple[object, ...]:
    return (dict(h.channel.map_sizes()), len(h.api.calls))


def test_fuzz_robot_and_card_handlers_never_fail_and_wrong_signatures_change_nothing(
    adapter,  # type: ignore[no-untyped-def]
) -> None:
    h = adapter(secret="card-secret")
    before = _state(h)

    @FUZZ
    @given(headers=_headers, body=_bodies)
    def check(headers: dict[str, str], body: bytes) -> None:
        request = IngressRequest("POST", "/dingtalk/robot", Headers(headers), body)
        robot = h.channel.handle_robot_request(request)
        card = h.channel.handle_card_request(
            IngressRequest("POST", "/dingtalk/card", Headers(headers), body)
        )
        for response in (robot, card):
            assert response.status < 500
            if response.status != 200:
                assert not response.after
        # no valid signature can be produced by chance: nothing may change
        assert robot.status in (400, 401, 403)
        assert card.status in (400, 401, 403)
        assert _state(h) == before

    check()


def test_fuzz_signed_bodies_never_raise_or_answer_5xx(adapter) -> None:  # type: ignore[no-untyped-def]
    h = adapter(secret="card-secret")

    @FUZZ
    @given(body=_bodies)
    def check(body: bytes) -> None:
        h.clock.advance(0.001)  # each example is signed at its own millisecond (one-use)
        ts = str(int(h.clock.time() * 1000))
        robot = h.channel.handle_robot_request(
            IngressRequest(
                "POST",
                "/dingtalk/robot",
                Headers({"timestamp": ts, "sign": robot_signature(ts, "app-secret")}),
                body,
            )
        )
        card = h.channel.handle_card_request(
            IngressRequest(
                "POST",
                "/dingtalk/card",
                Headers(
                    {
                        "x-ddpaas-signature-timestamp": ts,
                        "x-ddpaas-signature": card_signature(ts, "card-secret"),
                    }
                ),
                body,
            )
        )
        assert robot.status in (200, 400)  # never 5xx; the run is in ``after`` (not run)
        assert card.status in (200, 400)

    check()


def test_mounting_unsigned_card_callbacks_warns(caplog) -> None:  # type: ignore[no-untyped-def]
    from dingtalk_helpers import AdapterHarness

    unsigned = AdapterHarness(secret=None)
    signed = AdapterHarness(secret="card-secret")
    try:
        with caplog.at_level("WARNING", logger="channelkit.platforms.dingtalk.adapter"):
            unsigned.channel.ingress_routes()
        assert any("not authenticated" in r.getMessage() for r in caplog.records)
        caplog.clear()
        with caplog.at_level("WARNING", logger="channelkit.platforms.dingtalk.adapter"):
            signed.channel.ingress_routes()
        assert not any("not authenticated" in r.getMessage() for r in caplog.records)
    finally:
        unsigned.close()
        signed.close()

"""RetryPolicy and Retry-After parsing, with an injected clock; nothing sleeps."""

from __future__ import annotations

from datetime import datetime, timezone
from email.utils import format_datetime

import pytest
from channelkit.errors import (
    BadRequest,
    ConfigurationError,
    RateLimited,
    ServerError,
    TransportError,
)
from channelkit.http.retry import RetryPolicy, is_idempotent, parse_retry_after

NOW = 1_800_000_000.0


def test_retry_after_seconds_and_http_date() -> None:
    assert parse_retry_after("7", NOW) == 7.0
    assert parse_retry_after(" 1.5 ", NOW) == 1.5
    date = format_datetime(datetime.fromtimestamp(NOW + 42, tz=timezone.utc), usegmt=True)
    assert parse_retry_after(date, NOW) == pytest.approx(42.0)
    past = format_datetime(datetime.fromtimestamp(NOW - 100, tz=timezone.utc), usegmt=True)
    assert parse_retry_after(past, NOW) == 0.0
    assert parse_retry_after("soon", NOW) is None
    assert parse_retry_after(None, NOW) is None
    assert parse_retry_after("-3", NOW) == 0.0


def test_idempotency_rules() -> None:
    assert is_idempotent("GET") and is_idempotent("put") and is_idempotent("DELETE")
    assert not is_idempotent("POST")
    assert is_idempotent("POST", marked=True)
    assert not is_idempotent("PATCH")


def _policy(**kw: object) -> RetryPolicy:
    return RetryPolicy(jitter=lambda: 1.0, **kw)  # type: ignore[arg-type]


def test_backoff_is_exponential_capped_and_jittered() -> None:
    policy = _policy(backoff_base=0.5, backoff_cap=3.0, max_attempts=10)
    assert [policy.backoff(n) for n in range(1, 6)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    low = RetryPolicy(backoff_base=0.5, backoff_cap=3.0, jitter=lambda: 0.0)
    assert low.backoff(3) == 1.0  # equal jitter: half the ceiling at least


def test_delay_per_error_kind() -> None:
    policy = _policy(max_attempts=3, retry_after_cap=30.0)
    err429 = RateLimited("slow", status=429, retry_after=12.0)
    assert policy.delay(1, err429, idempotent=True) == 12.0
    assert policy.delay(1, RateLimited("slow", status=429), idempotent=True) == 0.5
    assert policy.delay(1, ServerError("boom", status=503), idempotent=True) == 0.5
    assert policy.delay(2, TransportError("reset"), idempotent=True) == 1.0
    assert policy.delay(1, BadRequest("no", status=400), idempotent=True) is None
    # never for a non-idempotent call, never past max_attempts
    assert policy.delay(1, ServerError("boom", status=503), idempotent=False) is None
    assert policy.delay(3, ServerError("boom", status=503), idempotent=True) is None
    # a Retry-After beyond the cap is not slept: the error goes to the caller at once
    assert (
        policy.delay(1, RateLimited("slow", status=429, retry_after=3600.0), idempotent=True)
        is None
    )


def test_bad_policy_is_rejected() -> None:
    with pytest.raises(ConfigurationError) as caught:
        RetryPolicy(max_attempts=0)
    assert caught.value.path == "max_attempts"

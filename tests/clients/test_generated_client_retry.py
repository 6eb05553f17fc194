"""Retry and ``Retry-After`` through every generated client.

For every operation of every platform document: an idempotent operation (GET/PUT/DELETE,
or a POST/PATCH marked ``x-channelkit-idempotent``) waits out a 429's ``Retry-After`` and a
5xx backoff and then succeeds; any other POST (or PATCH) is sent exactly once. The sleep,
clock and jitter are injected, so nothing sleeps for real.
"""

from __future__ import annotations

from datetime import datetime, timezone
from email.utils import format_datetime
from typing import Any

import pytest
import requests_mock as rm
from channelkit.errors import RateLimited, ServerError
from channelkit.http.retry import RetryPolicy
from spec_driver import build_call, make_client, operations, snake, success_body

PLATFORMS = (
    "dingtalk",
    "discord",
    "feishu",
    "line",
    "mattermost",
    "msteams",
    "slack",
    "telegram",
    "weixin",
)
NOW = 1_800_000_000.0


class Sleeps(list):  # type: ignore[type-arg]
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def _idempotent(method: str, op: dict[str, Any]) -> bool:
    # RFC 9110 idempotent methods; POST and PATCH only with the spec's mark.
    return method.upper() in {"GET", "PUT", "DELETE"} or op.get("x-channelkit-idempotent") is True


def _cases() -> list[Any]:
    return [
        pytest.param(
            platform,
            op["operationId"],
            _idempotent(method, op),
            id=f"{platform}-{op['operationId']}",
        )
        for platform in PLATFORMS
        for _path, method, _item, op in operations(platform)
    ]


def _policy(sleeps: Sleeps) -> RetryPolicy:
    return RetryPolicy(
        max_attempts=4, backoff_base=1.0, sleep=sleeps, clock=lambda: NOW, jitter=lambda: 0.0
    )


def _ok(info: dict[str, Any]) -> dict[str, Any]:
    body = success_body(info["sampler"], info["op"], info["errors"])
    return {"status_code": 200} if body is None else {"status_code": 200, "json": body}


@pytest.mark.parametrize(("platform", "operation_id", "idempotent"), _cases())
def test_retry_after_then_backoff_only_for_idempotent_operations(
    platform: str, operation_id: str, idempotent: bool
) -> None:
    info, kwargs, _, _, _ = build_call(platform, operation_id)
    sleeps = Sleeps()
    client = make_client(platform, retry=_policy(sleeps))
    responses = [
        {"status_code": 429, "headers": {"Retry-After": "3"}, "json": {"zz": "slow down"}},
        {"status_code": 503, "json": {"zz": "busy"}},
        _ok(info),
    ]
    with rm.Mocker() as mocker:
        mocker.register_uri(rm.ANY, rm.ANY, responses)
        call = getattr(client, snake(operation_id))
        if idempotent:
            call(**kwargs)
            assert mocker.call_count == 3
            # Retry-After honoured exactly, then backoff after attempt 2: min(8, 1 * 2**1) / 2
            # (equal jitter with the jitter source pinned to 0).
            assert sleeps == [3.0, 1.0]
        else:
            with pytest.raises(RateLimited) as caught:
                call(**kwargs)
            assert caught.value.retry_after == 3.0
            assert mocker.call_count == 1
            assert sleeps == []


@pytest.mark.parametrize(
    ("platform", "operation_id", "idempotent"),
    [case for case in _cases() if not case.values[2]],
)
def test_server_error_on_a_non_idempotent_post_is_never_retried(
    platform: str, operation_id: str, idempotent: bool
) -> None:
    _, kwargs, _, _, _ = build_call(platform, operation_id)
    sleeps = Sleeps()
    client = make_client(platform, retry=_policy(sleeps))
    with rm.Mocker() as mocker:
        mocker.register_uri(rm.ANY, rm.ANY, status_code=503, json={"zz": "busy"})
        with pytest.raises(ServerError):
            getattr(client, snake(operation_id))(**kwargs)
        assert mocker.call_count == 1
    assert sleeps == []


@pytest.mark.parametrize("platform", PLATFORMS)
def test_retry_after_http_date_uses_the_injected_clock(platform: str) -> None:
    candidates = [o for o in operations(platform) if _idempotent(o[1], o[3])]
    if not candidates:
        pytest.skip(f"{platform}: no idempotent operation (its POSTs are never retried)")
    op = candidates[0][3]
    info, kwargs, _, _, _ = build_call(platform, op["operationId"])
    sleeps = Sleeps()
    client = make_client(platform, retry=_policy(sleeps))
    when = format_datetime(datetime.fromtimestamp(NOW + 5, tz=timezone.utc), usegmt=True)
    with rm.Mocker() as mocker:
        mocker.register_uri(
            rm.ANY,
            rm.ANY,
            [{"status_code": 429, "headers": {"Retry-After": when}, "json": {}}, _ok(info)],
        )
        getattr(client, snake(op["operationId"]))(**kwargs)
        assert mocker.call_count == 2
    assert sleeps == [5.0]

"""HTTP status and business-code mapping into channelkit.errors."""

from __future__ import annotations

import pytest
from channelkit.errors import ApiError, AuthError, BadRequest, NotFound, RateLimited, ServerError
from channelkit.http.errormap import ErrorSpec, map_error
from requests.structures import CaseInsensitiveDict

NOW = 1_800_000_000.0
FEISHU = ErrorSpec.from_spec(
    {
        "codeField": "code",
        "messageField": "msg",
        "successValues": [0],
        "requestIdHeader": "x-tt-logid",
        "requestIdField": "error.log_id",
        "authCodes": [99991663],
        "rateLimitCodes": [99991400],
        "retryableCodes": [1500],
    }
)


def _map(status: int, body: object, spec: ErrorSpec = FEISHU, **headers: str) -> ApiError | None:
    return map_error(status, CaseInsensitiveDict(headers), body, spec, clock=lambda: NOW)


@pytest.mark.parametrize(
    ("status", "cls", "retryable"),
    [
        (400, BadRequest, False),
        (422, BadRequest, False),
        (401, AuthError, False),
        (403, AuthError, False),
        (404, NotFound, False),
        (409, ApiError, False),
        (429, RateLimited, True),
        (500, ServerError, True),
        (504, ServerError, True),
    ],
)
def test_status_mapping(status: int, cls: type, retryable: bool) -> None:
    error = _map(status, None, ErrorSpec())
    assert type(error) is cls
    assert error is not None and error.status == status and error.retryable is retryable


def test_success() -> None:
    assert _map(200, {"code": 0, "msg": "ok"}) is None
    assert _map(200, {"data": {}}) is None  # no code field = success
    assert _map(204, None) is None


def test_business_codes_on_http_200() -> None:
    error = _map(200, {"code": 230002, "msg": "bot not in chat", "error": {"log_id": "L"}})
    assert type(error) is BadRequest and error.code == 230002 and error.request_id == "L"
    assert error.message == "bot not in chat" and not error.retryable
    assert type(_map(200, {"code": 99991663, "msg": "x"})) is AuthError
    assert type(_map(400, {"code": 99991663, "msg": "x"})) is AuthError
    assert type(_map(200, {"code": 99991400, "msg": "x"})) is RateLimited
    assert type(_map(200, {"code": 1500, "msg": "x"})) is ServerError
    # a business error with a 5xx status stays a ServerError
    assert type(_map(502, {"code": 1234, "msg": "x"})) is ServerError


def test_request_id_header_wins_and_message_falls_back() -> None:
    error = _map(400, {"code": 1}, **{"X-Tt-Logid": "HDR"})
    assert error is not None and error.request_id == "HDR" and error.message == "HTTP 400"


def test_ok_field_and_retry_after_field() -> None:
    tg = ErrorSpec.from_spec(
        {
            "okField": "ok",
            "codeField": "error_code",
            "messageField": "description",
            "retryAfterField": "parameters.retry_after",
        }
    )
    error = _map(
        429,
        {"ok": False, "error_code": 429, "description": "flood", "parameters": {"retry_after": 5}},
        tg,
    )
    assert isinstance(error, RateLimited) and error.retry_after == 5.0
    assert type(_map(200, {"ok": False, "error_code": 400, "description": "bad"}, tg)) is BadRequest
    assert _map(200, {"ok": True, "result": True}, tg) is None


def test_retry_after_header_both_forms() -> None:
    spec = ErrorSpec()
    error = _map(429, None, spec, **{"Retry-After": "9"})
    assert isinstance(error, RateLimited) and error.retry_after == 9.0
    error = _map(503, None, spec, **{"Retry-After": "Wed, 15 Jan 2027 08:00:30 GMT"})
    assert isinstance(error, ServerError)
    error = _map(429, None, spec, **{"Retry-After": "Fri, 15 Jan 2027 08:00:30 GMT"})
    assert isinstance(error, RateLimited) and error.retry_after is not None

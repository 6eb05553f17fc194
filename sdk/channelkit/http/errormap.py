"""Map an HTTP response to the channelkit error hierarchy.

The rules come from the spec's ``x-channelkit-errors`` object (see
``openapi/CONVENTIONS.md``), held in an `ErrorSpec`:

- HTTP status, always: 400/422 `BadRequest`, 401/403 `AuthError`,
  404 `NotFound`, 429 `RateLimited` (``Retry-After`` in seconds or HTTP-date,
  or the body's ``retryAfterField``), 5xx `ServerError`, other 4xx `ApiError`.
- A business code (``codeField``) listed in ``authCodes``/``rateLimitCodes`` maps to
  AuthError/RateLimited whatever the status; ``retryableCodes`` to ServerError.
- On a 2xx, a body whose ``okField`` is not ``true`` or whose code is not in
  ``successValues`` is an error too: BadRequest unless the code is listed above.

The error's text and its ``body`` never carry a registered secret (a token or secret a
platform echoed back): both are scrubbed with `redact_value()`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from channelkit.errors import (
    ApiError,
    AuthError,
    BadRequest,
    NotFound,
    RateLimited,
    ServerError,
)
from channelkit.http.redact import REDACTOR, redact_value
from channelkit.http.retry import parse_retry_after

__all__ = ["ErrorSpec", "dig", "map_error"]


def dig(body: Any, dotted: str | None) -> Any:
    """The value at a dotted path (``"parameters.retry_after"``) in a JSON body, or None."""
    if not dotted:
        return None
    value = body
    for part in dotted.split("."):
        if isinstance(value, Mapping) and part in value:
            value = value[part]
        else:
            return None
    return value


def _same_code(code: Any, listed: Sequence[Any]) -> bool:
    return any(code == c or str(code) == str(c) for c in listed)


@dataclass(frozen=True)
class ErrorSpec:
    """How one platform signals errors (the spec's ``x-channelkit-errors``)."""

    code_field: str | None = None
    message_field: str | None = None
    success_values: tuple[Any, ...] = ()
    ok_field: str | None = None
    request_id_header: str | None = None
    request_id_field: str | None = None
    auth_codes: tuple[Any, ...] = ()
    rate_limit_codes: tuple[Any, ...] = ()
    retryable_codes: tuple[Any, ...] = ()
    retry_after_field: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_spec(cls, raw: Mapping[str, Any]) -> ErrorSpec:
        """Build from the spec's camelCase ``x-channelkit-errors`` object."""
        known = {
            "codeField": "code_field",
            "messageField": "message_field",
            "okField": "ok_field",
            "requestIdHeader": "request_id_header",
            "requestIdField": "request_id_field",
            "retryAfterField": "retry_after_field",
        }
        lists = {
            "successValues": "success_values",
            "authCodes": "auth_codes",
            "rateLimitCodes": "rate_limit_codes",
            "retryableCodes": "retryable_codes",
        }
        kwargs: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for key, value in raw.items():
            if key in known:
                kwargs[known[key]] = value
            elif key in lists:
                kwargs[lists[key]] = tuple(value)
            else:
                extra[key] = value
        return cls(**kwargs, extra=extra)

    def business_failure(self, body: Any) -> bool:
        """True when a (2xx) body reports failure through ``okField`` or ``codeField``."""
        if not isinstance(body, Mapping):
            return False
        if self.ok_field and self.ok_field in body and body.get(self.ok_field) is not True:
            return True
        if self.code_field:
            code = dig(body, self.code_field)
            if code is None:
                return False
            if self.success_values:
                return not _same_code(code, self.success_values)
        return False


def map_error(
    status: int,
    headers: Mapping[str, str],
    body: Any,
    spec: ErrorSpec,
    *,
    clock: Callable[[], float],
) -> ApiError | None:
    """The error a response stands for, or ``None`` when it is a success.

    ``headers`` must be case-insensitive (``requests`` headers are). ``clock`` is the wall
    clock used to turn an HTTP-date ``Retry-After`` into seconds.
    """
    ok_status = 200 <= status < 300
    if ok_status and not spec.business_failure(body):
        return None
    code = dig(body, spec.code_field) if spec.code_field else None
    message_value = dig(body, spec.message_field) if spec.message_field else None
    message = str(message_value) if message_value not in (None, "") else _default_message(status)
    request_id = headers.get(spec.request_id_header) if spec.request_id_header else None
    if not request_id and spec.request_id_field:
        found = dig(body, spec.request_id_field)
        request_id = str(found) if found is not None else None
    if isinstance(code, str):
        code = REDACTOR.scrub(code)
    kwargs: dict[str, Any] = {
        "status": status,
        "code": code,
        "request_id": REDACTOR.scrub(request_id) if request_id else None,
        "body": redact_value(body),
    }
    message = REDACTOR.scrub(message)
    retry_after = parse_retry_after(headers.get("Retry-After"), clock())
    if retry_after is None and spec.retry_after_field:
        found = dig(body, spec.retry_after_field)
        if isinstance(found, int | float) and not isinstance(found, bool):
            retry_after = max(0.0, float(found))

    if code is not None:
        if _same_code(code, spec.auth_codes):
            return AuthError(message, **kwargs)
        if _same_code(code, spec.rate_limit_codes):
            return RateLimited(message, retry_after=retry_after, **kwargs)
        if _same_code(code, spec.retryable_codes):
            return ServerError(message, **kwargs)
    if status == 429:
        return RateLimited(message, retry_after=retry_after, **kwargs)
    if status >= 500:
        return ServerError(message, **kwargs)
    if status in (401, 403):
        return AuthError(message, **kwargs)
    if status == 404:
        return NotFound(message, **kwargs)
    if status in (400, 422) or ok_status:
        return BadRequest(message, **kwargs)
    return ApiError(message, **kwargs)


def _default_message(status: int) -> str:
    if 200 <= status < 300:
        return "platform reported a business error"
    return f"HTTP {status}"

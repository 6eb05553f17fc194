"""The channelkit error hierarchy.

Every exception the SDK raises on purpose derives from :class:`ChannelKitError`.
Platform HTTP failures are :class:`ApiError` subclasses carrying the HTTP status, the
platform's own error code, the request id the platform returned and whether a retry
may succeed. Platforms that answer HTTP 200 with a non-zero business code (DingTalk's
``errcode``, Feishu's ``code``, Telegram's ``ok: false``) map into the same classes.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "ApiError",
    "AuthError",
    "BadRequest",
    "ChannelKitError",
    "ConfigurationError",
    "DeserializationError",
    "NotFound",
    "RateLimited",
    "ServerError",
    "TransportError",
]


class ChannelKitError(Exception):
    """Root of every error channelkit raises."""


class ConfigurationError(ChannelKitError, ValueError):
    """Invalid configuration or arguments; ``path`` names the offending field."""

    def __init__(self, message: str, path: str | None = None) -> None:
        self.path = path
        super().__init__(f"{path}: {message}" if path else message)


class TransportError(ChannelKitError):
    """The request never produced an HTTP response (connect/read timeout, reset, DNS)."""

    def __init__(self, message: str, *, timeout: bool = False) -> None:
        self.timeout = timeout
        super().__init__(message)


class ApiError(ChannelKitError):
    """A platform answered with an error, by HTTP status or by business code."""

    def __init__(
        self,
        message: str,
        *,
        status: int,
        code: str | int | None = None,
        request_id: str | None = None,
        retryable: bool = False,
        body: Any = None,
    ) -> None:
        self.status = status
        self.code = code
        self.message = message
        self.request_id = request_id
        self.retryable = retryable
        self.body = body
        detail = f"HTTP {status}"
        if code is not None:
            detail += f", code {code}"
        if request_id:
            detail += f", request id {request_id}"
        super().__init__(f"{message} ({detail})")


class AuthError(ApiError):
    """Credentials or access token rejected (HTTP 401/403 or an auth business code)."""


class RateLimited(ApiError):
    """The platform throttled the call; ``retry_after`` is in seconds when known."""

    def __init__(self, message: str, *, retry_after: float | None = None, **kwargs: Any) -> None:
        kwargs.setdefault("retryable", True)
        self.retry_after = retry_after
        super().__init__(message, **kwargs)


class NotFound(ApiError):
    """The addressed object (message, card, chat) does not exist."""


class BadRequest(ApiError):
    """The platform rejected the request as malformed."""


class ServerError(ApiError):
    """The platform failed (HTTP 5xx or a transient business code)."""

    def __init__(self, message: str, **kwargs: Any) -> None:
        kwargs.setdefault("retryable", True)
        super().__init__(message, **kwargs)


class DeserializationError(ChannelKitError, ValueError):
    """A platform response did not match its schema; ``path`` names the field."""

    def __init__(self, path: str, value: Any, message: str | None = None) -> None:
        self.path = path
        self.value = value
        shown = repr(value)
        if len(shown) > 80:
            shown = shown[:77] + "..."
        super().__init__(f"{path}: {message or 'unexpected value'} (got {shown})")

"""The hand-written HTTP runtime under the generated platform clients.

- `channelkit.http.transport`: the shared ``requests.Session`` and explicit timeouts;
- `channelkit.http.retry`: the retry policy (Retry-After, backoff, idempotency);
- `channelkit.http.errormap`: HTTP status and business codes -> `channelkit.errors`;
- `channelkit.http.auth`: token providers (DingTalk, Feishu, static);
- `channelkit.http.model`: ``UNSET``, open enums and the generated models' base;
- `channelkit.http.client`: ``BaseClient``, what every generated client runs on;
- `channelkit.http.redact`: keeping secrets and tokens out of logs.
"""

from __future__ import annotations

from channelkit.http.auth import (
    DingTalkTokenProvider,
    FeishuTokenProvider,
    RefreshingTokenProvider,
    StaticTokenProvider,
    TokenProvider,
)
from channelkit.http.client import BaseClient
from channelkit.http.errormap import ErrorSpec, map_error
from channelkit.http.model import UNSET, Model, OpenEnum, UnsetType
from channelkit.http.redact import REDACTOR, RedactingFilter
from channelkit.http.retry import RetryPolicy, parse_retry_after
from channelkit.http.transport import DEFAULT_TIMEOUT, Timeout, Transport, make_session

__all__ = [
    "DEFAULT_TIMEOUT",
    "REDACTOR",
    "UNSET",
    "BaseClient",
    "DingTalkTokenProvider",
    "ErrorSpec",
    "FeishuTokenProvider",
    "Model",
    "OpenEnum",
    "RedactingFilter",
    "RefreshingTokenProvider",
    "RetryPolicy",
    "StaticTokenProvider",
    "Timeout",
    "TokenProvider",
    "Transport",
    "UnsetType",
    "make_session",
    "map_error",
    "parse_retry_after",
]

"""Keep secrets and tokens out of logs.

- :func:`redact_headers` masks credential headers (``Authorization``,
  ``x-acs-dingtalk-access-token``, ...) plus any names given.
- :func:`redact_fields` masks JSON fields by name (``appSecret``, ``app_secret``, ...).
- :func:`redact_url` masks a Telegram-style ``/bot<token>/`` path segment and credential
  query parameters.
- :class:`RedactingFilter` is a ``logging.Filter`` that replaces registered secret values in
  every record that passes through it; clients register their tokens with it.
"""

from __future__ import annotations

import logging
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "MASK",
    "REDACTOR",
    "SECRET_FIELDS",
    "SECRET_HEADERS",
    "RedactingFilter",
    "redact_fields",
    "redact_headers",
    "redact_text",
    "redact_url",
]

MASK = "***"

SECRET_HEADERS = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "x-acs-dingtalk-access-token",
        "x-telegram-bot-api-secret-token",
        "cookie",
        "set-cookie",
    }
)

SECRET_FIELDS = frozenset(
    {
        "access_token",
        "accesstoken",
        "app_secret",
        "appsecret",
        "appkey",
        "bot_token",
        "client_secret",
        "password",
        "secret",
        "secret_token",
        "tenant_access_token",
        "token",
    }
)

_BOT_PATH = re.compile(r"/bot[^/?#]+")
_SECRET_QUERY = re.compile(r"(?i)([?&](?:access_token|token|secret|appsecret|corpsecret)=)[^&#]*")


def redact_headers(headers: Mapping[str, str], extra: Iterable[str] = ()) -> dict[str, str]:
    """A copy of ``headers`` with credential headers (and ``extra`` names) masked."""
    names = SECRET_HEADERS | {n.lower() for n in extra}
    return {k: (MASK if k.lower() in names else v) for k, v in headers.items()}


def redact_fields(value: Any, extra: Iterable[str] = ()) -> Any:
    """A deep copy of a JSON value with secret-looking fields (and ``extra`` names) masked."""
    names = SECRET_FIELDS | {n.lower() for n in extra}
    return _redact(value, names)


def _redact(value: Any, names: frozenset[str] | set[str]) -> Any:
    if isinstance(value, Mapping):
        return {
            k: (MASK if str(k).lower() in names else _redact(v, names)) for k, v in value.items()
        }
    if isinstance(value, list):
        return [_redact(v, names) for v in value]
    return value


def redact_url(url: str) -> str:
    """``url`` with a ``/bot<token>`` segment and credential query parameters masked."""
    return _SECRET_QUERY.sub(rf"\1{MASK}", _BOT_PATH.sub(f"/bot{MASK}", url))


def redact_text(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every occurrence of each (non-trivial) secret value replaced by ``***``."""
    for secret in sorted({s for s in secrets if s and len(s) >= 4}, key=len, reverse=True):
        text = text.replace(secret, MASK)
    return text


class RedactingFilter(logging.Filter):
    """A logging filter that scrubs registered secret values from log records.

    Attach it to a handler (``handler.addFilter(RedactingFilter())``) or logger; call
    :meth:`add` with each token or secret as it becomes known. Thread-safe; remembers the
    ``maxsize`` most recently added values.
    """

    def __init__(self, secrets: Iterable[str] = (), *, maxsize: int = 256) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._maxsize = maxsize
        self._secrets: OrderedDict[str, None] = OrderedDict()
        for secret in secrets:
            self.add(secret)

    def add(self, secret: str) -> None:
        """Register one more value to scrub (tokens are added as they are fetched)."""
        if not secret:
            return
        with self._lock:
            self._secrets[secret] = None
            self._secrets.move_to_end(secret)
            while len(self._secrets) > self._maxsize:
                self._secrets.popitem(last=False)

    def filter(self, record: logging.LogRecord) -> bool:
        with self._lock:
            secrets = tuple(self._secrets)
        if not secrets:
            return True
        message = record.getMessage()
        cleaned = redact_text(message, secrets)
        if cleaned != message:
            record.msg = cleaned
            record.args = None
        return True


REDACTOR = RedactingFilter()
"""The process-wide filter: channelkit registers every credential and token it handles here.

``logging.getLogger().handlers[0].addFilter(channelkit.http.redact.REDACTOR)`` scrubs them
from everything that handler writes, including third-party debug logs (urllib3).
"""

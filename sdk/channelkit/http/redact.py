"""Keep secrets and tokens out of logs.

- `redact_headers()` masks credential headers (``Authorization``,
  ``x-acs-dingtalk-access-token``, ...) plus any names given.
- `redact_fields()` masks JSON fields by name (``appSecret``, ``app_secret``, ...).
- `redact_url()` masks a Telegram-style ``/bot<token>/`` path segment and credential
  query parameters.
- `RedactingFilter` is a ``logging.Filter`` that replaces registered secret values in
  every record that passes through it; clients register their tokens with it.
- `redact_value()` scrubs a JSON value (a platform's error body) of registered
  secrets and secret-named fields, for the text and attributes of an exception.
"""

from __future__ import annotations

import logging
import re
import threading
import traceback
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
    "redact_value",
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
_SECRET_QUERY = re.compile(
    r"(?i)([?&](?:access_token|token|secret|appsecret|corpsecret|session)=)[^&#\s'\"]*"
)


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


def redact_value(value: Any) -> Any:
    """A deep copy of a JSON value without registered secrets: every string scrubbed by
    `REDACTOR` (a platform echoing a token or secret back in an error body) and
    secret-named fields masked (see `redact_fields()`)."""
    return _scrub(redact_fields(value))


def _scrub(value: Any) -> Any:
    if isinstance(value, str):
        return REDACTOR.scrub(value)
    if isinstance(value, Mapping):
        return {_scrub(k) if isinstance(k, str) else k: _scrub(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_scrub(v) for v in value]
    return value


class RedactingFilter(logging.Filter):
    """A logging filter that scrubs registered secret values from log records.

    Attach it to a handler (``handler.addFilter(RedactingFilter())``) or logger; call
    `add()` with each token or secret as it becomes known. Thread-safe; remembers the
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

    def scrub(self, text: str) -> str:
        """``text`` without registered secrets, ``/bot<token>`` paths or credential queries."""
        with self._lock:
            secrets = tuple(self._secrets)
        return redact_url(redact_text(text, secrets))

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed record: leave it to the handler's own error path
            return True
        cleaned = self.scrub(message)
        if cleaned != message:
            record.msg = cleaned
            record.args = None
        if record.exc_info and record.exc_info[1] is not None:
            # the traceback and the exception text are rendered now, scrubbed, and cached
            text = "".join(traceback.format_exception(*record.exc_info)).rstrip("\n")
            record.exc_text = self.scrub(text)  # formatters use the cached text
        if record.stack_info:
            record.stack_info = self.scrub(record.stack_info)
        return True


REDACTOR = RedactingFilter()
"""The process-wide filter: channelkit registers every credential and token it handles here.

``logging.getLogger().handlers[0].addFilter(channelkit.http.redact.REDACTOR)`` scrubs them
from everything that handler writes, including third-party debug logs (urllib3).
"""


#: Loggers whose records are redacted by default: channelkit's own and its HTTP stack's.
REDACTED_LOGGERS = ("channelkit", "urllib3", "requests")


def _install_default_redaction() -> None:
    """Redact every record of `REDACTED_LOGGERS` (and their children) at creation.

    A logger filter would only see records of that exact logger, so the record factory
    is wrapped once instead; records of other loggers are untouched.
    """
    previous = logging.getLogRecordFactory()
    if getattr(previous, "channelkit_redacting", False):
        return

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        name = record.name
        if any(name == n or name.startswith(n + ".") for n in REDACTED_LOGGERS):
            REDACTOR.filter(record)
        return record

    factory.channelkit_redacting = True  # type: ignore[attr-defined]  # marks ours
    logging.setLogRecordFactory(factory)


_install_default_redaction()

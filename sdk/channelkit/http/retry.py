"""The SDK-level retry policy (above the transport, so requests-mock tests exercise it).

Retried, up to ``max_attempts`` attempts in total:

- `TransportError` (connect/read timeout, connection reset);
- `RateLimited` (HTTP 429 or a rate-limit business code), waiting
  ``Retry-After`` (delta-seconds or HTTP-date) when given. A wait longer than
  ``retry_after_cap`` is *not* slept: the error is raised at once with its ``retry_after``
  so the caller can reschedule instead of blocking a worker;
- `ServerError` (HTTP 5xx), with capped exponential backoff and
  "equal jitter": ``d/2 + random() * d/2`` where ``d = min(cap, base * 2**(attempt-1))``.

Only idempotent operations are retried: GET/PUT/DELETE/HEAD/OPTIONS, and a POST only when
the spec marks it ``x-channelkit-idempotent``. ``sleep`` and ``clock`` are injected so that
tests never sleep.

`failed_before_sending()` tells a transport failure that happened before the request
left (connect timeout, connection refused or reset while connecting, name resolution)
from one after it was sent (read timeout, reset while waiting for the answer), for
callers that retry non-idempotent sends themselves
(`channelkit.platforms.common.delivery`).
"""

from __future__ import annotations

import email.utils
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from channelkit.errors import ChannelKitError, ConfigurationError, RateLimited, TransportError

__all__ = [
    "IDEMPOTENT_METHODS",
    "RetryPolicy",
    "failed_before_sending",
    "is_idempotent",
    "jitter",
    "parse_retry_after",
]

IDEMPOTENT_METHODS = frozenset({"GET", "PUT", "DELETE", "HEAD", "OPTIONS"})
_JITTER = random.Random()


def jitter() -> float:
    """A fraction in [0, 1) for spreading retries and reconnects, from the SDK's own
    generator: the application's `random` state is neither used nor moved (the default
    jitter of `RetryPolicy`, the long connections' `Backoff` and the Discord Gateway)."""
    return _JITTER.random()


def is_idempotent(method: str, marked: bool = False) -> bool:
    """True when a request may be sent twice: an idempotent method, or a marked POST."""
    return method.upper() in IDEMPOTENT_METHODS or marked


#: Exception class names (requests, urllib3, builtins) that mean no connection was made,
#: so the request never left. Names, not classes: this module must not import requests.
_NOT_CONNECTED = frozenset(
    {
        "ConnectTimeout",  # requests; channelkit's own ConnectTimeout is caught first
        "ConnectTimeoutError",  # urllib3 (NewConnectionError derives from it)
        "NewConnectionError",  # urllib3: refused, reset or unreachable while connecting
        "NameResolutionError",  # urllib3: DNS
        "ConnectionRefusedError",  # builtin
    }
)


def failed_before_sending(error: BaseException) -> bool:
    """True when ``error`` (a `TransportError`) happened before
    the request was sent: a connect timeout, or a connection refused, reset or unreachable
    while connecting. A read timeout or a reset while the answer was awaited is False
    (the platform may have acted on the request).

    The transport raises its errors ``from None``; the ``requests``/``urllib3`` exception
    stays reachable as ``__context__`` (and their ``args`` / ``reason``), which is walked
    (bounded) here.
    """
    from channelkit.errors import ConnectTimeout as _ConnectTimeout

    if isinstance(error, _ConnectTimeout):
        return True
    seen: set[int] = set()
    todo: list[BaseException] = [error]
    while todo and len(seen) < 16:
        exc = todo.pop()
        if id(exc) in seen:
            continue
        seen.add(id(exc))
        if exc is not error and any(c.__name__ in _NOT_CONNECTED for c in type(exc).__mro__):
            return True
        linked = [exc.__cause__, exc.__context__, getattr(exc, "reason", None), *exc.args]
        todo.extend(e for e in linked if isinstance(e, BaseException))
    return False


def parse_retry_after(value: str | None, now: float) -> float | None:
    """Seconds to wait from a ``Retry-After`` value (delta-seconds or HTTP-date).

    ``now`` is the current wall-clock time (epoch seconds) used for the HTTP-date form.
    Returns ``None`` when the value is absent or unparseable; never negative.
    """
    if value is None:
        return None
    text = value.strip()
    if not text:
        return None
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            return None
        seconds = when.timestamp() - now
    if seconds != seconds:  # NaN
        return None
    return max(0.0, seconds)


@dataclass
class RetryPolicy:
    """When and how long to wait before retrying a failed call.

    ``clock`` is wall-clock time in epoch seconds (for HTTP-date ``Retry-After``);
    ``jitter`` returns a float in ``[0, 1)``.
    """

    max_attempts: int = 3
    backoff_base: float = 0.5
    backoff_cap: float = 8.0
    retry_after_cap: float = 30.0
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False)
    clock: Callable[[], float] = field(default=time.time, repr=False)
    jitter: Callable[[], float] = field(default=jitter, repr=False)

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ConfigurationError("must be at least 1", "max_attempts")
        if self.backoff_base < 0 or self.backoff_cap < 0 or self.retry_after_cap < 0:
            raise ConfigurationError("must not be negative", "backoff")

    @classmethod
    def never(cls) -> RetryPolicy:
        """A policy that makes exactly one attempt."""
        return cls(max_attempts=1)

    def backoff(self, attempt: int) -> float:
        """Jittered exponential delay after failed attempt number ``attempt`` (1-based)."""
        ceiling = min(self.backoff_cap, self.backoff_base * (2.0 ** max(0, attempt - 1)))
        return ceiling / 2 + self.jitter() * ceiling / 2

    def delay(self, attempt: int, error: ChannelKitError, *, idempotent: bool) -> float | None:
        """Seconds to wait before the next attempt, or ``None`` to give up and raise ``error``.

        ``attempt`` is the number of the attempt that just failed (1-based).
        """
        if attempt >= self.max_attempts or not idempotent:
            return None
        if isinstance(error, RateLimited):
            if error.retry_after is not None:
                if error.retry_after > self.retry_after_cap:
                    return None
                return error.retry_after
            return self.backoff(attempt)
        if isinstance(error, TransportError):
            return self.backoff(attempt)
        if getattr(error, "retryable", False):
            return self.backoff(attempt)
        return None

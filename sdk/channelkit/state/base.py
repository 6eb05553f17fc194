"""The state store protocol and the helpers every store shares.

A `StateStore` holds the state that several processes serving one bot must
agree on: one-shot claims (a callback handled once, whichever process received it),
first-delivery markers, tombstones, small records and FIFO queues between processes.
Values are JSON-able dicts; keys are strings. The store prefixes every key with its
``namespace`` (e.g. the bot's name), so two bots can share one Redis.

Two implementations: `MemoryStore` (one process, the
default) and `RedisStore` (many processes).
"""

from __future__ import annotations

import json
import math
import os
import re
import secrets
import socket
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar, runtime_checkable
from urllib.parse import urlsplit, urlunsplit

from channelkit.errors import ConfigurationError

__all__ = [
    "CLAIM_MISMATCH",
    "DEFAULT_NAMESPACE",
    "GUARD_ABSENT",
    "GUARD_EXISTS",
    "GUARD_STALE",
    "GUARD_WRITTEN",
    "STORE_OPERATIONS",
    "StateStore",
    "check_bucket",
    "check_key",
    "check_namespace",
    "check_token",
    "check_ttl",
    "decode",
    "encode",
    "guard_text",
    "new_instance_id",
    "redact_url",
    "set_operation_listener",
    "timed_store",
]

#: The namespace of a store built without one (a single bot).
DEFAULT_NAMESPACE = "channelkit"

#: `StateStore.write_if()` outcomes: the write was made; ``only_if_absent`` and the key
#: was there (nothing written); the guard holds another value (nothing written); the
#: guard key is absent (nothing written).
GUARD_WRITTEN = "written"
GUARD_EXISTS = "exists"
GUARD_STALE = "stale"
GUARD_ABSENT = "absent"
#: `StateStore.claim_matching()`: the record is absent or a field differs.
CLAIM_MISMATCH = "mismatch"

# No ':' (the separator of the stored key layout), no whitespace, no glob characters.
_NAMESPACE = re.compile(r"^[A-Za-z0-9_.\-]{1,128}$")


@runtime_checkable
class StateStore(Protocol):
    """Shared state of one bot. Every method is thread-safe.

    ``namespace`` prefixes every key and queue; ``instance_id`` names this process
    (``hostname-pid-random``), set when the store is built. A store that cannot reach
    its backend raises `StateStoreUnavailable`.
    """

    namespace: str
    instance_id: str

    def put(self, key: str, value: Mapping[str, Any], *, ttl_s: float | None = None) -> None:
        """Store ``value`` under ``key`` (replacing any value); ``ttl_s`` None: no expiry."""
        ...

    def get(self, key: str) -> dict[str, Any] | None:
        """The value under ``key``, or None when absent or expired."""
        ...

    def delete(self, key: str) -> bool:
        """Remove ``key``; True when a value was there."""
        ...

    def add(self, key: str, value: Mapping[str, Any], *, ttl_s: float | None = None) -> bool:
        """Atomically store ``value`` only if ``key`` is absent; True when this call won.

        One-shot claims, first delivery, tombstones (Redis ``SET NX PX``).
        """
        ...

    def replace(
        self,
        key: str,
        expected: Mapping[str, Any],
        value: Mapping[str, Any] | None,
        *,
        ttl_s: float | None = None,
    ) -> bool:
        """Atomic compare-and-set on the whole stored value.

        When the stored value equals ``expected`` (as JSON), store ``value`` (with
        ``ttl_s``; None: no expiry) or delete the key when ``value`` is None, and return
        True; otherwise change nothing and return False.
        """
        ...

    def hold_lease(
        self, key: str, value: Mapping[str, Any], *, token: int, ttl_s: float, counter: str
    ) -> int:
        """Take or keep the lease ``key``, atomically; the fencing token held, or 0.

        When the value under ``key`` carries ``"token": token`` (``token`` > 0) it is
        renewed: ``value`` plus that token, for ``ttl_s``. When ``key`` is absent (never
        taken, expired, or the store was wiped) it is taken with a new token: the next
        value of the counter ``counter`` (``INCR``), raised above ``token`` if the
        counter is behind it (a wiped store), so an instance's tokens only increase.
        Otherwise (another token, or a fence mark a survivor wrote with `add()`) nothing
        changes and the answer is 0: the lease is lost for good.
        """
        ...

    def write_if(
        self,
        guard: str,
        field: str,
        expected: str | int,
        key: str,
        value: Mapping[str, Any] | None,
        *,
        ttl_s: float | None = None,
        only_if_absent: bool = False,
    ) -> str:
        """Write ``key`` only while the value under ``guard`` has ``field`` equal to
        ``expected`` (compared as text), atomically with that check.

        ``value`` None deletes ``key``; ``only_if_absent`` writes only a new key (a
        one-shot claim). Returns `GUARD_WRITTEN`, `GUARD_EXISTS` (``only_if_absent``
        and the key is there), `GUARD_STALE` (the guard holds another value) or
        `GUARD_ABSENT` (no guard key). Fencing tokens (``guard`` a lease, ``field``
        ``token``) and the store epoch use it.
        """
        ...

    def claim_matching(
        self,
        record: str,
        match: Mapping[str, str],
        claim: str,
        value: Mapping[str, Any],
        *,
        guard: str,
        field: str,
        expected: str | int,
        ttl_s: float | None = None,
    ) -> tuple[dict[str, Any] | None, str]:
        """Read ``record`` and, when each ``match`` field of it equals the given text,
        add the one-shot claim ``claim`` guarded like `write_if()`, in one atomic step.

        Returns the record (None when absent) and the outcome: `GUARD_WRITTEN`,
        `GUARD_EXISTS`, `GUARD_STALE`, `GUARD_ABSENT`, or `CLAIM_MISMATCH` (no record,
        or a field differs: nothing claimed). A callback's correlation and claim in one
        round trip.
        """
        ...

    def push(self, queue: str, message: Mapping[str, Any]) -> None:
        """Append ``message`` to the FIFO ``queue``."""
        ...

    def pop(self, queue: str, timeout_s: float) -> dict[str, Any] | None:
        """Take the oldest message of ``queue``, waiting up to ``timeout_s``; None on timeout."""
        ...

    def scan(self, prefix: str, limit: int = 1000) -> list[str]:
        """Up to ``limit`` keys (namespace stripped) starting with ``prefix``."""
        ...

    def take_token(
        self, key: str, *, rate: float, burst: float, keep: float = 0.0, force: bool = False
    ) -> float:
        """Take one token from the token bucket ``key``, atomically: 0.0 when taken, else
        the seconds until one can be (nothing taken; with ``force`` it is taken anyway,
        the bucket owing it - at most ``burst`` tokens - so later callers wait longer).

        The bucket holds at most ``burst`` tokens and gains ``rate`` a second (it starts
        full); a token is taken only while at least ``1 + keep`` are there, so callers
        passing ``keep`` leave that many for callers that pass none. Outbound rate limits
        shared by every process (`channelkit.platforms.common.rate_limit`).
        """
        ...

    def ping(self) -> None:
        """Raise `StateStoreUnavailable` if the backend is down."""
        ...

    def close(self) -> None:
        """Release connections; idempotent."""
        ...


#: The operations `timed_store` times (a bounded set, the metric label values: never a
#: key). A blocking ``pop`` is left out: its wait for a message is not latency.
STORE_OPERATIONS = (
    "put",
    "get",
    "delete",
    "add",
    "replace",
    "scan",
    "push",
    "ping",
    "hold_lease",
    "write_if",
    "claim_matching",
    "take_token",
)

_Listener = Callable[[str, str, float], None]
_listener: _Listener | None = None

C = TypeVar("C", bound=type)


def set_operation_listener(listener: _Listener | None) -> None:
    """Call ``listener(store, operation, seconds)`` after each timed store operation
    (failures included); None stops. `channelkit.observability.hub` installs the one
    that reaches the observers (``channelkit_store_operation_seconds``)."""
    global _listener
    _listener = listener


def timed_store(store: str) -> Callable[[C], C]:
    """A class decorator for a store: each of its own methods named in
    `STORE_OPERATIONS` reports how long it took to the listener of
    `set_operation_listener()` (``store`` is the label, e.g. ``memory``)."""

    def decorate(cls: C) -> C:
        for operation in STORE_OPERATIONS:
            method = cls.__dict__.get(operation)
            if callable(method):
                setattr(cls, operation, _timed(store, operation, method))
        return cls

    return decorate


def _timed(store: str, operation: str, method: Callable[..., Any]) -> Callable[..., Any]:
    def timed(self: object, /, *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return method(self, *args, **kwargs)
        finally:
            listener = _listener
            if listener is not None:
                try:
                    listener(store, operation, time.perf_counter() - started)
                except Exception:  # reporting never breaks the store
                    pass

    timed.__name__ = method.__name__
    timed.__qualname__ = method.__qualname__
    timed.__doc__ = method.__doc__
    timed.__wrapped__ = method  # type: ignore[attr-defined]
    return timed


def new_instance_id() -> str:
    """``hostname-pid-random``: unique per process (and per store object)."""
    host = socket.gethostname() or "host"
    return f"{host}-{os.getpid()}-{secrets.token_hex(4)}"


def check_bucket(rate: object, burst: object, keep: object) -> tuple[float, float, float]:
    """``take_token()``'s numbers, checked: ``rate`` > 0, ``burst`` >= 1, 0 <= ``keep`` <
    ``burst``."""
    values = []
    for name, value in (("rate", rate), ("burst", burst), ("keep", keep)):
        if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
            raise ConfigurationError("must be a number", name)
        values.append(float(value))
    rate_f, burst_f, keep_f = values
    if not 0 < rate_f < math.inf:
        raise ConfigurationError("must be > 0", "rate")
    if not 1 <= burst_f < math.inf:
        raise ConfigurationError("must be >= 1", "burst")
    if not 0 <= keep_f < burst_f:
        raise ConfigurationError("must be >= 0 and below burst", "keep")
    return rate_f, burst_f, keep_f


def check_namespace(namespace: object) -> str:
    if not isinstance(namespace, str) or not _NAMESPACE.match(namespace):
        raise ConfigurationError(
            "must be 1-128 characters of letters, digits, '_', '.' or '-'", "namespace"
        )
    return namespace


def check_key(key: object, what: str = "key") -> str:
    if not isinstance(key, str) or not key:
        raise ConfigurationError("must be a non-empty string", what)
    return key


def check_ttl(ttl_s: float | None) -> float | None:
    if ttl_s is None:
        return None
    if isinstance(ttl_s, bool) or not isinstance(ttl_s, int | float):
        raise ConfigurationError("must be a number of seconds or None", "ttl_s")
    if not math.isfinite(ttl_s) or ttl_s <= 0:
        raise ConfigurationError("must be > 0", "ttl_s")
    return float(ttl_s)


def encode(value: Mapping[str, Any], what: str = "value") -> str:
    """The canonical JSON of ``value`` (sorted keys, compact): equal dicts, equal text."""
    if not isinstance(value, Mapping):
        raise ConfigurationError("must be a mapping", what)
    try:
        return json.dumps(dict(value), sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ConfigurationError(f"is not JSON-able ({exc})", what) from None


def decode(text: str | bytes) -> dict[str, Any]:
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError("stored value is not a JSON object")
    return value


def guard_text(value: object) -> str | None:
    """The text a guard or a match compares (as Redis's Lua ``tostring`` shows the JSON
    value): a string as is, an integer in decimal, a boolean ``true``/``false``, else
    None (never equal)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return None


def check_token(token: object, what: str = "token") -> int:
    if isinstance(token, bool) or not isinstance(token, int) or token < 0:
        raise ConfigurationError("must be an integer >= 0", what)
    return token


def redact_url(url: str) -> str:
    """``url`` with its password (if any) replaced by ``***``: safe to log."""
    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
        user = parts.username or ""
        host = parts.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        netloc = f"{user}:***@{host}"
        if parts.port is not None:
            netloc += f":{parts.port}"
        return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    except ValueError:
        return "<unparsable url>"

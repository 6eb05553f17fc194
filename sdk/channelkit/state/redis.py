"""The Redis state store: every process of a bot shares one Redis.

Layout: the value under ``key`` is the canonical JSON string at ``<namespace>:k:<key>``
(``SET``, ``SET NX PX``, a Lua compare-and-set); the queue ``q`` is the list
``<namespace>:q:<q>`` (``RPUSH``/``BLPOP``); a lease token counter is the integer
``<namespace>:n:<counter>`` (``INCR``, inside the lease script). Fencing is checked
inside Redis: `RedisStore.hold_lease()` and `RedisStore.write_if()` are Lua scripts
(``register_script``: ``EVALSHA``), the guard's check and the write one atomic step.
Every call is one round trip.

A lost Redis fails fast: short socket timeouts, no client-side retries, and every
redis-py error becomes `StateStoreUnavailable` (the message
never carries the URL's password). The connection pool drops dead connections and
connects again on the next call, so the same store object works as soon as Redis is back.

High availability and security, all through redis-py itself: with ``sentinels`` the
store asks the Sentinels for the primary of ``sentinel_service``
(``redis.sentinel.Sentinel(...).master_for(...)``) and, after a failover, reconnects to
the new primary (a connection to the old one fails, or the demoted server answers
``READONLY``; either way the next connection asks the Sentinels again). A call that hits
the failover is sent once more on the new primary when sending it twice is safe: reads,
``SET``, ``DEL``, ``SCAN``, ``PING``, and the scripts and ``SET NX`` whose effect is
checked (a refusal that finds this very value already written counts as done). A queue
push or pop is never repeated (it could double or drop a message): it raises
`StateStoreUnavailable` as any other failure. TLS (``tls=True`` or a ``rediss://`` URL,
with CA, certificate and key files) and ACL users (``username``, ``password``) apply to
the primary and, with the Sentinel password, to the Sentinels; no secret is ever in
``repr`` or in an error message.

redis-py is the ``redis`` extra: ``pip install 'channelkit[redis]'``.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from channelkit.errors import ConfigurationError, StateStoreUnavailable
from channelkit.runtime.clock import Clock, SystemClock
from channelkit.state.base import (
    CLAIM_MISMATCH,
    DEFAULT_NAMESPACE,
    GUARD_ABSENT,
    GUARD_EXISTS,
    GUARD_STALE,
    GUARD_WRITTEN,
    check_bucket,
    check_key,
    check_namespace,
    check_token,
    check_ttl,
    decode,
    encode,
    guard_text,
    new_instance_id,
    redact_url,
    timed_store,
)
from channelkit.state.redis_options import parse_sentinels

try:
    import redis as _redis
    import redis.sentinel as _sentinel
    from redis.backoff import NoBackoff
    from redis.retry import Retry
except ImportError as _missing:  # pragma: no cover - exercised only without the extra
    raise ImportError("RedisStore needs redis-py: pip install 'channelkit[redis]'") from _missing

# redis-py annotates these in some releases and not in others: called through ``Any``
# they type-check the same against every release the ``redis`` extra allows.
_parse_url: Any = _redis.connection.parse_url
_Sentinel: Any = _sentinel.Sentinel
_pool_from_url: Any = _redis.ConnectionPool.from_url

__all__ = ["RedisStore"]

T = TypeVar("T")

# KEYS[1] the key; ARGV[1] the expected JSON; ARGV[2] "set" or "del"; ARGV[3] the new
# JSON; ARGV[4] the TTL in milliseconds ("" for none).
_REPLACE = """
local current = redis.call('GET', KEYS[1])
if current ~= ARGV[1] then return 0 end
if ARGV[2] == 'del' then
  redis.call('DEL', KEYS[1])
elseif ARGV[4] == '' then
  redis.call('SET', KEYS[1], ARGV[3])
else
  redis.call('SET', KEYS[1], ARGV[3], 'PX', ARGV[4])
end
return 1
"""

# Take or renew a lease (fencing token). KEYS[1] the lease, KEYS[2] the token counter;
# ARGV[1] the token held (0: none), ARGV[2] and ARGV[3] the value's JSON before and after
# the token, ARGV[4] the TTL in milliseconds. Returns the token held now, 0 when lost.
_HOLD_LEASE = """
local token = tonumber(ARGV[1])
local current = redis.call('GET', KEYS[1])
if current then
  local ok, doc = pcall(cjson.decode, current)
  if token > 0 and ok and type(doc) == 'table' and doc['token'] ~= nil
      and tostring(doc['token']) == ARGV[1] then
    redis.call('SET', KEYS[1], ARGV[2] .. ARGV[1] .. ARGV[3], 'PX', ARGV[4])
    return token
  end
  return 0
end
local n = redis.call('INCR', KEYS[2])
if n <= token then
  n = token + 1
  redis.call('SET', KEYS[2], n)
end
redis.call('SET', KEYS[1], ARGV[2] .. n .. ARGV[3], 'PX', ARGV[4])
return n
"""

# A write guarded by another key's field. KEYS[1] the guard, KEYS[2] the key; ARGV[1] the
# field, ARGV[2] its expected text, ARGV[3] "set", "nx" or "del", ARGV[4] the JSON,
# ARGV[5] the TTL in milliseconds ("" for none).
_WRITE_IF = """
local guard = redis.call('GET', KEYS[1])
if not guard then return 'absent' end
local ok, doc = pcall(cjson.decode, guard)
if not ok or type(doc) ~= 'table' or doc[ARGV[1]] == nil
    or tostring(doc[ARGV[1]]) ~= ARGV[2] then
  return 'stale'
end
if ARGV[3] == 'del' then
  redis.call('DEL', KEYS[2])
  return 'written'
end
if ARGV[3] == 'nx' and redis.call('EXISTS', KEYS[2]) == 1 then return 'exists' end
if ARGV[5] == '' then
  redis.call('SET', KEYS[2], ARGV[4])
else
  redis.call('SET', KEYS[2], ARGV[4], 'PX', ARGV[5])
end
return 'written'
"""

# Read a record and, when its fields match, add a guarded one-shot claim. KEYS[1] the
# record, KEYS[2] the guard, KEYS[3] the claim; ARGV[1] the guard's field, ARGV[2] its
# expected text, ARGV[3] the claim's JSON, ARGV[4] its TTL in ms ("" for none), then
# field/value pairs to match. Returns {record or false, outcome}.
_CLAIM_MATCHING = """
local raw = redis.call('GET', KEYS[1])
if not raw then return {false, 'mismatch'} end
local ok, doc = pcall(cjson.decode, raw)
if not ok or type(doc) ~= 'table' then return {raw, 'mismatch'} end
for i = 5, #ARGV, 2 do
  if doc[ARGV[i]] == nil or tostring(doc[ARGV[i]]) ~= ARGV[i + 1] then
    return {raw, 'mismatch'}
  end
end
local guard = redis.call('GET', KEYS[2])
if not guard then return {raw, 'absent'} end
local gok, gdoc = pcall(cjson.decode, guard)
if not gok or type(gdoc) ~= 'table' or gdoc[ARGV[1]] == nil
    or tostring(gdoc[ARGV[1]]) ~= ARGV[2] then
  return {raw, 'stale'}
end
if redis.call('EXISTS', KEYS[3]) == 1 then return {raw, 'exists'} end
if ARGV[4] == '' then
  redis.call('SET', KEYS[3], ARGV[3])
else
  redis.call('SET', KEYS[3], ARGV[3], 'PX', ARGV[4])
end
return {raw, 'written'}
"""

# Token bucket (`take_token`): KEYS[1] the bucket (a hash: tokens, ts); ARGV rate, burst,
# keep, now ("" : the server's TIME, so every process agrees), force ("1": take it even
# when none is there, the bucket owing it). Returns the wait as text.
_TAKE_TOKEN = """
local rate, burst, keep = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local now
if ARGV[4] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) + tonumber(t[2]) / 1000000
else
  now = tonumber(ARGV[4])
end
local state = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens, ts = tonumber(state[1]), tonumber(state[2])
if tokens == nil or ts == nil then tokens, ts = burst, now end
if now > ts then
  tokens = math.min(burst, tokens + (now - ts) * rate)
  ts = now
end
local wait = 0
if tokens >= 1 + keep then
  tokens = tokens - 1
else
  wait = (1 + keep - tokens) / rate
  if ARGV[5] == '1' then tokens = math.max(-burst, tokens - 1) end
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'ts', tostring(ts))
redis.call('PEXPIRE', KEYS[1], math.ceil((burst - tokens) / rate * 1000) + 1000)  -- full again
return tostring(wait)
"""

_OUTCOMES = {o: o for o in (GUARD_WRITTEN, GUARD_EXISTS, GUARD_STALE, GUARD_ABSENT, CLAIM_MISMATCH)}
#: the token's place in a lease value's canonical JSON (split around it for the script)
_TOKEN_MARK = '"token":0'

_GLOB_SPECIAL = frozenset("*?[]\\")


def _ms(ttl_s: float) -> int:
    return max(1, round(ttl_s * 1000))


def _glob_escape(text: str) -> str:
    return "".join("\\" + ch if ch in _GLOB_SPECIAL else ch for ch in text)


@timed_store("redis")  # channelkit_store_operation_seconds
class RedisStore:
    """A `StateStore` in Redis (redis-py, pooled)."""

    def __init__(
        self,
        url: str | None = None,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        socket_timeout_s: float = 1.0,
        clock: Clock | None = None,
        sentinels: Sequence[str] | None = None,
        sentinel_service: str | None = None,
        sentinel_password: str | None = None,
        username: str | None = None,
        password: str | None = None,
        tls: bool = False,
        tls_ca_file: str | None = None,
        tls_cert_file: str | None = None,
        tls_key_file: str | None = None,
    ) -> None:
        """Connect (lazily: nothing is sent before the first call) to one Redis at
        ``url``, or to the primary the ``sentinels`` (``host:port`` strings) name for
        ``sentinel_service``.

        With sentinels, ``url`` is optional (its database number, user and password are
        used when given). ``username``/``password`` (ACL) override the URL's;
        ``sentinel_password`` authenticates to the Sentinels. ``tls`` (or a
        ``rediss://`` URL) encrypts every connection; ``tls_ca_file`` verifies the
        server, ``tls_cert_file`` and ``tls_key_file`` (both or neither) are the client
        certificate. Bad values raise `ConfigurationError` naming the argument.
        """
        if isinstance(socket_timeout_s, bool) or not 0 < socket_timeout_s <= 60:
            raise ConfigurationError("must be in (0, 60]", "socket_timeout_s")
        if sentinels is None:
            if sentinel_service is not None:
                raise ConfigurationError("needs sentinels", "sentinel_service")
            addresses: list[tuple[str, int]] = []
        else:
            addresses = parse_sentinels(sentinels, sentinel_service)
        if url is None and not addresses:
            raise ConfigurationError("must be a redis:// URL (or give sentinels)", "url")
        if url is not None and (not isinstance(url, str) or not url):
            raise ConfigurationError("must be a redis:// URL", "url")
        for value, name in (
            (username, "username"),
            (password, "password"),
            (sentinel_password, "sentinel_password"),
        ):
            if value is not None and (not isinstance(value, str) or not value):
                raise ConfigurationError("must be a non-empty string", name)
        if not isinstance(tls, bool):
            raise ConfigurationError("must be true or false", "tls")
        if url is not None and url.startswith("rediss://"):
            tls = True
        if tls and url is not None and url.startswith("unix://"):
            raise ConfigurationError("TLS needs a TCP URL, not unix://", "tls")
        tls_files = {}
        for value, name, key in (
            (tls_ca_file, "tls_ca_file", "ssl_ca_certs"),
            (tls_cert_file, "tls_cert_file", "ssl_certfile"),
            (tls_key_file, "tls_key_file", "ssl_keyfile"),
        ):
            if value is None:
                continue
            if not tls:
                raise ConfigurationError("needs tls (tls=True or a rediss:// URL)", name)
            if not isinstance(value, str) or not os.path.isfile(value):
                raise ConfigurationError(f"no such file: {value!r}", name)
            tls_files[key] = value
        if ("ssl_certfile" in tls_files) != ("ssl_keyfile" in tls_files):
            missing = "tls_key_file" if "ssl_certfile" in tls_files else "tls_cert_file"
            raise ConfigurationError("the client certificate needs both files", missing)
        self.namespace = check_namespace(namespace)
        self.instance_id = new_instance_id()
        self.url = redact_url(url) if url is not None else None  # never the password
        self.sentinels = tuple(f"{h}:{p}" for h, p in addresses)
        self.sentinel_service = sentinel_service if addresses else None
        self.tls = tls
        self.username = username
        self.socket_timeout_s = float(socket_timeout_s)
        # TTLs live in Redis (server time); the clock is kept for the protocol's sake.
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._bucket_clock = clock  # `take_token`: None, the server's TIME
        self._take_token: Any = None  # its script, registered on first use
        self._keys = f"{self.namespace}:k:"
        self._queues = f"{self.namespace}:q:"
        self._counters = f"{self.namespace}:n:"
        common: dict[str, Any] = {
            "socket_connect_timeout": self.socket_timeout_s,
            "retry": Retry(NoBackoff(), 0),  # fail fast: the caller decides what to retry
            "health_check_interval": 0,
            "socket_keepalive": True,
        }
        auth: dict[str, Any] = {}
        if username is not None:
            auth["username"] = username
        if password is not None:
            auth["password"] = password
        # Blocking pops wait server-side in slices of ``_slice_s``; their socket timeout
        # leaves room for the slice plus a normal reply.
        self._slice_s = self.socket_timeout_s
        blocking_timeout = 2 * self.socket_timeout_s + 0.5
        if addresses:
            self._where = f"Redis primary {sentinel_service!r} via sentinels " + ",".join(
                self.sentinels
            )
            self._client, self._blocking = self._via_sentinels(
                url, addresses, sentinel_password, common, auth, tls_files, blocking_timeout
            )
        else:
            assert url is not None
            self._where = f"Redis at {self.url}"
            if tls and url.startswith("redis://"):
                url = "rediss://" + url[len("redis://") :]
            options = {**common, **auth, **tls_files}
            try:
                pool = _pool_from_url(url, socket_timeout=self.socket_timeout_s, **options)
                blocking = _pool_from_url(url, socket_timeout=blocking_timeout, **options)
            except ValueError as exc:
                raise ConfigurationError(f"invalid Redis URL ({_reason(exc)})", "url") from None
            self._client = _redis.Redis(connection_pool=pool)
            self._blocking = _redis.Redis(connection_pool=blocking)
        self._replace = self._client.register_script(_REPLACE)
        self._hold_lease = self._client.register_script(_HOLD_LEASE)
        self._write_if = self._client.register_script(_WRITE_IF)
        self._claim_matching = self._client.register_script(_CLAIM_MATCHING)

    def _via_sentinels(
        self,
        url: str | None,
        addresses: list[tuple[str, int]],
        sentinel_password: str | None,
        common: dict[str, Any],
        auth: dict[str, Any],
        tls_files: dict[str, str],
        blocking_timeout: float,
    ) -> tuple[Any, Any]:
        """The primary's two clients (normal and blocking), through redis-py's Sentinel."""
        master: dict[str, Any] = {}
        if url is not None:  # database, user and password from the URL, if any
            try:
                parsed = _parse_url(url)
            except ValueError as exc:
                raise ConfigurationError(f"invalid Redis URL ({_reason(exc)})", "url") from None
            master.update({k: v for k, v in parsed.items() if k in ("db", "username", "password")})
        master.update(auth)
        tls_options: dict[str, Any] = {"ssl": True, **tls_files} if self.tls else {}
        sentinel_options: dict[str, Any] = {
            "socket_timeout": self.socket_timeout_s,
            "socket_connect_timeout": self.socket_timeout_s,
            "retry": Retry(NoBackoff(), 0),
            **tls_options,
        }
        if sentinel_password is not None:
            sentinel_options["password"] = sentinel_password
        manager = _Sentinel(
            addresses,
            sentinel_kwargs=sentinel_options,
            socket_timeout=self.socket_timeout_s,
            **common,
            **master,
            **tls_options,
        )
        service = self.sentinel_service
        client = manager.master_for(service)
        blocking = manager.master_for(service, socket_timeout=blocking_timeout)
        return client, blocking

    # -- plumbing ---------------------------------------------------------------------

    def _call(
        self,
        what: str,
        fn: Callable[[], T],
        *,
        again: Callable[[], T] | None = None,
    ) -> T:
        """Run ``fn``; with sentinels, a connection lost to a failover (or an answer from
        the demoted primary) sends ``again`` (when given: a safe repeat) once more, on the
        primary the Sentinels name now. Every redis-py error becomes
        `StateStoreUnavailable`."""
        try:
            try:
                return fn()
            except _redis.AuthenticationError:
                raise
            except (_redis.ConnectionError, _redis.TimeoutError, _redis.ReadOnlyError):
                if again is None or not self.sentinels:
                    raise
                return again()
        except _redis.AuthenticationError as exc:
            error = StateStoreUnavailable(
                f"state store refused the credentials ({what}): {self._where}: "
                f"{_reason(exc)} (check username and password)"
            )
            error.cause_class = type(exc).__name__
            raise error from None
        except (_redis.ConnectionError, _redis.TimeoutError, OSError) as exc:
            error = StateStoreUnavailable(
                f"state store unreachable ({what}): {self._where}: {_reason(exc)}"
            )
            error.cause_class = type(exc).__name__
            raise error from None
        except _redis.RedisError as exc:
            error = StateStoreUnavailable(
                f"state store failed ({what}): {self._where}: {_reason(exc)}"
            )
            error.cause_class = type(exc).__name__
            raise error from None

    def _key(self, key: str) -> str:
        return self._keys + check_key(key)

    # -- keys -------------------------------------------------------------------------

    def put(self, key: str, value: Mapping[str, Any], *, ttl_s: float | None = None) -> None:
        name, ttl, text = self._key(key), check_ttl(ttl_s), encode(value)
        px = None if ttl is None else _ms(ttl)
        write = functools.partial(self._client.set, name, text, px=px)
        self._call("put", write, again=write)

    def get(self, key: str) -> dict[str, Any] | None:
        name = self._key(key)
        read = functools.partial(self._client.get, name)
        raw = self._call("get", read, again=read)
        return None if raw is None else decode(raw)

    def delete(self, key: str) -> bool:
        name = self._key(key)
        remove = functools.partial(self._client.delete, name)
        return bool(self._call("delete", remove, again=remove))

    def add(self, key: str, value: Mapping[str, Any], *, ttl_s: float | None = None) -> bool:
        name, ttl, text = self._key(key), check_ttl(ttl_s), encode(value)
        px = None if ttl is None else _ms(ttl)

        def write() -> bool:
            return bool(self._client.set(name, text, nx=True, px=px))

        def again() -> bool:  # a refusal that finds this very value was our first try
            return write() or self._client.get(name) == text.encode("utf-8")

        return self._call("add", write, again=again)

    def replace(
        self,
        key: str,
        expected: Mapping[str, Any],
        value: Mapping[str, Any] | None,
        *,
        ttl_s: float | None = None,
    ) -> bool:
        name, ttl = self._key(key), check_ttl(ttl_s)
        want = encode(expected, "expected")
        args = [want, "del", "", ""]
        after: bytes | None = None
        if value is not None:
            text = encode(value)
            after = text.encode("utf-8")
            args = [want, "set", text, "" if ttl is None else str(_ms(ttl))]

        def swap() -> bool:
            return bool(self._replace(keys=[name], args=args))

        def again() -> bool:  # refused: done already when the key holds what we wrote
            return swap() or (
                after is not None and want != after.decode() and self._client.get(name) == after
            )

        return self._call("replace", swap, again=again)

    def hold_lease(
        self, key: str, value: Mapping[str, Any], *, token: int, ttl_s: float, counter: str
    ) -> int:
        """One script: renew the lease carrying ``token``, or take an absent one with the
        next counter value (``<namespace>:n:<counter>``, ``INCR``)."""
        name = self._key(key)
        counter_name = self._counters + check_key(counter, "counter")
        token = check_token(token)
        ttl = check_ttl(ttl_s)
        if ttl is None:
            raise ConfigurationError("must be a number of seconds", "ttl_s")
        fields = {k: v for k, v in value.items() if k != "token"}
        head, tail = encode({**fields, "token": 0}).split(_TOKEN_MARK, 1)
        args = [str(token), head + '"token":', tail, str(_ms(ttl))]
        keys = [name, counter_name]

        def hold() -> int:
            return int(self._hold_lease(keys=keys, args=args))

        def again() -> int:  # lost: ours when the lease holds exactly our value
            held = hold()
            if held or token:
                return held
            raw = self._client.get(name)
            text = raw.decode("utf-8") if isinstance(raw, bytes) else ""
            prefix = head + '"token":'
            number = text[len(prefix) : len(text) - len(tail)] if tail else ""
            if text.startswith(prefix) and text.endswith(tail) and number.isdigit():
                return int(number)
            return 0

        return self._call("hold_lease", hold, again=again)

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
        """One script: the guard's check and the write (see `StateStore.write_if()`)."""
        keys = [self._key(check_key(guard, "guard")), self._key(key)]
        want = guard_text(expected)
        if want is None:
            raise ConfigurationError("must be a string or an integer", "expected")
        ttl = check_ttl(ttl_s)
        if value is None:
            args = [field, want, "del", "", ""]
        else:
            mode = "nx" if only_if_absent else "set"
            args = [field, want, mode, encode(value), "" if ttl is None else str(_ms(ttl))]

        def write() -> str:
            raw = self._write_if(keys=keys, args=args)
            return _OUTCOMES[raw.decode("ascii") if isinstance(raw, bytes) else str(raw)]

        def again() -> str:  # "exists" holding our very value: the first try wrote it
            outcome = write()
            if outcome == GUARD_EXISTS and self._client.get(keys[1]) == args[3].encode("utf-8"):
                return GUARD_WRITTEN
            return outcome

        return self._call("write_if", write, again=again)

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
        """One script: the record's read, its match and the guarded claim."""
        keys = [
            self._key(check_key(record, "record")),
            self._key(check_key(guard, "guard")),
            self._key(check_key(claim, "claim")),
        ]
        want = guard_text(expected)
        if want is None:
            raise ConfigurationError("must be a string or an integer", "expected")
        ttl = check_ttl(ttl_s)
        args = [field, want, encode(value), "" if ttl is None else str(_ms(ttl))]
        for name, text in match.items():
            args += [str(name), str(text)]

        def take() -> tuple[Any, str]:
            raw, outcome = self._claim_matching(keys=keys, args=args)
            text = outcome.decode("ascii") if isinstance(outcome, bytes) else str(outcome)
            return raw, _OUTCOMES[text]

        def again() -> tuple[Any, str]:  # "exists" holding our very claim: ours
            raw, outcome = take()
            if outcome == GUARD_EXISTS and self._client.get(keys[2]) == args[2].encode("utf-8"):
                return raw, GUARD_WRITTEN
            return raw, outcome

        raw, outcome = self._call("claim_matching", take, again=again)
        return (None if not raw else decode(raw)), outcome

    def scan(self, prefix: str, limit: int = 1000) -> list[str]:
        if not isinstance(prefix, str):
            raise ConfigurationError("must be a string", "prefix")
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ConfigurationError("must be an integer >= 1", "limit")
        pattern = _glob_escape(self._keys + prefix) + "*"
        strip = len(self._keys)

        def run() -> list[str]:
            found: set[str] = set()
            cursor: int = 0
            while True:
                cursor, batch = self._client.scan(cursor, match=pattern, count=1000)
                for raw in batch:
                    found.add(raw.decode("utf-8") if isinstance(raw, bytes) else str(raw))
                if cursor == 0 or len(found) >= limit:
                    break
            return sorted(k[strip:] for k in found)[:limit]

        return self._call("scan", run, again=run)

    # -- queues -----------------------------------------------------------------------

    def push(self, queue: str, message: Mapping[str, Any]) -> None:
        name = self._queues + check_key(queue, "queue")
        text = encode(message, "message")
        self._call("push", lambda: self._client.rpush(name, text))

    def pop(self, queue: str, timeout_s: float) -> dict[str, Any] | None:
        """``BLPOP`` in slices of at most the socket timeout, up to ``timeout_s``."""
        name = self._queues + check_key(queue, "queue")
        remaining = max(0.0, float(timeout_s))
        deadline = time.monotonic() + remaining

        def take(wait: float) -> Any:
            if wait < 0.01:  # BLPOP's 0 means "forever": never send it
                raw = self._client.lpop(name)
                return None if raw is None else (name, raw)
            return self._blocking.blpop([name], timeout=wait)

        while True:
            wait = round(min(remaining, self._slice_s), 3)
            got = self._call("pop", functools.partial(take, wait))
            if got is not None:
                return decode(got[1])
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None

    # -- lifecycle --------------------------------------------------------------------

    def take_token(
        self, key: str, *, rate: float, burst: float, keep: float = 0.0, force: bool = False
    ) -> float:
        rate, burst, keep = check_bucket(rate, burst, keep)
        # the server's clock unless a clock was given (tests): every process agrees
        now = "" if self._bucket_clock is None else repr(self._bucket_clock.now())
        script = self._take_token
        if script is None:
            script = self._take_token = self._client.register_script(_TAKE_TOKEN)
        args = [repr(rate), repr(burst), repr(keep), now, "1" if force else ""]
        # not repeated after a failover: a token taken twice only slows the caller
        answer = self._call("take_token", lambda: script(keys=[self._key(key)], args=args))
        return max(0.0, float(answer))

    def ping(self) -> None:
        self._call("ping", self._client.ping, again=self._client.ping)

    def close(self) -> None:
        self._client.connection_pool.disconnect()
        self._blocking.connection_pool.disconnect()

    def __repr__(self) -> str:
        where = (
            f"sentinels={self.sentinels!r}, sentinel_service={self.sentinel_service!r}"
            if self.sentinels
            else repr(self.url)
        )
        return (
            f"RedisStore({where}, namespace={self.namespace!r}, "
            f"instance_id={self.instance_id!r}, tls={self.tls!r})"
        )


def _reason(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text if len(text) <= 200 else text[:197] + "..."

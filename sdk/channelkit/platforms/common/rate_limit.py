"""Outbound rate limits shared by every process: a token bucket per (platform, chat).

A platform limits how fast a bot may write into one chat (Telegram: about one message a
second in a private chat, short bursts allowed, and 20 a minute in a group; edits count
too) and answers 429 past it. `ChatRateLimiter` keeps one token bucket per chat in the
channel's `StateStore` (`StateStore.take_token()`: a Lua script in Redis, a lock in
memory), so several processes sharing one Redis stay inside the limit *together*; without
a store the buckets live in this process.

Two kinds of writes ask it:

* **streamed previews** (`ChatRateLimiter.stream_wait()`): take a token only while
  `STREAM_KEEP` more stay in the bucket, else learn how long to wait. The caller
  books a timer (it never sleeps) and writes the *newest* text then, so a fast stream
  coalesces into fewer, larger edits.
* **messages that must arrive** (final answers, through `ChatRateLimiter.gate()`): take
  any token; without one the gate raises `Throttled` with the wait, which the delivery
  chain books on the scheduler without counting an attempt. After `max_wait_s` of
  waiting the gate lets the write go without a token (a 429 is then retried by the
  chain as before): a write is delayed, never lost.

A closed segment's text (it must precede what follows it, a question perhaps) waits for
its token in its own thread (`ChatRateLimiter.wait()`, on the injected clock, at most
``max_wait_s``). Writes that cannot wait at all are *noted* (`ChatRateLimiter.note()`):
their token is taken even from an empty bucket, which then owes it, so the writes that
can wait wait longer.

A store that fails (`StateStoreUnavailable`) lets the write go: the platform's 429 is
still handled where it was before.

Every other platform paces its API calls through `OutboundPacer`, one helper for all: a
platform's table (`channelkit.platforms.common.limits`) maps each operation that writes
into a chat to a *family* and each family to its documented `OutboundLimit`s (per chat,
per message or card, or per bot). Before the call goes out, `OutboundPacer.before_call()`
takes a token of each of the family's buckets (shared through the store like the
Telegram ones); without one the calling thread waits (on the injected clock) and asks
again, at most ``max_wait_s`` in all, then the call goes anyway (a 429 is
then handled as before). Nothing is dropped: a call is delayed, in the order the callers
asked. A streamed segment's writer (`SnapshotWriter`) keeps collecting chunks while its
write waits, so its next write carries all of them: the interval between a stream's
writes lengthens by itself to what the budget allows.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from channelkit.errors import ConfigurationError, StateStoreUnavailable, Throttled
from channelkit.runtime import Clock
from channelkit.state import MemoryStore, StateStore

__all__ = [
    "DEFAULT_MAX_WAIT_S",
    "PACE_POLL_S",
    "STREAM_KEEP",
    "TELEGRAM_GROUP",
    "TELEGRAM_PRIVATE",
    "ChatLimit",
    "ChatRateLimiter",
    "LimitTable",
    "OutboundLimit",
    "OutboundPacer",
    "RateGate",
    "Throttled",
    "sleep_on",
    "telegram_chat_limit",
]

logger = logging.getLogger(__name__)

#: Seconds a message that must arrive waits for a token before it goes without one.
DEFAULT_MAX_WAIT_S = 60.0
#: Real seconds between two looks at the clock while a call waits for its token.
PACE_POLL_S = 0.02
#: Tokens a streamed preview leaves in the bucket for the messages that must arrive.
STREAM_KEEP = 1.0


@dataclass(frozen=True)
class ChatLimit:
    """One chat's budget: ``rate`` writes a second on average, ``burst`` at once."""

    rate: float
    burst: float

    def __post_init__(self) -> None:
        if isinstance(self.rate, bool) or not 0 < self.rate < math.inf:
            raise ConfigurationError("must be a number > 0", "rate")
        if isinstance(self.burst, bool) or not 1 + STREAM_KEEP <= self.burst < math.inf:
            raise ConfigurationError(f"must be a number >= {1 + STREAM_KEEP:g}", "burst")


#: Telegram, a private chat: about one message a second, short bursts allowed.
TELEGRAM_PRIVATE = ChatLimit(rate=1.0, burst=20.0)
#: Telegram, a group: 20 messages a minute (paced a little below, 18, for clock drift).
TELEGRAM_GROUP = ChatLimit(rate=18 / 60, burst=10.0)


def telegram_chat_limit(chat_id: str) -> ChatLimit:
    """The limit of a Telegram chat: groups and channels have negative ids."""
    return TELEGRAM_GROUP if chat_id.startswith("-") else TELEGRAM_PRIVATE


_NEVER = threading.Event()  # never set: the real-time tick of the pacing waits


def sleep_on(clock: Clock, seconds: float) -> None:
    """Wait ``seconds`` of ``clock``, looking at it every `PACE_POLL_S` real seconds (no
    timer: a timer's callback would need a worker of a pool the waiting threads may
    fill); bounded in real time too (``seconds`` + 1), should the clock stand still."""
    until = clock.now() + seconds
    real_until = time.monotonic() + seconds + 1.0
    while True:
        left = min(until - clock.now(), real_until - time.monotonic())
        if left <= 0:
            return
        _NEVER.wait(min(left, PACE_POLL_S))


class ChatRateLimiter:
    """Token buckets per chat of one ``platform``, kept in ``store`` (shared by every
    process of the bot) or, when None, in this process. ``limit(chat_id)`` gives each
    chat's `ChatLimit`. Thread-safe (the store is)."""

    def __init__(
        self,
        platform: str,
        *,
        limit: Callable[[str], ChatLimit],
        clock: Clock,
        store: StateStore | None = None,
        max_wait_s: float = DEFAULT_MAX_WAIT_S,
    ) -> None:
        if isinstance(max_wait_s, bool) or not 0 <= max_wait_s < math.inf:
            raise ConfigurationError("must be a number >= 0", "max_wait_s")
        self.platform = platform
        self.clock = clock
        self.max_wait_s = float(max_wait_s)
        self._limit = limit
        self._store: StateStore = store if store is not None else MemoryStore(clock=clock)

    def _take(self, chat_id: str, keep: float, force: bool = False) -> float:
        spec = self._limit(chat_id)
        try:
            return self._store.take_token(
                f"ratelimit:{self.platform}:{chat_id}",
                rate=spec.rate,
                burst=spec.burst,
                keep=keep,
                force=force,
            )
        except StateStoreUnavailable as exc:
            logger.warning("%s: rate limit unchecked (%s)", self.platform, type(exc).__name__)
            return 0.0  # the write goes; a 429 is handled as before

    def set_limit(self, limit: Callable[[str], ChatLimit]) -> None:
        """Pace by ``limit(chat_id)`` from now on (an operator's own numbers, or a test's)."""
        self._limit = limit

    def stream_wait(self, chat_id: str) -> float:
        """A streamed preview: 0.0 when it may be written now (its token is taken), else
        the seconds until it may ask again (`STREAM_KEEP` tokens stay for messages)."""
        return self._take(chat_id, STREAM_KEEP)

    def wait(self, chat_id: str) -> None:
        """A write that must go before what follows it (a closed segment's text): wait
        (this thread, on the injected clock) until its token is taken, at most
        ``max_wait_s``; then it goes anyway (a 429 is handled as before)."""
        deadline = self.clock.now() + self.max_wait_s
        real_deadline = time.monotonic() + self.max_wait_s + 1.0
        while True:
            wait = self._take(chat_id, 0.0)
            if wait <= 0:
                return
            left = deadline - self.clock.now()
            if left <= 0 or time.monotonic() >= real_deadline:
                logger.warning(
                    "%s: no token after %.1f s; sending without one", self.platform, self.max_wait_s
                )
                return
            sleep_on(self.clock, min(wait, left))

    def note(self, chat_id: str) -> None:
        """A write that does not wait (a segment's text, a notice): its token is taken
        even when the bucket is empty (it owes it), so the writes that do wait wait
        longer and the chat stays inside its limit over time."""
        self._take(chat_id, 0.0, force=True)

    def gate(self, chat_id: str) -> RateGate:
        """A gate for the writes of one message that must arrive (call it before each)."""
        return RateGate(self, chat_id)


class RateGate:
    """Before each write of a message: returns when a token was taken (or the wait
    passed ``max_wait_s``, then the write goes anyway); else raises `Throttled`."""

    def __init__(self, limiter: ChatRateLimiter, chat_id: str) -> None:
        self._limiter = limiter
        self.chat_id = chat_id
        self._since: float | None = None  # when this gate first had to wait

    def __call__(self) -> None:
        limiter = self._limiter
        wait = limiter._take(self.chat_id, 0.0)
        now = limiter.clock.now()
        if wait <= 0:
            self._since = None
            return
        if self._since is None:
            self._since = now
        waited = now - self._since
        if waited >= limiter.max_wait_s:
            logger.warning(
                "%s: no token after %.1f s; sending without one", limiter.platform, waited
            )
            self._since = None
            return
        raise Throttled(min(wait, limiter.max_wait_s - waited))


#: What one bucket of an `OutboundLimit` is kept for: each chat, each message or card
#: (the resource the call writes), or the whole bot (app, workspace).
Scope = Literal["chat", "resource", "bot"]


@dataclass(frozen=True)
class OutboundLimit:
    """One documented limit: ``rate`` calls a second on average, ``burst`` at once, per
    ``scope``; ``source`` names where the number comes from (or why it is a default)."""

    rate: float
    burst: float
    scope: Scope = "chat"
    source: str = ""

    def __post_init__(self) -> None:
        if isinstance(self.rate, bool) or not 0 < self.rate < math.inf:
            raise ConfigurationError("must be a number > 0", "rate")
        if isinstance(self.burst, bool) or not 1 <= self.burst < math.inf:
            raise ConfigurationError("must be a number >= 1", "burst")
        if self.scope not in ("chat", "resource", "bot"):
            raise ConfigurationError("must be 'chat', 'resource' or 'bot'", "scope")


#: ``(operation_id, path_args, body) -> the chat or resource id`` (None: not known).
ScopeOf = Callable[[str, Mapping[str, Any], Any], "str | None"]


@dataclass(frozen=True)
class LimitTable:
    """A platform's limits as data: ``operations`` maps each API operation id that writes
    to its family, ``limits`` each family to its `OutboundLimit`s, ``scope_of`` finds the
    chat (or resource) a call writes into."""

    platform: str
    operations: Mapping[str, str]
    limits: Mapping[str, tuple[OutboundLimit, ...]]
    scope_of: ScopeOf = field(default=lambda op, args, body: None)

    def __post_init__(self) -> None:
        for op, family in self.operations.items():
            if family not in self.limits:
                raise ConfigurationError(f"family {family!r} has no limits", f"operations.{op}")


class OutboundPacer:
    """Paces the API calls of one platform's client by ``table``, with token buckets in
    ``store`` (shared by every process of the bot) or, when None, in this process.

    `before_call()` is the client's ``pace`` hook (`BaseClient.pace`). ``override(family,
    limits)`` replaces one family's limits (an operator's own numbers, or a test's small
    ones). Thread-safe (the store is; the overrides are swapped whole under a lock).
    """

    def __init__(
        self,
        table: LimitTable,
        *,
        clock: Clock,
        store: StateStore | None = None,
        max_wait_s: float = DEFAULT_MAX_WAIT_S,
    ) -> None:
        if isinstance(max_wait_s, bool) or not 0 <= max_wait_s < math.inf:
            raise ConfigurationError("must be a number >= 0", "max_wait_s")
        self.table = table
        self.clock = clock
        self.max_wait_s = float(max_wait_s)
        self._store: StateStore = store if store is not None else MemoryStore(clock=clock)
        self._lock = threading.Lock()
        self._lines: dict[str, deque[object]] = {}  # bucket -> callers waiting, in order
        self._moved = threading.Condition(self._lock)  # a line moved
        self._limits: dict[str, tuple[OutboundLimit, ...]] = dict(table.limits)
        #: False: every call goes at once (a deployment pacing elsewhere, or a test of
        #: something else than the platform's limits)
        self.enabled = True
        #: calls that waited for a token / went without one after ``max_wait_s``
        self.waited = 0
        self.unpaced = 0

    def override(self, family: str, *limits: OutboundLimit) -> None:
        """Pace ``family`` by ``limits`` from now on (ConfigurationError: unknown family)."""
        if family not in self.table.limits:
            raise ConfigurationError("no such family in the platform's table", "family")
        if not limits:
            raise ConfigurationError("at least one limit is needed", "limits")
        with self._lock:
            self._limits = {**self._limits, family: tuple(limits)}

    def limits(self, family: str) -> tuple[OutboundLimit, ...]:
        """The limits ``family`` is paced by now."""
        with self._lock:
            return self._limits.get(family, ())

    def before_call(self, operation_id: str, args: Mapping[str, Any], body: Any) -> None:
        """Return once the call may go: a token of each of its family's buckets taken, or
        ``max_wait_s`` waited. Calls outside the table return at once."""
        family = self.table.operations.get(operation_id)
        if family is None or not self.enabled:
            return
        scoped = self.table.scope_of(operation_id, args, body)
        deadline = self.clock.now() + self.max_wait_s
        real_deadline = time.monotonic() + self.max_wait_s + 1.0  # should the clock stand
        waited = False
        for limit in self.limits(family):
            if limit.scope == "bot":
                key = f"ratelimit:{self.table.platform}:{family}:bot"
            elif scoped is None:
                continue  # no chat known: only the bot-wide buckets apply
            else:
                key = f"ratelimit:{self.table.platform}:{family}:{scoped}"
            turn = self._queue(key)
            try:
                while True:
                    first = self._await_turn(key, turn)
                    wait = self._take(key, limit) if first else PACE_POLL_S
                    if wait <= 0:
                        break
                    waited = True
                    left = deadline - self.clock.now()
                    if left <= 0 or time.monotonic() >= real_deadline:
                        logger.warning(
                            "%s: no %s token after %.1f s; calling without one",
                            self.table.platform,
                            family,
                            self.max_wait_s,
                        )
                        with self._lock:
                            self.unpaced += 1
                        return
                    if first:
                        self._sleep(min(wait, left))
            finally:
                self._dequeue(key, turn)
        if waited:
            with self._lock:
                self.waited += 1

    def _queue(self, key: str) -> object:
        """A place in this process's line for bucket ``key`` (first come, first served:
        only the first in line asks the store, so the calls go in the order they came)."""
        turn = object()
        with self._lock:
            self._lines.setdefault(key, deque()).append(turn)
        return turn

    def _await_turn(self, key: str, turn: object) -> bool:
        """True when ``turn`` is first in its line, else False after waiting (at most
        `PACE_POLL_S` real seconds) for the line to move."""
        with self._moved:
            line = self._lines.get(key)
            if line and line[0] is turn:
                return True
            self._moved.wait(PACE_POLL_S)
            line = self._lines.get(key)
            return line is not None and bool(line) and line[0] is turn

    def _dequeue(self, key: str, turn: object) -> None:
        with self._lock:
            line = self._lines.get(key)
            if line is not None:
                line.remove(turn)
                if not line:  # bounded: a line lives while someone is in it
                    del self._lines[key]
            self._moved.notify_all()

    def _take(self, key: str, limit: OutboundLimit) -> float:
        try:
            return self._store.take_token(key, rate=limit.rate, burst=limit.burst)
        except StateStoreUnavailable as exc:
            logger.warning("%s: rate limit unchecked (%s)", self.table.platform, type(exc).__name__)
            return 0.0

    def _sleep(self, seconds: float) -> None:
        sleep_on(self.clock, seconds)

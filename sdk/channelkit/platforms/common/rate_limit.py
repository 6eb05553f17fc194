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
asked (each bucket has a line in this process: only the first in it asks the store).

A call that must not hold its thread runs inside `no_wait()`: there `before_call()`
never sleeps. It takes the tokens when its call would go at once (first in each
bucket's line, a token in each bucket), else it raises `Throttled` with the seconds to
ask again: the bucket's wait, or, when callers already wait in its line (it never jumps
ahead of them), the time the line needs to move (one token a waiter). A streamed
segment's writer (`SnapshotWriter`) runs every write so: a throttled write books its
retry on the scheduler and frees its pool worker, while the writer keeps collecting
chunks, so the retry carries all of them: the interval between a stream's writes
lengthens by itself to what the budget allows. The narrow buckets (per chat, per card)
are asked before the bot-wide ones, the ones that run dry; should a bot-wide bucket be
empty after a narrow token was taken, that token stays taken (the chat owes it, as a
noted Telegram write does: its next write waits that much longer), so nothing goes
past a limit.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal, NoReturn

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
    "no_wait",
    "sleep_on",
    "telegram_chat_limit",
    "waiting_allowed",
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
_mode = threading.local()  # .no_wait: this thread's paced calls raise instead of waiting


@contextmanager
def no_wait() -> Iterator[None]:
    """Within the block, this thread's paced calls never wait for a token: one that
    would (no token, or callers already waiting in its bucket's line) raises `Throttled`
    with the seconds to ask again, before anything went out. For work on a pool worker
    that must always progress (a streamed snapshot's write: `SnapshotWriter`)."""
    before = getattr(_mode, "no_wait", False)
    _mode.no_wait = True
    try:
        yield
    finally:
        _mode.no_wait = before


def waiting_allowed() -> bool:
    """False inside `no_wait()` (on this thread)."""
    return not getattr(_mode, "no_wait", False)


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
        #: calls that waited for a token / went without one after ``max_wait_s`` / were
        #: told to ask again later (`Throttled`, inside `no_wait()`)
        self.waited = 0
        self.unpaced = 0
        self.throttled = 0

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
        ``max_wait_s`` waited. Calls outside the table return at once. Inside
        `no_wait()` it never waits: `Throttled` (with the seconds to ask again) instead."""
        family = self.table.operations.get(operation_id)
        if family is None or not self.enabled:
            return
        buckets = self._buckets(family, self.table.scope_of(operation_id, args, body))
        if not waiting_allowed() and self.max_wait_s > 0:
            self._take_or_throttle(buckets)
            return
        deadline = self.clock.now() + self.max_wait_s
        real_deadline = time.monotonic() + self.max_wait_s + 1.0  # should the clock stand
        waited = False
        for key, limit in buckets:
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

    def _buckets(self, family: str, scoped: str | None) -> list[tuple[str, OutboundLimit]]:
        """The buckets a call of ``family`` into ``scoped`` (its chat or resource) takes a
        token of: the narrow ones first (they run dry first), then the bot-wide ones."""
        narrow: list[tuple[str, OutboundLimit]] = []
        wide: list[tuple[str, OutboundLimit]] = []
        for limit in self.limits(family):
            if limit.scope == "bot":
                wide.append((f"ratelimit:{self.table.platform}:{family}:bot", limit))
            elif scoped is not None:  # no chat known: only the bot-wide buckets apply
                narrow.append((f"ratelimit:{self.table.platform}:{family}:{scoped}", limit))
        return narrow + wide

    def _take_or_throttle(self, buckets: list[tuple[str, OutboundLimit]]) -> None:
        """`no_wait()`: take a token of each bucket now, or raise `Throttled`. A bucket
        with callers in its line is not asked (it would take their token): the wait is
        then what the line needs, a token's time for each of them. Every line is looked
        at before any token is taken; a bucket found empty after another's token was
        taken leaves that token taken (owed, see the module docstring)."""
        for key, limit in buckets:
            with self._lock:
                ahead = len(self._lines.get(key, ()))
            if ahead:
                self._throttle(ahead / limit.rate)
        for key, limit in buckets:
            turn = self._queue(key)
            try:
                first = self._is_first(key, turn)
                wait = self._take(key, limit) if first else 1.0 / limit.rate
            finally:
                self._dequeue(key, turn)
            if wait > 0:
                self._throttle(wait)

    def _throttle(self, wait: float) -> NoReturn:
        with self._lock:
            self.throttled += 1
        raise Throttled(max(PACE_POLL_S, min(wait, self.max_wait_s)))

    def _is_first(self, key: str, turn: object) -> bool:
        with self._lock:
            line = self._lines.get(key)
            return line is not None and bool(line) and line[0] is turn

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

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

Writes that cannot wait (the text of a segment closing before a question) are
*noted* (`ChatRateLimiter.note()`): their token is taken even from an empty bucket, which
then owes it, so the writes that can wait wait longer.

A store that fails (`StateStoreUnavailable`) lets the write go: the platform's 429 is
still handled where it was before.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass

from channelkit.errors import ConfigurationError, StateStoreUnavailable, Throttled
from channelkit.runtime import Clock
from channelkit.state import MemoryStore, StateStore

__all__ = [
    "DEFAULT_MAX_WAIT_S",
    "STREAM_KEEP",
    "TELEGRAM_GROUP",
    "TELEGRAM_PRIVATE",
    "ChatLimit",
    "ChatRateLimiter",
    "RateGate",
    "Throttled",
    "telegram_chat_limit",
]

logger = logging.getLogger(__name__)

#: Seconds a message that must arrive waits for a token before it goes without one.
DEFAULT_MAX_WAIT_S = 60.0
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

    def stream_wait(self, chat_id: str) -> float:
        """A streamed preview: 0.0 when it may be written now (its token is taken), else
        the seconds until it may ask again (`STREAM_KEEP` tokens stay for messages)."""
        return self._take(chat_id, STREAM_KEEP)

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

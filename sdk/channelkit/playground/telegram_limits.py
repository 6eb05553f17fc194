"""The Telegram emulator's per-chat rate limits (off until asked for).

Telegram limits how fast a bot writes into one chat: about one message a second in a
private chat (short bursts allowed) and 20 messages a minute in a group; edits and drafts
count too. Past them it answers 429 with ``parameters.retry_after``. `ChatLimits`
enforces that with one token bucket per chat over every message write
(`LIMITED_METHODS`), counting each refusal (``rejected_429`` in the emulator's state), so
a test can assert that a bot stayed inside the limits.

``POST /_emulator/limits`` with ``{"enabled": true}`` turns them on (``false`` off);
optional numbers ``private_per_second``, ``private_burst``, ``group_per_minute`` and
``group_burst`` change the budgets; the answer (and ``GET /_emulator/limits``) shows the
settings and the count. A reset of the emulator turns them off and zeroes the count.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from channelkit.playground.emulator import HttpReply

__all__ = ["LIMITED_METHODS", "LIMITS_PATH", "ChatLimits"]

#: The control path.
LIMITS_PATH = "/_emulator/limits"
#: Bot API methods (lower case) that write a message into a chat: each takes a token.
LIMITED_METHODS = frozenset(
    {
        "sendmessage",
        "editmessagetext",
        "sendmessagedraft",
        "sendphoto",
        "senddocument",
        "sendvoice",
    }
)
#: Chats whose buckets are kept at once (the least recently used goes past it).
MAX_CHATS = 10_000

_DEFAULTS: dict[str, float] = {
    "private_per_second": 1.0,
    "private_burst": 30.0,
    "group_per_minute": 20.0,
    "group_burst": 20.0,
}


class ChatLimits:
    """Token buckets per chat on ``clock`` (seconds; monotonic by default). Thread-safe."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self.enabled = False
        self.settings = dict(_DEFAULTS)
        self.rejected = 0
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    @property
    def clock(self) -> Callable[[], float]:
        """The clock the buckets fill on (a test may hand its `FakeClock`'s ``now``)."""
        return self._clock

    @clock.setter
    def clock(self, clock: Callable[[], float]) -> None:
        self._clock = clock

    def check(self, chat_id: object) -> int | None:
        """Take a token of ``chat_id``'s bucket: None when the write may go, else the
        seconds of ``retry_after`` (the refusal is counted)."""
        if not self.enabled:
            return None
        chat = str(chat_id)
        group = chat.startswith("-")
        with self._lock:
            if group:
                rate = self.settings["group_per_minute"] / 60.0
                burst = self.settings["group_burst"]
            else:
                rate, burst = self.settings["private_per_second"], self.settings["private_burst"]
            now = self._clock()
            tokens, then = self._buckets.pop(chat, (burst, now))
            tokens = min(burst, tokens + max(0.0, now - then) * rate)
            refused: int | None = None
            if tokens >= 1.0:
                tokens -= 1.0
            else:
                refused = max(1, math.ceil((1.0 - tokens) / rate))
                self.rejected += 1
            self._buckets[chat] = (tokens, now)
            while len(self._buckets) > MAX_CHATS:
                self._buckets.popitem(last=False)
            return refused

    def refusal(self, retry_after: int) -> HttpReply:
        """The 429 Telegram answers past a limit."""
        return HttpReply(
            429,
            {
                "ok": False,
                "error_code": 429,
                "description": f"Too Many Requests: retry after {retry_after}",
                "parameters": {"retry_after": retry_after},
            },
        )

    def view(self) -> dict[str, Any]:
        with self._lock:
            return {"enabled": self.enabled, **self.settings, "rejected_429": self.rejected}

    def reset(self) -> None:
        with self._lock:
            self.enabled = False
            self.settings = dict(_DEFAULTS)
            self.rejected = 0
            self._buckets.clear()

    def control(self, method: str, path: str, data: Any) -> HttpReply | None:
        """``GET`` / ``POST /_emulator/limits``; None for any other path."""
        if path != LIMITS_PATH:
            return None
        if method == "GET":
            return HttpReply(200, self.view())
        if method != "POST":
            return HttpReply(405, {"error": "method not allowed"})
        body = data if isinstance(data, dict) else {}
        enabled = body.get("enabled", True)
        if not isinstance(enabled, bool):
            return HttpReply(400, {"error": "enabled must be true or false"})
        changes: dict[str, float] = {}
        for name in _DEFAULTS:
            if name not in body:
                continue
            value = body[name]
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                return HttpReply(400, {"error": f"{name} must be a number > 0"})
            if name.endswith("burst") and value < 1:
                return HttpReply(400, {"error": f"{name} must be >= 1"})
            changes[name] = float(value)
        with self._lock:
            self.enabled = enabled
            self.settings.update(changes)
            self._buckets.clear()
        return HttpReply(200, self.view())

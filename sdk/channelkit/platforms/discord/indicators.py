"""Discord typing indicator: one keep-alive per channel, on the single scheduler.

Discord shows "<bot> is typing..." for about 10 seconds after `POST
/channels/{id}/typing` (or until the bot posts). `TypingIndicator` sends it when the
first run of a channel starts and again every `interval_s` (8 s by default) while any
run of that channel works; the timer is one scheduler handle per channel (never a
sleeping thread), cancelled when the channel's last run ends. Repeated terminal events
change nothing.

While a run of the channel waits for the person (a question or an approval:
`pause(channel, key)`), nothing is sent: the ticks keep coming but skip the send until
every wait ended (`resume(channel, key)`), which sends at once.

Sends run on the pool (`submit`), never on the caller's thread; a failed send is logged
at debug level and ignored (an indicator never fails a run). At most `MAX_CHANNELS`
channels have a live keep-alive; beyond that new channels get none.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["MAX_CHANNELS", "TypingIndicator"]

logger = logging.getLogger(__name__)

#: Channels with a live keep-alive at most (and waits per channel).
MAX_CHANNELS = 1_000


@dataclass(eq=False)
class _Typing:
    channel: str
    runs: set[str] = field(default_factory=set)
    waiting: set[str] = field(default_factory=set)
    handle: Any = None


class TypingIndicator:
    """Per-channel typing keep-alive; see the module docstring.

    `send(channel_id)` makes one typing call (it may raise). `scheduler.call_later(delay,
    fn)` returns a handle with `cancel()`; `submit(fn)` runs `fn` on the pool.
    """

    def __init__(
        self,
        send: Callable[[str], Any],
        *,
        scheduler: Any,
        submit: Callable[[Callable[[], Any]], Any],
        interval_s: float = 8.0,
    ) -> None:
        self._send = send
        self._scheduler = scheduler
        self._submit = submit
        self._interval_s = interval_s
        self._lock = threading.Lock()
        self._channels: dict[str, _Typing] = {}
        #: typing calls made (tests, diagnostics)
        self.sent = 0

    def start(self, channel: str, run_id: str) -> None:
        """A run in `channel` started: type now unless the channel already does."""
        with self._lock:
            entry = self._channels.get(channel)
            if entry is not None:
                entry.runs.add(run_id)
                return
            if len(self._channels) >= MAX_CHANNELS:
                logger.warning("discord typing: too many active channels; indicator skipped")
                return
            entry = _Typing(channel, runs={run_id})
            self._channels[channel] = entry
            entry.handle = self._scheduler.call_later(self._interval_s, self._tick, entry)
        self._submit(lambda: self._send_once(entry))

    def stop(self, channel: str, run_id: str) -> None:
        """A run ended: stop when it was the channel's last run (idempotent)."""
        with self._lock:
            entry = self._channels.get(channel)
            if entry is None:
                return
            entry.runs.discard(run_id)
            if entry.runs:
                return
            del self._channels[channel]
            handle, entry.handle = entry.handle, None
        if handle is not None:
            handle.cancel()

    def pause(self, channel: str, key: str) -> None:
        """The channel waits for the person (`key` names the wait): no typing."""
        with self._lock:
            entry = self._channels.get(channel)
            if entry is not None and len(entry.waiting) < MAX_CHANNELS:
                entry.waiting.add(key)

    def resume(self, channel: str, key: str) -> None:
        """The wait `key` ended: type again at once when no other wait is left."""
        with self._lock:
            entry = self._channels.get(channel)
            if entry is None or key not in entry.waiting:
                return
            entry.waiting.discard(key)
            if entry.waiting:
                return
        self._submit(lambda: self._send_once(entry))

    def resume_all(self, channel: str) -> None:
        """The run went on (its agent produced output): every wait of the channel ended;
        type again at once if any was paused."""
        with self._lock:
            entry = self._channels.get(channel)
            if entry is None or not entry.waiting:
                return
            entry.waiting.clear()
        self._submit(lambda: self._send_once(entry))

    def is_paused(self, channel: str) -> bool:
        """True while a run of the channel waits for the person."""
        with self._lock:
            entry = self._channels.get(channel)
            return entry is not None and bool(entry.waiting)

    def active(self, channel: str) -> bool:
        """True while a run of the channel works (paused or not)."""
        with self._lock:
            return channel in self._channels

    def _tick(self, entry: _Typing) -> None:
        with self._lock:
            if self._channels.get(entry.channel) is not entry:
                return
            entry.handle = self._scheduler.call_later(self._interval_s, self._tick, entry)
        self._send_once(entry)

    def _send_once(self, entry: _Typing) -> None:
        with self._lock:
            if self._channels.get(entry.channel) is not entry or entry.waiting:
                return
            self.sent += 1
        try:
            self._send(entry.channel)
        except Exception as exc:
            logger.debug("discord typing failed: %s", type(exc).__name__)

    def close(self) -> None:
        """Stop every keep-alive."""
        with self._lock:
            entries = list(self._channels.values())
            self._channels.clear()
        for entry in entries:
            if entry.handle is not None:
                entry.handle.cancel()

"""Telegram typing keep-alive: one per chat, driven by the single runtime scheduler.

Telegram shows ``typing`` for at most 5 seconds (or until the bot's next message), so
the adapter re-sends ``sendChatAction typing`` every 4 seconds while any run in that
chat is active. `TypingKeepAlive` keeps one entry per chat holding the set of
active run ids and one scheduler handle: the first run sends at once and arms the
timer; later runs in the same chat only join the set (no second interval); the timer is
cancelled when the chat's last run ends. Repeated terminal events are no-ops.

Sends happen on the worker pool (``submit``), never on the caller's thread, and a
failed send is logged and ignored: indicators never fail a task. The number of chats
with a live keep-alive is capped (1,000); beyond it new chats get no indicator.

While a run of the chat waits for the person (a question or permission request,
`TypingKeepAlive.pause()`), no ``typing`` is sent: the timer keeps ticking but
sends nothing until every wait of the chat ended (`TypingKeepAlive.resume()`, or
the optional ``still_waiting(key)`` predicate says the wait is over at a tick or at
`TypingKeepAlive.refresh()`); then ``typing`` is sent again at once.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["TypingKeepAlive"]

logger = logging.getLogger(__name__)


@dataclass(eq=False)
class _ChatTyping:
    chat_id: int | str
    thread_id: int | None
    runs: set[str] = field(default_factory=set)
    handle: Any = None
    waiting: set[str] = field(default_factory=set)  # keys of the person's pending answers


class TypingKeepAlive:
    """Per-chat typing keep-alive.

    ``send(chat_id, thread_id)`` performs one ``sendChatAction typing`` (it may raise;
    errors are logged). ``scheduler.call_later(delay, fn) -> handle`` with
    ``handle.cancel()`` is the single runtime scheduler; ``submit(fn)`` runs ``fn`` on
    the pool.
    """

    MAX_CHATS = 1000

    def __init__(
        self,
        send: Callable[[int | str, int | None], Any],
        *,
        scheduler: Any,
        submit: Callable[[Callable[[], Any]], Any],
        interval_s: float = 4.0,
        still_waiting: Callable[[str], bool] | None = None,
    ) -> None:
        self._send = send
        self._still_waiting = still_waiting
        self._scheduler = scheduler
        self._submit = submit
        self._interval_s = interval_s
        self._lock = threading.Lock()
        self._chats: dict[str, _ChatTyping] = {}

    @staticmethod
    def _key(chat_id: int | str, thread_id: int | None) -> str:
        return f"{chat_id}\0{thread_id if thread_id is not None else ''}"

    def start(self, chat_id: int | str, run_id: str, thread_id: int | None = None) -> None:
        """A run in ``chat_id`` started: send typing now unless the chat already types."""
        key = self._key(chat_id, thread_id)
        with self._lock:
            entry = self._chats.get(key)
            if entry is not None:
                entry.runs.add(run_id)
                return
            if len(self._chats) >= self.MAX_CHATS:
                logger.warning("telegram typing: too many active chats; indicator skipped")
                return
            entry = _ChatTyping(chat_id=chat_id, thread_id=thread_id, runs={run_id})
            self._chats[key] = entry
            entry.handle = self._scheduler.call_later(self._interval_s, lambda: self._tick(entry))
        self._submit(lambda: self._send_once(entry))

    def stop(self, chat_id: int | str, run_id: str, thread_id: int | None = None) -> None:
        """A run ended: stop the keep-alive when it was the chat's last run (idempotent)."""
        key = self._key(chat_id, thread_id)
        with self._lock:
            entry = self._chats.get(key)
            if entry is None:
                return
            entry.runs.discard(run_id)
            if entry.runs:
                return
            del self._chats[key]
            handle, entry.handle = entry.handle, None
        if handle is not None:
            handle.cancel()

    def stop_chat(self, chat_id: int | str, thread_id: int | None = None) -> None:
        """Stop the chat's keep-alive regardless of its runs (session died)."""
        key = self._key(chat_id, thread_id)
        with self._lock:
            entry = self._chats.pop(key, None)
            handle = entry.handle if entry is not None else None
            if entry is not None:
                entry.handle = None
        if handle is not None:
            handle.cancel()

    def pause(self, chat_id: int | str, key: str, thread_id: int | None = None) -> None:
        """The chat waits for the person (``key`` names the request): stop sending."""
        with self._lock:
            entry = self._chats.get(self._key(chat_id, thread_id))
            if entry is not None and len(entry.waiting) < self.MAX_CHATS:
                entry.waiting.add(key)

    def resume(self, chat_id: int | str, key: str, thread_id: int | None = None) -> None:
        """The wait ``key`` ended: send typing again at once when no other wait is left."""
        with self._lock:
            entry = self._chats.get(self._key(chat_id, thread_id))
            if entry is None or key not in entry.waiting:
                return
            entry.waiting.discard(key)
            if entry.waiting:
                return
        self._submit(lambda: self._send_once(entry))

    def refresh(self, chat_id: int | str, thread_id: int | None = None) -> None:
        """Drop the waits ``still_waiting`` says are over (resuming typing if none is left)."""
        with self._lock:
            entry = self._chats.get(self._key(chat_id, thread_id))
            if entry is None or not entry.waiting:
                return
        if self._prune(entry):
            self._submit(lambda: self._send_once(entry))

    def is_paused(self, chat_id: int | str, thread_id: int | None = None) -> bool:
        """True while a run of the chat waits for the person."""
        with self._lock:
            entry = self._chats.get(self._key(chat_id, thread_id))
            return entry is not None and bool(entry.waiting)

    def _prune(self, entry: _ChatTyping) -> bool:
        """Forget finished waits; True when this emptied the chat's waits."""
        check = self._still_waiting
        if check is None:
            return False
        with self._lock:
            keys = list(entry.waiting)
        over = []
        for key in keys:
            try:
                if not check(key):
                    over.append(key)
            except Exception:
                logger.debug("still_waiting failed", exc_info=True)
        if not over:
            return False
        with self._lock:
            before = bool(entry.waiting)
            entry.waiting.difference_update(over)
            return before and not entry.waiting

    def close(self) -> None:
        """Cancel every keep-alive."""
        with self._lock:
            entries = list(self._chats.values())
            self._chats.clear()
        for entry in entries:
            handle, entry.handle = entry.handle, None
            if handle is not None:
                handle.cancel()

    def active_chats(self) -> int:
        """Number of chats with a live keep-alive."""
        with self._lock:
            return len(self._chats)

    def _tick(self, entry: _ChatTyping) -> None:
        with self._lock:
            if self._chats.get(self._key(entry.chat_id, entry.thread_id)) is not entry:
                return  # stopped (or replaced) meanwhile
            entry.handle = self._scheduler.call_later(self._interval_s, lambda: self._tick(entry))
            waiting = bool(entry.waiting)
        if waiting:
            self._prune(entry)
        self._send_once(entry)

    def _send_once(self, entry: _ChatTyping) -> None:
        with self._lock:
            if self._chats.get(self._key(entry.chat_id, entry.thread_id)) is not entry:
                return
            if entry.waiting:
                return  # the person's turn: no typing while a question waits
        try:
            self._send(entry.chat_id, entry.thread_id)
        except Exception as exc:
            logger.warning("telegram sendChatAction failed: %s", type(exc).__name__)

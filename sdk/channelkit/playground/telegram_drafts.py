"""``sendMessageDraft`` in the Telegram emulator: the bot's message while it is written.

`DraftChat` is mixed into `TelegramEmulator`.
A draft (private chat; ``draft_id`` non-zero; text 0-4,096 characters, empty: the
"Thinking..." placeholder) is shown in the chat view until the bot's next ``sendMessage``
replaces it, or for `DRAFT_SECONDS` without a newer draft (Telegram: a 30-second
preview). Every draft shown is kept with its arrival time (`DraftChat.drafts()`).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from channelkit.playground.emulator import HttpReply

__all__ = ["DRAFT_SECONDS", "MAX_DRAFTS", "DraftChat"]

#: How long a draft stays visible without a newer one (seconds).
DRAFT_SECONDS = 30.0
#: Drafts remembered by `DraftChat.drafts()` (oldest dropped).
MAX_DRAFTS = 1_000
_MAX_TEXT = 4096


def _bad(description: str) -> HttpReply:
    return HttpReply(
        400, {"ok": False, "error_code": 400, "description": "Bad Request: " + description}
    )


class DraftChat:
    """The draft state of the emulated private chat (uses the emulator's lock)."""

    _lock: threading.RLock  # the emulator's lock
    _draft: dict[str, Any] | None = None

    if TYPE_CHECKING:  # provided by TelegramEmulator / EmulatorBase

        def _chat_problem(self, params: Mapping[str, Any]) -> HttpReply | None: ...

        def _touch(self) -> None: ...

    def _init_drafts(self) -> None:
        self._draft = None  # the live draft
        self._drafts: deque[dict[str, Any]] = deque(maxlen=MAX_DRAFTS)

    def _clear_draft_locked(self) -> None:
        """The bot sent a message: it replaces the draft."""
        self._draft = None

    def _send_message_draft(self, params: Mapping[str, Any]) -> HttpReply:
        problem = self._chat_problem(params)
        if problem is not None:
            return problem
        raw = params.get("draft_id")
        try:
            draft_id = int(raw) if raw is not None and not isinstance(raw, bool) else 0
        except (TypeError, ValueError):
            draft_id = 0
        if draft_id == 0:
            return _bad("draft_id must be non-zero")
        text = params.get("text", "")
        if not isinstance(text, str):
            return _bad("wrong parameter text in request")
        if len(text) > _MAX_TEXT:
            return _bad("TEXT_TOO_LONG")
        with self._lock:
            self._draft = {
                "draftId": draft_id,
                "text": text,
                "parseMode": params.get("parse_mode") or None,
                "at": time.time(),
            }
            self._drafts.append({"draftId": draft_id, "text": text, "monotonic": time.monotonic()})
            self._touch()
        return HttpReply(200, {"ok": True, "result": True})

    def _live_draft(self) -> dict[str, Any] | None:
        draft = self._draft
        if draft is None or time.time() - draft["at"] > DRAFT_SECONDS:
            return None
        return {"draftId": draft["draftId"], "text": draft["text"], "parseMode": draft["parseMode"]}

    def draft(self) -> dict[str, Any] | None:
        """The draft the chat shows now (``{"draftId", "text", "parseMode"}``; ``text``
        ``""`` is the thinking placeholder), None when none is live."""
        with self._lock:
            return self._live_draft()

    def drafts(self) -> list[dict[str, Any]]:
        """Every draft shown, oldest first: ``draftId``, ``text`` and ``monotonic`` (its
        arrival on ``time.monotonic()``)."""
        with self._lock:
            return [dict(d) for d in self._drafts]

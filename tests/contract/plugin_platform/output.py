"""`TinychatOutput`, the plug-in platform's `OutputSurface`: one message per segment,
posted on its first text with a Stop button and edited as text comes; closed completed
(no buttons), cancelled ("— Stopped.") or failed ("— Failed.")."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from channelkit.core import OutputSegmentContext

from plugin_platform.api import MAX_LIVE, TinychatApi

STOP_PREFIX = "stop:"
MARKERS = {"cancelled": "— Stopped.", "failed": "— Failed."}


@dataclass
class _Live:
    segment: OutputSegmentContext
    text: str = ""
    message_id: str | None = None
    stop_claimed: bool = False


class TinychatOutput:
    """The `OutputSurface`: one message per segment (see the module docstring)."""

    def __init__(self, api: TinychatApi) -> None:
        self._api = api
        self._lock = threading.Lock()
        self._live: dict[str, _Live] = {}

    def open_segment(self, segment: OutputSegmentContext) -> None:
        """Nothing to show yet: the message is posted with the first text."""

    def append(self, segment: OutputSegmentContext, chunk: str) -> bool:
        with self._lock:
            live = self._live.get(segment.segment_id)
            if live is None:
                if len(self._live) >= MAX_LIVE:
                    return False
                live = self._live[segment.segment_id] = _Live(segment)
            live.text += chunk
        stop = [[{"text": "Stop", "data": STOP_PREFIX + segment.segment_id}]]
        if live.message_id is None:
            live.message_id = self._api.post(segment.target.chat_id, live.text, stop)
        else:
            self._api.edit(live.message_id, live.text, stop)
        return True

    def close_segment(self, segment: OutputSegmentContext, reason: str) -> None:
        with self._lock:
            live = self._live.pop(segment.segment_id, None)
        if live is None or live.message_id is None:
            return
        marker = MARKERS.get(str(reason))
        self._api.edit(live.message_id, live.text + (f"\n\n{marker}" if marker else ""), [])

    def shows(self, segment: OutputSegmentContext) -> bool:
        """True while a message shows the open segment."""
        with self._lock:
            live = self._live.get(segment.segment_id)
            return live is not None and live.message_id is not None

    def claim_stop(self, segment_id: str) -> OutputSegmentContext | None:
        """The live segment behind a Stop button, claimed once (None: gone or claimed)."""
        with self._lock:
            live = self._live.get(segment_id)
            if live is None or live.stop_claimed:
                return None
            live.stop_claimed = True
            return live.segment

    def owner(self, segment_id: str) -> OutputSegmentContext | None:
        with self._lock:
            live = self._live.get(segment_id)
            return live.segment if live is not None else None

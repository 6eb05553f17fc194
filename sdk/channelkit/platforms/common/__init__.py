"""Presentation machinery shared by the platform adapters (DingTalk, Feishu, Telegram).

* `SnapshotWriter` - coalesced, rate-limited full-snapshot writes of one output
  segment (one write in flight, one replaceable pending snapshot, >= 500 ms apart,
  20,000-char bounded content, ``finalize`` waits for the write in flight).
* `OneShotClaim` / `StateCell` - lock-protected compare-and-set claims;
  `first_notice()` - one notice per foreign actor per card, bounded.
* `TombstoneStore` - terminal records (correlation + state only), 10 minute TTL on
  the injected clock, at most 1,000 entries.
* `bound_text()` - the 20,000-character cap with its truncation marker.
* `StreamedText` - what a run already showed of its text (length + digest), so
  the final text is sent without that prefix.
* `question_deadline()` / `EXPIRY_MARGIN` - a question's expiry, strictly
  before core's deadline for the pending request (``context.expires_at``).
"""

from __future__ import annotations

from channelkit.platforms.common.claims import (
    MAX_NOTICED_ACTORS,
    OneShotClaim,
    StateCell,
    first_notice,
)
from channelkit.platforms.common.deadlines import EXPIRY_MARGIN, question_deadline
from channelkit.platforms.common.snapshot_writer import MIN_FLUSH_INTERVAL, SnapshotWriter
from channelkit.platforms.common.streamed import StreamedText
from channelkit.platforms.common.text import MAX_VISIBLE_CHARS, TRUNCATION_MARKER, bound_text
from channelkit.platforms.common.tombstones import (
    TOMBSTONE_MAXSIZE,
    TOMBSTONE_TTL,
    TombstoneStore,
)
from channelkit.platforms.common.types import Clock, Scheduler, SerialSubmit, TimerHandle

__all__ = [
    "EXPIRY_MARGIN",
    "MAX_NOTICED_ACTORS",
    "MAX_VISIBLE_CHARS",
    "MIN_FLUSH_INTERVAL",
    "TOMBSTONE_MAXSIZE",
    "TOMBSTONE_TTL",
    "TRUNCATION_MARKER",
    "Clock",
    "OneShotClaim",
    "Scheduler",
    "SerialSubmit",
    "SnapshotWriter",
    "StateCell",
    "StreamedText",
    "TimerHandle",
    "TombstoneStore",
    "bound_text",
    "first_notice",
    "question_deadline",
]

"""Queue notices that move: one editable notice per queued run, kept up to date.

``ChannelBase`` calls `on_run_queued()` on the run's
lane when a person's run must wait for a slot (``event.first``) and again each time its
place in the queue changes. The default sends the first notice as text and ignores the
moves. An adapter whose platform can edit a message (or a card) it sent keeps the
notice current with `QueueNotices`:

* ``on_run_queued(event)`` -> `QueueNotices.queued()`: the first event shows the
  notice (the adapter's ``show`` returns a handle to edit it by, or None when it could
  only send text); later events record the new position;
* the notice is edited in place (the adapter's ``edit``) at most once per ``interval``
  seconds (default 1 s): a move inside the interval is held and coalesced with the
  moves after it, and one timer on the channel's scheduler writes the latest position
  when the interval is over. A queue position only ever goes down, so a position
  higher than the one known is stale and ignored;
* ``started`` of the run -> `QueueNotices.started()`: at once, the notice is
  finalized as "Starting now." (the timer is cancelled); a terminal event of a run that
  never started -> `QueueNotices.forget()`, which finalizes a notice still shown as
  "Stopped before it started." (a queued run dropped by ``/stop all``).

Every write for a run happens on that run's lane (the hook calls are there already;
the timer posts its write there), so the final "Starting now." is never overtaken by a
position update. A failed write is logged and never fails the run. Platforms that
cannot edit (Weixin) keep the default single notice.

A notice speaks the language of its run's owner: the host's ``messages_for(owner)``
(`ChannelBase.messages_for()`) picks the catalog texts when the notice is first shown.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

from channelkit.core.catalog import Messages, en, messages
from channelkit.core.text import MSG_QUEUE_DROPPED, format_queued
from channelkit.core.types import RunQueuedEvent
from channelkit.runtime.clock import Clock
from channelkit.runtime.scheduler import TimerHandle

if TYPE_CHECKING:
    from channelkit.runtime.scheduler import Scheduler
    from channelkit.runtime.serial import KeyedSerialQueue

__all__ = ["MSG_STARTING", "UPDATE_INTERVAL", "NoticeHost", "QueueNotices"]

logger = logging.getLogger(__name__)

#: What a queue notice says once its run has started.
MSG_STARTING = en("queue.starting")
#: Seconds between two position updates of one notice (at most).
UPDATE_INTERVAL = 1.0

H = TypeVar("H")


class NoticeHost(Protocol):
    """What `QueueNotices` uses of its channel (a ``ChannelBase`` is one)."""

    @property
    def name(self) -> str:
        """The channel's name (logs)."""
        ...

    @property
    def clock(self) -> Clock:
        """The channel's clock (update intervals)."""
        ...

    @property
    def scheduler(self) -> Scheduler:
        """The channel's scheduler (the deferred update)."""
        ...

    @property
    def lanes(self) -> KeyedSerialQueue:
        """The channel's serial lanes (a run's writes go on ``("run", run_id)``)."""
        ...


@dataclass
class _Notice(Generic[H]):
    handle: H
    shown: int  # the position on the notice
    want: int  # the newest position known
    written_at: float  # clock time of the last write (the show counts)
    timer: TimerHandle | None = None
    texts: Messages = field(default_factory=messages)  # the language of the run's owner


class QueueNotices(Generic[H]):
    """Editable queue notices of one channel; see the module docstring.

    ``show(event, text) -> handle | None`` sends the first notice; ``edit(handle, text,
    final)`` rewrites it (``final`` for the last write, "Starting now."). Both are
    called on the run's lane. At most ``max_notices`` notices are
    tracked (a further one is shown and never updated).
    """

    def __init__(
        self,
        channel: NoticeHost,
        *,
        show: Callable[[RunQueuedEvent, str], H | None],
        edit: Callable[[H, str, bool], None],
        interval: float = UPDATE_INTERVAL,
        max_notices: int = 1000,
        starting_text: str = MSG_STARTING,
    ) -> None:
        if not (math.isfinite(interval) and interval >= 0):
            raise ValueError(f"interval: must be seconds >= 0, got {interval!r}")
        self._ch = channel
        self._show = show
        self._edit = edit
        self.interval = float(interval)
        self.max_notices = max_notices
        self.starting_text = starting_text
        self._lock = threading.Lock()
        self._notices: dict[str, _Notice[H]] = {}
        # moves that reached the lane before the run's first notice (deferred ACKs)
        self._early: dict[str, int] = {}
        self._closed = False

    @property
    def live(self) -> int:
        """Notices being kept up to date."""
        with self._lock:
            return len(self._notices)

    # -- hook entry points (the run's lane) ---------------------------------------------

    def queued(self, event: RunQueuedEvent) -> None:
        """Call from ``on_run_queued``: show the notice, or record its new position."""
        run_id = event.run_id
        with self._lock:
            if self._closed:
                return
            notice = self._notices.get(run_id)
            if notice is None and not event.first:
                early = self._early.get(run_id)
                if early is not None or len(self._early) < self.max_notices:
                    self._early[run_id] = event.ahead if early is None else min(early, event.ahead)
                return
            if notice is None:
                ahead = min(event.ahead, self._early.pop(run_id, event.ahead))
            elif event.first or event.ahead >= notice.want:
                return  # a duplicate, or older than what the notice knows
            else:
                notice.want = event.ahead
        if notice is None:
            self._show_first(event, max(0, ahead))
        else:
            self._due_or_later(run_id)

    def started(self, run_id: str) -> None:
        """Call on the run's ``started`` event: the notice says "Starting now."."""
        notice = self._drop(run_id)
        if notice is not None:
            self._write(notice, self.starting_text, final=True)

    def forget(self, run_id: str) -> None:
        """Call on a terminal event: stop updating the run's notice. A notice still
        tracked belongs to a run that ended without starting (``started`` drops it):
        it is finalized as dropped."""
        notice = self._drop(run_id)
        if notice is not None:
            self._write(notice, MSG_QUEUE_DROPPED, final=True)

    def close(self) -> None:
        """Stop every update (channel closing); the notices stay as they are."""
        with self._lock:
            self._closed = True
            notices = list(self._notices.values())
            self._notices.clear()
            self._early.clear()
        for notice in notices:
            if notice.timer is not None:
                notice.timer.cancel()

    # -- internals ----------------------------------------------------------------------

    def _show_first(self, event: RunQueuedEvent, ahead: int) -> None:
        texts = self._texts_for(event.owner.id if event.owner else None)
        handle = self._show(event, format_queued(ahead, texts))
        if handle is None:
            return
        notice = _Notice(handle, ahead, ahead, self._ch.clock.now(), texts=texts)
        with self._lock:
            if self._closed or len(self._notices) >= self.max_notices:
                return
            self._notices[event.run_id] = notice
            # a move that arrived while the notice was being sent
            early = self._early.pop(event.run_id, None)
            if early is not None and early < notice.want:
                notice.want = early
        if notice.want != notice.shown:
            self._due_or_later(event.run_id)

    def _due_or_later(self, run_id: str) -> None:
        """Write the newest position now if the interval is over, else once it is."""
        with self._lock:
            notice = self._notices.get(run_id)
            if notice is None or notice.timer is not None:
                return  # gone, or a write is already due later (it takes the newest)
            due = notice.written_at + self.interval
            if self._ch.clock.now() < due:
                try:
                    notice.timer = self._ch.scheduler.call_at(due, self._post_flush, run_id)
                except Exception:
                    logger.debug("queue notice update not scheduled", exc_info=True)
                return
        self._flush(run_id)

    def _post_flush(self, run_id: str) -> None:
        try:
            self._ch.lanes.post(("run", run_id), self._flush, run_id)
        except Exception:
            logger.debug("queue notice update not posted (pool closed)", exc_info=True)

    def _flush(self, run_id: str) -> None:
        with self._lock:
            notice = self._notices.get(run_id)
            if notice is None:
                return
            notice.timer = None
            if notice.want == notice.shown:
                return
            notice.shown = notice.want
            notice.written_at = self._ch.clock.now()
            text = format_queued(notice.want, notice.texts)
        self._write(notice, text, final=False)

    def _drop(self, run_id: str) -> _Notice[H] | None:
        with self._lock:
            self._early.pop(run_id, None)
            notice = self._notices.pop(run_id, None)
        if notice is not None and notice.timer is not None:
            notice.timer.cancel()
        return notice

    def _texts_for(self, person: str | None) -> Messages:
        """The owner's language: the host's ``messages_for`` (a ``ChannelBase`` has
        one), else English."""
        texts_for = getattr(self._ch, "messages_for", None)
        texts = texts_for(person) if callable(texts_for) else None
        return texts if isinstance(texts, Messages) else messages()

    def _write(self, notice: _Notice[H], text: str, *, final: bool) -> None:
        text = notice.texts.text(text)  # a catalog message in the owner's language
        try:
            self._edit(notice.handle, text, final)
        except Exception as exc:  # a notice never fails the run
            logger.info("[%s] queue notice not updated: %s", self._ch.name, exc)

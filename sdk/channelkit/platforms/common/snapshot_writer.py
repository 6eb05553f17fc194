"""A coalescing writer of full-text snapshots (one streaming card, one output segment).

Model output arrives as many small chunks; the platform wants a few full snapshots.
`SnapshotWriter` keeps the bounded text of one segment in memory and writes it
with these guarantees:

* **one write in flight** and **one replaceable pending snapshot** - a newer chunk
  replaces the pending snapshot instead of queueing another write;
* **at least** ``min_interval`` seconds (500 ms by default) between the start of one
  write and the start of the next, measured on the injected clock and driven by the
  single runtime scheduler (one timer per writer at most, never ``threading.Timer``);
* **bounded content**: at most ``max_chars`` characters (20,000), the oldest text dropped
  and a truncation marker kept in front of the tail;
* **failure latches**: if a write raises, the writer stops writing (the text is kept
  for the final delivery path) and ``failed`` becomes True;
* **a throttled write waits on the scheduler, never on its worker**: each write runs
  inside `channelkit.platforms.common.rate_limit.no_wait()`, so a platform call that
  would wait for a rate-limit token raises `Throttled` instead, before anything went
  out. That is not a failure (no latch, no ``on_error``): the snapshot stays pending
  (newer chunks keep replacing it) and the next flush is booked ``wait`` seconds later
  (and at least ``min_interval`` after the try) on the same single timer, so a chat
  over its budget gets fewer, larger writes and its pool worker is free meanwhile. A
  ``write`` that makes more than one call must be safe to run again after `Throttled`
  (the calls that went are not repeated);
* `finalize()` stops accepting text, cancels the timer, drops the pending snapshot
  (its text is already part of `content`) and waits - with a timeout - for the
  write in flight, then returns the final bounded text;
* **offsets** for append-only targets (``with_total=True``): ``write(snapshot, total)``
  also gets how many characters were appended in all (the snapshot's last character is
  character ``total`` of the whole text), so a writer that can only append (a stream)
  sends what is new since its last call even after the bounded text dropped its head.

Writes run through ``submit`` (typically the run's per-key serial queue, so they are
ordered with the adapter's other projections of the same run). Appending never blocks
on the network.

Example::

    writer = SnapshotWriter(lambda text: api.stream(track_id, text), clock=clock,
                            scheduler=scheduler, submit=lambda fn: serial.submit(run_id, fn),
                            ready=False)
    writer.append("Hel"); writer.append("lo")   # nothing written yet
    writer.start()                               # the card exists: flushing may begin
    ...
    final_text = writer.finalize(timeout=10.0)
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable

from channelkit.errors import Throttled
from channelkit.platforms.common.rate_limit import no_wait
from channelkit.platforms.common.text import MAX_VISIBLE_CHARS, TRUNCATION_MARKER, bound_text
from channelkit.platforms.common.types import Clock, Scheduler, SerialSubmit, TimerHandle

__all__ = ["MIN_FLUSH_INTERVAL", "MIN_THROTTLED_WAIT", "SnapshotWriter"]

logger = logging.getLogger(__name__)

#: Minimum seconds between two snapshot writes of one writer.
MIN_FLUSH_INTERVAL = 0.5
#: The shortest wait booked after a throttled write (a retry never spins).
MIN_THROTTLED_WAIT = 0.02


class _Arming:
    """Stands in for the timer handle while the timer is being armed (outside the lock)."""

    __slots__ = ()

    def cancel(self) -> bool:
        return False


class SnapshotWriter:
    """Coalesces appended text into rate-limited full snapshots; see the module docstring.

    ``write(snapshot)`` performs one platform write and raises on failure. ``ready=False``
    holds writes until `start()` (for example until the card has been created).
    ``on_error(exc)`` is called once when a write fails; a write that raises `Throttled`
    has not failed, it is tried again later. ``with_total=True`` calls
    ``write(snapshot, total)`` instead (see the module docstring).
    """

    def __init__(
        self,
        write: Callable[..., object],
        *,
        clock: Clock,
        scheduler: Scheduler,
        submit: SerialSubmit,
        min_interval: float = MIN_FLUSH_INTERVAL,
        max_chars: int = MAX_VISIBLE_CHARS,
        marker: str = TRUNCATION_MARKER,
        ready: bool = True,
        on_error: Callable[[BaseException], object] | None = None,
        with_total: bool = False,
    ) -> None:
        self._write: Callable[..., object] = write
        self._with_total = with_total
        self._total = 0  # characters appended in all (replace() starts over)
        self._pending_total = 0
        self._clock = clock
        self._scheduler = scheduler
        self._submit = submit
        self._min_interval = float(min_interval)
        self._max_chars = max_chars
        self._marker = marker
        self._on_error = on_error
        self._cond = threading.Condition(threading.Lock())
        self._content = ""
        self._pending: str | None = None
        self._ready = ready
        self._closed = False
        self._failed = False
        self._in_flight = False
        self._flush_queued = False
        self._timer: TimerHandle | _Arming | None = None
        self._last_write_at: float | None = None
        self._not_before: float | None = None  # a throttled write's retry, not sooner
        self._writes = 0
        self._throttled = 0

    # -- state ------------------------------------------------------------------------
    @property
    def content(self) -> str:
        """The bounded text accumulated so far."""
        with self._cond:
            return self._content

    @property
    def failed(self) -> bool:
        """True once a write has failed (no more writes are attempted)."""
        with self._cond:
            return self._failed

    @property
    def closed(self) -> bool:
        """True after `finalize()` or `close()`."""
        with self._cond:
            return self._closed

    @property
    def total_chars(self) -> int:
        """How many characters were appended in all (after `replace()`: its length)."""
        with self._cond:
            return self._total

    @property
    def has_pending(self) -> bool:
        """True while a snapshot is waiting to be written."""
        with self._cond:
            return self._pending is not None

    @property
    def write_count(self) -> int:
        """How many snapshot writes have been attempted (a throttled one is not: it
        went nowhere and is tried again)."""
        with self._cond:
            return self._writes

    @property
    def throttled_count(self) -> int:
        """How many writes were told to wait for the platform's rate limit (`Throttled`)."""
        with self._cond:
            return self._throttled

    # -- input ------------------------------------------------------------------------
    def append(self, chunk: str) -> bool:
        """Add ``chunk`` to the text and arrange a flush. False once closed."""
        with self._cond:
            if self._closed:
                return False
            if not chunk:
                return True
            self._content = bound_text(self._content + chunk, self._max_chars, self._marker)
            self._total += len(chunk)
            self._pending = self._content
            self._pending_total = self._total
            action = self._arrange_locked()
        if action is not None:
            action()
        return True

    def replace(self, text: str) -> bool:
        """Replace the whole text (bounded) and arrange a flush. False once closed."""
        with self._cond:
            if self._closed:
                return False
            self._content = bound_text(text, self._max_chars, self._marker)
            self._total = len(text)
            self._pending = self._content
            self._pending_total = self._total
            action = self._arrange_locked()
        if action is not None:
            action()
        return True

    def start(self, *, mark_written: bool = True) -> None:
        """Allow writes. ``mark_written`` counts "now" as the last write (the open)."""
        with self._cond:
            if self._ready:
                return
            self._ready = True
            if mark_written:
                self._last_write_at = self._clock.now()
            action = self._arrange_locked()
        if action is not None:
            action()

    # -- termination --------------------------------------------------------------------
    def finalize(self, timeout: float = 10.0) -> str:
        """Stop accepting text and return the final bounded text.

        Cancels the flush timer, drops the pending snapshot and waits up to ``timeout``
        seconds for the write in flight (if any) to finish.
        """
        with self._cond:
            self._close_locked()
            deadline = self._clock_monotonic() + max(0.0, timeout)
            while self._in_flight:
                remaining = deadline - self._clock_monotonic()
                if remaining <= 0:
                    logger.warning("snapshot write still in flight after %.1fs", timeout)
                    break
                self._cond.wait(remaining)
            return self._content

    def close(self) -> None:
        """Stop accepting text and writing without waiting (abandon)."""
        with self._cond:
            self._close_locked()

    # -- internals ----------------------------------------------------------------------
    @staticmethod
    def _clock_monotonic() -> float:
        # Waiting for another thread is real time, not the injected clock.
        return time.monotonic()

    def _close_locked(self) -> None:
        self._closed = True
        self._pending = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _arrange_locked(self) -> Callable[[], None] | None:
        """Decide the next flush; returns what the caller runs after releasing the lock.

        The scheduler and ``submit`` are never called under the writer's lock: a
        scheduler may run a due callback inline, and an inline ``submit`` runs the
        flush (which takes the lock) at once.
        """
        if (
            not self._ready
            or self._closed
            or self._failed
            or self._in_flight
            or self._flush_queued
            or self._timer is not None
            or self._pending is None
        ):
            return None
        now = self._clock.now()
        delay = 0.0
        if self._last_write_at is not None:
            delay = max(0.0, self._last_write_at + self._min_interval - now)
        if self._not_before is not None:
            delay = max(delay, self._not_before - now)
        if delay <= 0.0:
            self._flush_queued = True  # due now: no timer needed
            return self._submit_flush
        arming = _Arming()
        self._timer = arming
        return functools.partial(self._arm, arming, delay)

    def _arm(self, arming: _Arming, delay: float) -> None:
        handle = self._scheduler.call_later(delay, self._on_timer)
        with self._cond:
            if self._timer is arming:
                self._timer = handle
                return
        handle.cancel()  # closed (or already fired) while arming

    def _on_timer(self) -> None:
        with self._cond:
            self._timer = None
            if self._closed or self._failed or self._pending is None or self._flush_queued:
                return
            self._flush_queued = True
        self._submit_flush()

    def _submit_flush(self) -> None:
        try:
            self._submit(self._flush)
        except Exception:
            logger.exception("could not queue a snapshot write")
            with self._cond:
                self._flush_queued = False

    def _flush(self) -> None:
        with self._cond:
            self._flush_queued = False
            if self._closed or self._failed or self._pending is None:
                return
            snapshot = self._pending
            total = self._pending_total
            self._pending = None
            self._in_flight = True
            self._writes += 1
            self._last_write_at = self._clock.now()
            self._not_before = None
        error: BaseException | None = None
        throttled: float | None = None
        try:
            with no_wait():  # a rate-limited call raises Throttled: this worker never waits
                if self._with_total:
                    self._write(snapshot, total)
                else:
                    self._write(snapshot)
        except Throttled as exc:
            throttled = exc.wait
        except Exception as exc:
            error = exc
        with self._cond:
            self._in_flight = False
            if throttled is not None:
                # not written, not failed: the snapshot (or a newer one) goes later, at
                # least the interval after this try too (a call of it may have gone)
                self._writes -= 1
                self._throttled += 1
                self._not_before = self._clock.now() + max(throttled, MIN_THROTTLED_WAIT)
                if self._pending is None and not self._closed:
                    self._pending, self._pending_total = snapshot, total
            if error is not None:
                self._failed = True
                self._pending = None
            self._cond.notify_all()
            action = self._arrange_locked() if error is None else None
        if action is not None:
            action()
        if error is not None and self._on_error is not None:
            try:
                self._on_error(error)
            except Exception:
                logger.exception("snapshot writer error callback failed")

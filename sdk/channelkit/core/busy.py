"""Busy chat: what a person's message does while their conversation's run is going.

``ChannelConfig.busy`` picks one mode per channel; `BusyChat.admit()` applies it to
every person's message that starts a run (commands are handled before it):

* ``queue`` (default): the message becomes a run of its own, queued behind the running
  one. The person sees a queue notice at once (``on_run_queued``), edited in place as
  the queue moves on platforms that can edit what they sent.
* ``interrupt``: the conversation's running run is cancelled exactly (the run id seen
  when the message arrived, reason ``interrupt`` in its ``cancelled`` lifecycle event
  and in the log; its output shows the platform's stopped state) and the new message
  starts as soon as the cancellation ended. The cancel call waits on the agent, so it
  runs on the hook pool after the platform ACK. A run already delivering its final
  answer is not cancelled: the new message runs after it.
* ``collect``: messages are joined into one turn (their texts in order, separated by a
  blank line). The first message of an idle conversation waits ``collect_window``
  seconds (default 1.5; a timer on the channel's scheduler, measured on its clock) for
  more; a message arriving while a run of the conversation is busy is queued at once
  and the messages after it join it until it starts. A turn holds at most
  `COLLECT_MAX_MESSAGES` messages and `COLLECT_MAX_BYTES` bytes of text; the message
  that would exceed either starts the next turn (nothing is dropped), and the full
  turn is admitted at once, ahead of it, without waiting out its window. At most
  `MAX_COLLECTING` conversations collect at once; beyond that a message is queued
  as in ``queue`` mode.
* ``steer``: while the conversation's run is prompting, the text is handed to the
  running turn through the bridge's optional ``steer(session_id, text) -> bool``
  capability (`channelkit.agents.base.SteerableBridge`), after the ACK. A bridge
  without it, or one that refuses the text (``False``: no running turn, an agent that
  does not read steering, a full inbox), gets the message queued as in ``queue`` mode.
  ``FunctionAgent(steerable=True)`` takes it into ``Turn.steered()``; ACP agents have no
  such capability, so on them ``steer`` behaves as ``queue``. The handle of a steered
  message resolves with the result of the run that took it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future
from enum import Enum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from channelkit.agents.base import AgentBridge
    from channelkit.core.handles import RunHandle, RunResult
    from channelkit.core.runs import Run, RunTable
    from channelkit.runtime.clock import Clock
    from channelkit.runtime.pool import WorkerPool
    from channelkit.runtime.scheduler import Scheduler, TimerHandle

__all__ = [
    "BUSY_MODES",
    "COLLECT_MAX_BYTES",
    "COLLECT_MAX_MESSAGES",
    "MAX_COLLECTING",
    "MAX_COLLECT_WINDOW",
    "BusyChat",
    "BusyMode",
]

logger = logging.getLogger(__name__)


class BusyMode(str, Enum):
    """``ChannelConfig.busy``: what a message does while its conversation is busy."""

    QUEUE = "queue"
    INTERRUPT = "interrupt"
    COLLECT = "collect"
    STEER = "steer"

    def __str__(self) -> str:
        return self.value


#: Every busy mode, in the order the docs list them.
BUSY_MODES = tuple(mode.value for mode in BusyMode)
#: Longest collect window (seconds) a configuration may ask for.
MAX_COLLECT_WINDOW = 60.0
#: Messages joined into one collected turn at most.
COLLECT_MAX_MESSAGES = 20
#: Bytes (UTF-8) of text joined into one collected turn at most.
COLLECT_MAX_BYTES = 32 * 1024
#: Conversations collecting at once at most (each holds one turn being filled).
MAX_COLLECTING = 1000
#: What separates two collected messages in the joined turn.
COLLECT_SEPARATOR = "\n\n"

#: ``enqueue(run, defer, notice)``: admit a run (``notice=False``: no queue notice).
Enqueue = Callable[["Run", "list[Callable[[], None]] | None", bool], "RunHandle"]
#: ``cancel(session_id, run_id, reason) -> bool``: exact-run cancellation.
Cancel = Callable[[str, str, str], bool]


class _Batch:
    """A collected turn being filled: its run, its size, its window timer, and whether
    it was handed to admission (once: by its window's end, by the message that found it
    full, or at once when the conversation was busy)."""

    __slots__ = ("admitted", "bytes", "count", "run", "timer")

    def __init__(self, run: Run) -> None:
        self.run = run
        self.count = 1
        self.bytes = len(run.text.encode("utf-8"))
        self.timer: TimerHandle | None = None
        self.admitted = False


class BusyChat:
    """Applies ``ChannelConfig.busy`` to the runs of one channel; see the module
    docstring. ``ChannelBase`` builds one and calls `admit()` for every person's run.

    Collaborators: ``table`` (the channel's runs, to find a conversation's live run),
    ``bridge`` (the current agent bridge), ``enqueue`` (admission), ``cancel``
    (exact-run cancellation), ``scheduler``/``clock`` (the collect window) and ``pool``
    (work after the ACK).
    """

    def __init__(
        self,
        *,
        channel_name: str,
        mode: BusyMode,
        collect_window: float,
        table: RunTable,
        bridge: Callable[[], AgentBridge],
        enqueue: Enqueue,
        cancel: Cancel,
        scheduler: Scheduler,
        clock: Clock,
        pool: WorkerPool,
    ) -> None:
        self.channel_name = channel_name
        self.mode = BusyMode(mode)
        self.collect_window = float(collect_window)
        self._table = table
        self._bridge = bridge
        self._enqueue = enqueue
        self._cancel = cancel
        self._scheduler = scheduler
        self._clock = clock
        self._pool = pool
        self._lock = threading.Lock()
        #: session id -> the collected turn still taking messages (bounded)
        self._batches: dict[str, _Batch] = {}
        self._closed = False

    @property
    def collecting(self) -> int:
        """Conversations with a collected turn still taking messages."""
        with self._lock:
            return len(self._batches)

    @property
    def waiting_messages(self) -> int:
        """Messages in the collected turns still taking more (one turn per
        conversation at most: a full turn waits for its start without being counted)."""
        with self._lock:
            batches = list(self._batches.values())
        return sum(batch.count for batch in batches if _open_for_joining(batch.run))

    # -- entry point ------------------------------------------------------------------

    def admit(self, run: Run, defer: list[Callable[[], None]] | None = None) -> RunHandle:
        """Admit a person's ``run`` under the channel's busy mode; returns its handle
        at once (``defer`` as in ``ChannelBase.handle_inbound``: work that waits on
        anything runs after the ACK)."""
        if self.mode is BusyMode.INTERRUPT:
            return self._interrupt(run, defer)
        if self.mode is BusyMode.COLLECT:
            return self._collect(run, defer)
        if self.mode is BusyMode.STEER:
            return self._steer(run, defer)
        return self._enqueue(run, defer, True)

    def close(self) -> None:
        """Stop collecting (channel closing): each turn still in its window is
        cancelled, unsent (logged with its message count)."""
        with self._lock:
            self._closed = True
            batches = list(self._batches.values())
            self._batches.clear()
        for batch in batches:
            timer = batch.timer
            if timer is None or not timer.cancel():
                continue  # already admitted: the channel's close cancels it
            logger.warning(
                "[%s] busy=collect: %d collected message(s) of session %s not run "
                "(the channel closed)",
                self.channel_name,
                batch.count,
                batch.run.session_id,
            )
            _resolve_cancelled(batch.run)

    # -- interrupt --------------------------------------------------------------------

    def _interrupt(self, run: Run, defer: list[Callable[[], None]] | None) -> RunHandle:
        running = self._table.active_run(run.session_id)
        handle = self._enqueue(run, defer, running is None)
        if running is None or run.future.done():
            return handle
        victim = running.run_id

        def cancel() -> None:
            logger.info(
                "[%s] busy=interrupt: cancelling run %s of session %s (reason=interrupt) "
                "for run %s",
                self.channel_name,
                victim,
                run.session_id,
                run.run_id,
            )
            from channelkit.core.types import CancellationReason

            if not self._cancel(run.session_id, victim, CancellationReason.INTERRUPT):
                logger.info(
                    "[%s] busy=interrupt: run %s was not cancelled (ended or delivering); "
                    "run %s follows it",
                    self.channel_name,
                    victim,
                    run.run_id,
                )

        self._after_ack(defer, cancel)
        return handle

    # -- steer ------------------------------------------------------------------------

    def _steer(self, run: Run, defer: list[Callable[[], None]] | None) -> RunHandle:
        from channelkit.core.handles import RunHandle

        running = self._table.active_run(run.session_id)
        steer = getattr(self._bridge(), "steer", None)
        if running is None or not callable(steer) or not _prompting(running) or run.attachments:
            return self._enqueue(run, defer, True)  # steering hands over text only

        def hand_over() -> None:
            try:
                taken = bool(steer(run.session_id, run.text))
            except Exception as exc:
                logger.warning(
                    "[%s] busy=steer: the bridge's steer failed (%s); queued instead",
                    self.channel_name,
                    exc,
                )
                taken = False
            if taken:
                logger.info(
                    "[%s] busy=steer: message of run %s handed to running run %s",
                    self.channel_name,
                    run.run_id,
                    running.run_id,
                )
                running.future.add_done_callback(lambda done: _follow(run, done))
                return
            try:
                self._enqueue(run, None, True)
            except Exception as exc:  # closed meanwhile
                logger.warning("[%s] busy=steer: not queued: %s", self.channel_name, exc)
                _resolve_cancelled(run)

        self._after_ack(defer, hand_over)
        return RunHandle(run.run_id, run.session_id, run.future)

    # -- collect ----------------------------------------------------------------------

    def _collect(self, run: Run, defer: list[Callable[[], None]] | None) -> RunHandle:
        from channelkit.core.handles import RunHandle

        session = run.session_id
        size = len(run.text.encode("utf-8"))
        full: _Batch | None = None
        with self._lock:
            batch = self._batches.get(session)
            if batch is not None and self._join_locked(batch, run, size):
                return RunHandle(batch.run.run_id, session, batch.run.future)
            if batch is not None:
                del self._batches[session]  # started, or full: a new turn begins
                if not batch.admitted:  # full in its window: it goes first, now
                    batch.admitted = True
                    full = batch
            if len(self._batches) >= MAX_COLLECTING:
                self._sweep_locked()
            if self._closed or len(self._batches) >= MAX_COLLECTING:
                batch = None
            else:
                batch = self._batches[session] = _Batch(run)
        if full is not None:
            self._admit_full(full, defer)
        if batch is None:
            return self._enqueue(run, defer, True)
        if self._table.active_run(session) is not None:
            # busy: queued at once, later messages join it until it starts
            with self._lock:
                batch.admitted = True
            return self._enqueue(run, defer, True)
        self._after_ack(defer, lambda: self._start_window(batch), on_pool=False)
        return RunHandle(run.run_id, session, run.future)

    def _admit_full(self, batch: _Batch, defer: list[Callable[[], None]] | None) -> None:
        """Admit a collected turn that a message found full before its window ended: it
        takes no more, and its messages came first, so it is queued before the turn the
        new message opens (two windows ending at the same instant would otherwise
        start in either order)."""
        timer = batch.timer
        if timer is not None:
            timer.cancel()
        try:
            self._enqueue(batch.run, defer, True)
        except Exception as exc:
            logger.warning(
                "[%s] busy=collect: %d collected message(s) of session %s not run: %s",
                self.channel_name,
                batch.count,
                batch.run.session_id,
                exc,
            )
            _resolve_cancelled(batch.run)

    def _join_locked(self, batch: _Batch, run: Run, size: int) -> bool:
        """Append ``run``'s text to the collected turn if it has not started and has
        room (the batch lock held)."""
        if batch.count >= COLLECT_MAX_MESSAGES or batch.bytes + size > COLLECT_MAX_BYTES:
            return False
        target = batch.run
        with target.lock:
            if not _open_for_joining_locked(target):
                return False
            target.text = f"{target.text}{COLLECT_SEPARATOR}{run.text}"
            target.attachments = target.attachments + run.attachments
        batch.count += 1
        batch.bytes += size
        return True

    def _sweep_locked(self) -> None:
        """Forget the collected turns that started (or ended): they take no message."""
        for session, batch in list(self._batches.items()):
            if not _open_for_joining(batch.run):
                del self._batches[session]

    def _start_window(self, batch: _Batch) -> None:
        try:
            due = self._clock.now() + self.collect_window  # the channel's (scheduler's) clock
            timer = self._scheduler.call_at(due, self._window_over, batch)
        except Exception as exc:  # the scheduler stopped (closing)
            logger.info("[%s] busy=collect: window not started: %s", self.channel_name, exc)
            self._window_over(batch)
            return
        with self._lock:
            admitted = batch.admitted
            if not admitted and batch.timer is None and not timer.fired:
                batch.timer = timer
        if admitted:  # found full before its window started: already queued
            timer.cancel()

    def _window_over(self, batch: _Batch) -> None:
        """The collect window ended: the turn is admitted (it keeps taking messages
        until it starts)."""
        run = batch.run
        with self._lock:
            if batch.admitted:  # found full first: already queued
                return
            batch.admitted = True
        try:
            self._enqueue(run, None, True)
        except Exception as exc:
            logger.warning(
                "[%s] busy=collect: %d collected message(s) of session %s not run: %s",
                self.channel_name,
                batch.count,
                run.session_id,
                exc,
            )
            with self._lock:
                if self._batches.get(run.session_id) is batch:
                    del self._batches[run.session_id]
            _resolve_cancelled(run)

    # -- helpers ----------------------------------------------------------------------

    def _after_ack(
        self,
        defer: list[Callable[[], None]] | None,
        work: Callable[[], None],
        *,
        on_pool: bool = True,
    ) -> None:
        """Run ``work`` after the ACK (``defer``) or now; on the pool when it may wait."""

        def start() -> None:
            if on_pool:
                try:
                    self._pool.post(work)
                except Exception as exc:
                    logger.warning("[%s] busy: pool refused work: %s", self.channel_name, exc)
            else:
                work()

        if defer is not None:
            defer.append(start)
        else:
            start()


def _prompting(run: Run) -> bool:
    with run.lock:
        return run.prompting and not run.cancelled and not run.done


def _open_for_joining_locked(run: Run) -> bool:
    return not (run.prompting or run.cancelled or run.done or run.future.done())


def _open_for_joining(run: Run) -> bool:
    with run.lock:
        return _open_for_joining_locked(run)


def _resolve_cancelled(run: Run) -> None:
    from channelkit.core.handles import RunResult

    if not run.future.done():
        try:
            run.future.set_result(RunResult(run.run_id, run.session_id, "cancelled"))
        except Exception:  # resolved meanwhile
            pass


def _follow(run: Run, done: Future[RunResult]) -> None:
    """A steered message's handle ends as the run that took its text ended."""
    from channelkit.core.handles import RunResult

    try:
        result: Any = done.result()
    except Exception:
        result = None
    status = result.status if isinstance(result, RunResult) else "cancelled"
    if not run.future.done():
        try:
            run.future.set_result(
                RunResult(
                    run.run_id,
                    run.session_id,
                    status,
                    result.response if isinstance(result, RunResult) else "",
                    result.error if isinstance(result, RunResult) else None,
                )
            )
        except Exception:
            pass

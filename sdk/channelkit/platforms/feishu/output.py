"""Streaming output cards: one card per output segment, CardKit first, IM PATCH fallback.

`OutputCardPresenter` owns ``segment_id -> OutputCard``. A card is created on the
first visible text of its segment (never on ``started``), on the run's serial projection
queue, so model output never waits for the network:

* **CardKit mode** (default): create a card entity with ``streaming_mode`` on, send it to
  the chat, then stream the full segment text into the ``ck_content`` markdown element
  with a per-card ``sequence`` that strictly increases across every CardKit call. The
  terminal projection closes streaming (settings ``streaming_mode: false``) and then
  writes the terminal card (label, colour, no Stop button).
* **PATCH mode**: when CardKit is disabled or fails (create, send or a streaming write),
  the card is an ordinary interactive message updated with ``PATCH /im/v1/messages``.
  Streaming snapshots are >= 500 ms apart (2/s) and each card has exactly one terminal
  write, so a message never sees more than 5 PATCHes per second (also enforced by a
  per-message sliding-window limiter that skips - never queues - a streaming snapshot
  that would exceed it).

Writes go through `SnapshotWriter` (one write in
flight + one replaceable pending snapshot, >= 500 ms apart, 20,000-char bound).

Text that no card showed (a segment that finished before its card opened, a card that
could not be created, a response that never streamed) goes through the final-answer
delivery chain (`channelkit.platforms.common.delivery`): the card first, then plain
text, each send carrying its own ``uuid`` (the same on every retry), so Feishu shows it
at most once even after a read timeout.

A card's terminal state is set once (compare-and-set): a later competing update never
overwrites it. While a Stop is being processed, a ``cancelled`` outcome is shown as the
more specific ``stopped``.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections import deque
from collections.abc import Callable, Hashable
from concurrent.futures import Future
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from channelkit.core.types import OutputSegmentContext
from channelkit.platforms.common import OneShotClaim, SnapshotWriter, StateCell, bound_text
from channelkit.platforms.common.delivery import (
    DeliveryChain,
    DeliveryJob,
    DeliveryPath,
    DeliveryTarget,
)
from channelkit.platforms.common.registry import CardRegistry, MemoryCardRegistry
from channelkit.platforms.feishu import cards
from channelkit.platforms.feishu.api import FeishuApi
from channelkit.platforms.feishu.cards import OutputState

__all__ = ["SEGMENT_END_STATES", "OutputCard", "OutputCardPresenter", "PatchRateLimiter"]

#: The card label a segment ends with, by its end reason (anything else: completed).
SEGMENT_END_STATES: dict[str, OutputState] = {
    "response_boundary": "completed",
    "input_requested": "completed",
    "completed": "completed",
    "failed": "failed",
    "cancelled": "cancelled",
    "stopped": "stopped",  # the adapter's reason for a run cancelled by a shutdown
}

logger = logging.getLogger(__name__)

#: PATCHes allowed per message per second (Feishu: 5 QPS per message).
PATCH_PER_SECOND = 5
MAX_LIVE_CARDS = 1_000
FINALIZE_TIMEOUT = 10.0

SerialSubmit = Callable[[Hashable, Callable[[], Any]], "Future[Any]"]


class PatchRateLimiter:
    """A sliding one-second window of PATCH times per message (bounded)."""

    def __init__(self, clock: Any, limit: int = PATCH_PER_SECOND, max_messages: int = 1_000):
        self._clock = clock
        self._limit = limit
        self._max = max_messages
        self._lock = threading.Lock()
        self._times: dict[str, deque[float]] = {}

    def try_acquire(self, message_id: str, *, force: bool = False) -> bool:
        """Record a PATCH now if the window allows it (``force`` always records)."""
        now = self._clock.now()
        with self._lock:
            window = self._times.pop(message_id, None) or deque()
            while window and now - window[0] >= 1.0:
                window.popleft()
            ok = force or len(window) < self._limit
            if ok:
                window.append(now)
            self._times[message_id] = window  # re-insert: most recent last
            while len(self._times) > self._max:
                self._times.pop(next(iter(self._times)))
            return ok


@dataclass(eq=False)
class OutputCard:
    """The native handle of one output segment (lives on the run's projection queue)."""

    segment_id: str
    run_id: str
    session_id: str
    owner_id: str
    chat_id: str
    reply_to: str | None
    mode: str = "cardkit"  # cardkit | patch | text (creation failed)
    card_id: str | None = None
    message_id: str | None = None
    sequence: int = 0
    writer: SnapshotWriter | None = None
    state: StateCell[str] = field(default_factory=lambda: StateCell("running"))
    stop_claim: OneShotClaim = field(default_factory=OneShotClaim)
    stop_requested: bool = False
    projected: bool = False  # terminal projection written
    lock: threading.Lock = field(default_factory=threading.Lock)

    def next_sequence(self) -> int:
        with self.lock:
            self.sequence += 1
            return self.sequence

    @property
    def stop_value(self) -> dict[str, str]:
        return {"action": cards.STOP_ACTION, "segment": self.segment_id}


class OutputCardPresenter:
    """Creates, streams and finalizes output cards; see the module docstring.

    ``submit(key, fn)`` queues ``fn`` on the per-run serial projection queue (key =
    run id) and returns a Future. ``send_text(chat_id, text)`` replaces the plain-message
    fallback when no card could be created (default: ``api.send_text`` with a ``uuid``).
    ``delivery`` is the channel's final-answer chain (one is made on ``scheduler``).
    ``registry`` holds the live cards (key: segment id; index ``message``: message id)
    and their tombstones (key: segment id). ``thread_anchor(chat_id, thread_id)`` names
    a message of a thread to reply to, so a threaded conversation's cards and texts go
    into its thread (None: the chat).
    """

    def __init__(
        self,
        api: FeishuApi,
        *,
        clock: Any,
        scheduler: Any,
        submit: SerialSubmit,
        language: str = "zh",
        title: str | None = None,
        cardkit: bool = True,
        send_text: Callable[[str, str], Any] | None = None,
        min_interval: float = 0.5,
        registry: CardRegistry[OutputCard, tuple[str, str]] | None = None,
        delivery: DeliveryChain | None = None,
        channel_name: str = "feishu",
        thread_anchor: Callable[[str, str], str | None] | None = None,
    ) -> None:
        self._api = api
        self._thread_anchor = thread_anchor
        self.delivery = delivery if delivery is not None else DeliveryChain(scheduler)
        self._channel_name = channel_name
        self._clock = clock
        self._scheduler = scheduler
        self._submit = submit
        self._language = language
        self._title = title
        self._cardkit = cardkit
        self._send_text = send_text
        self._min_interval = min_interval
        self.registry: CardRegistry[OutputCard, tuple[str, str]] = (
            registry if registry is not None else MemoryCardRegistry(clock)
        )
        self._lock = self.registry.lock
        self._limiter = PatchRateLimiter(clock)

    def reply_anchor(self, chat_id: str, thread_id: str | None) -> str | None:
        """The message to reply to so that a send lands in ``thread_id`` (None: no thread,
        or none of its messages is known, and the send goes to the chat)."""
        if not thread_id or self._thread_anchor is None:
            return None
        return self._thread_anchor(chat_id, thread_id)

    # -- lookup -------------------------------------------------------------------------
    def get(self, segment_id: str) -> OutputCard | None:
        """The live card of ``segment_id``."""
        return self.registry.get(segment_id)

    def tombstone(self, segment_id: str) -> tuple[str, str] | None:
        """``(run_id, terminal_state)`` of a finished segment card, if remembered."""
        return self.registry.tombstone(segment_id)

    def live_cards(self, run_id: str | None = None) -> list[OutputCard]:
        """Live (non-terminal) cards, optionally of one run."""
        return [c for c in self.registry.records() if run_id is None or c.run_id == run_id]

    def __len__(self) -> int:
        return len(self.registry)

    # -- output path ----------------------------------------------------------------------
    def open_segment(self, segment: OutputSegmentContext) -> None:
        """`OutputSurface.open_segment`: nothing to do, the card comes with the first text."""

    def append(self, segment: OutputSegmentContext, chunk: str) -> bool:
        """Add visible text to a segment, creating its card on the first text; True when
        the segment's card took it."""
        return self._append(segment, chunk) is not None

    def close_segment(self, segment: OutputSegmentContext, reason: str) -> None:
        """`OutputSurface.close_segment`: the card's terminal label for ``reason``
        (`SEGMENT_END_STATES`), once; queued, not awaited."""
        self.finish(segment.segment_id, SEGMENT_END_STATES.get(reason, "completed"))

    def _append(self, segment: OutputSegmentContext, chunk: str) -> OutputCard | None:
        segment_id, run_id = segment.segment_id, segment.run_id
        if not chunk:
            return None
        if self.registry.tombstone(segment_id) is not None:
            return None  # a closed segment is never reopened
        created = False
        with self._lock:
            card = self.registry.get(segment_id)
            if card is None:
                if len(self.registry) >= MAX_LIVE_CARDS:
                    oldest = self.registry.records()[0].segment_id
                    logger.warning("output card registry full; dropping segment %s", oldest)
                    self._drop_locked(oldest)
                card = OutputCard(
                    segment_id=segment_id,
                    run_id=run_id,
                    session_id=segment.session_id,
                    owner_id=segment.owner.id,
                    chat_id=segment.target.chat_id,
                    reply_to=self.reply_anchor(segment.target.chat_id, segment.target.thread_id),
                    state=self.registry.state("running"),
                    stop_claim=self.registry.claim(),
                )
                card.writer = SnapshotWriter(
                    partial(self._write_snapshot, card),
                    clock=self._clock,
                    scheduler=self._scheduler,
                    submit=partial(self._submit, run_id),
                    min_interval=self._min_interval,
                    ready=False,
                    on_error=partial(self._on_write_error, card),
                )
                created = self.registry.add(segment_id, card)
        assert card.writer is not None
        card.writer.append(chunk)
        if created:
            self._submit(run_id, lambda: self._open(card))
        return card

    def _open(self, card: OutputCard) -> None:
        writer = card.writer
        assert writer is not None
        if card.state.state != "running" or writer.closed:
            return  # finished before it was ever shown; the terminal path delivers it
        text = writer.content
        if self._cardkit:
            try:
                entity = cards.streaming_card_entity(
                    text, self._language, title=self._title, stop_value=card.stop_value
                )
                card.card_id = self._api.create_card_entity(entity)
                card.sequence = 0
                card.message_id = self._api.send_card_entity(
                    card.chat_id, card.card_id, reply_to=card.reply_to
                )
                card.mode = "cardkit"
            except Exception as exc:
                logger.warning("CardKit unavailable (%s); falling back to message PATCH", exc)
                card.card_id = None
                card.message_id = None
        if card.message_id is None:
            try:
                body = cards.output_card(
                    text, "running", self._language, title=self._title, stop_value=card.stop_value
                )
                card.message_id = self._api.send_card(card.chat_id, body, reply_to=card.reply_to)
                card.mode = "patch"
                self._limiter.try_acquire(card.message_id, force=True)
            except Exception:
                logger.exception("could not create the output card; using a text fallback")
                card.mode = "text"
                writer.close()
                return
        self.registry.index("message", card.message_id, card.segment_id)
        writer.start()

    def _write_snapshot(self, card: OutputCard, text: str) -> None:
        if card.state.state != "running":
            return
        if card.mode == "cardkit" and card.card_id is not None:
            shown = cards.card_markdown(text, preview=True)
            self._api.stream_text(
                card.card_id, cards.CONTENT_ELEMENT_ID, shown, card.next_sequence()
            )
        elif card.mode == "patch" and card.message_id is not None:
            if not self._limiter.try_acquire(card.message_id):
                return  # coalesced: the next snapshot or the terminal write carries it
            body = cards.output_card(
                text, "running", self._language, title=self._title, stop_value=card.stop_value
            )
            self._api.patch_card(card.message_id, body)

    def _on_write_error(self, card: OutputCard, exc: BaseException) -> None:
        # CardKit streaming failed: later projections of this card use IM PATCH.
        logger.warning("output card stream write failed (%s); switching to PATCH", exc)
        if card.mode == "cardkit":
            card.mode = "patch"

    # -- terminal path --------------------------------------------------------------------
    def finish(self, segment_id: str, state: OutputState, *, wait: float | None = None) -> bool:
        """Project ``segment_id``'s terminal ``state`` (once; first state wins).

        ``cancelled`` becomes ``stopped`` while a Stop of this card is in progress.
        Returns False when the card is unknown or already terminal. ``wait`` blocks up
        to that many seconds for the projection to be written.
        """
        future = self._end(segment_id, state)
        if future is None:
            return False
        if wait is not None:
            self._written(future, wait)
        return True

    def finish_answer(self, segment_id: str, *, wait: float) -> None:
        """End ``segment_id``'s card completed as the run's final answer, waiting up to
        ``wait`` seconds for it to be written. A card that was never opened sends the
        answer through the delivery chain; when every path refused it at once (nothing
        shown, nothing to retry), the refusal is raised here, so the run fails and the
        person is told (`DeliveryJob.raise_if_refused()`)."""
        future = self._end(segment_id, "completed")
        job = self._written(future, wait) if future is not None else None
        if job is not None:
            job.raise_if_refused()

    def _end(self, segment_id: str, state: OutputState) -> Future[DeliveryJob | None] | None:
        """Make the card terminal in ``state`` (once) and queue its projection; None when
        the card is unknown or already terminal."""
        card = self.get(segment_id)
        if card is None:
            return None
        if state == "cancelled" and card.stop_requested:
            state = "stopped"
        if not card.state.compare_and_set("running", state):
            return None
        ended: OutputState = state
        return self._submit(card.run_id, lambda: self._project_terminal(card, ended))

    @staticmethod
    def _written(future: Future[DeliveryJob | None], wait: float) -> DeliveryJob | None:
        """The projection's delivery job, waiting up to ``wait`` seconds (None after a
        timeout, logged)."""
        try:
            return future.result(timeout=wait)
        except Exception:
            logger.warning("terminal projection did not finish within %.1fs", wait)
            return None

    def finish_run(self, run_id: str, state: OutputState) -> int:
        """Finish every live card of ``run_id``; returns how many changed state."""
        return sum(1 for c in self.live_cards(run_id) if self.finish(c.segment_id, state))

    def _project_terminal(self, card: OutputCard, state: OutputState) -> DeliveryJob | None:
        """Write ``card``'s terminal ``state``; the delivery job when the card was never
        opened and its text went through the delivery chain, else None."""
        writer = card.writer
        assert writer is not None
        text = writer.finalize(timeout=FINALIZE_TIMEOUT)
        self._release(card, state)
        if card.projected:
            return None
        card.projected = True
        try:
            body = cards.output_card(bound_text(text), state, self._language, title=self._title)
            if card.message_id is None:
                # finished before its card was opened (one card, already terminal), or
                # its card could not be created (text only)
                target = DeliveryTarget(
                    self._channel_name, card.chat_id, card.run_id, card.owner_id or None
                )
                paths: list[DeliveryPath] = []
                if card.mode != "text":
                    paths.append(self._card_path(card.chat_id, body, card.reply_to))
                paths.append(self._text_path(card.chat_id, self._plain(text, state), card.reply_to))
                return self.delivery.deliver([tuple(paths)], target)
            if card.mode == "cardkit" and card.card_id is not None:
                try:
                    self._api.close_streaming(card.card_id, card.next_sequence())
                    self._api.update_card_entity(card.card_id, body, card.next_sequence())
                    return None
                except Exception as exc:
                    logger.warning("CardKit finalization failed (%s); trying PATCH", exc)
            self._limiter.try_acquire(card.message_id, force=True)
            try:
                self._api.patch_card(card.message_id, body)
            except Exception as exc:
                # the card cannot show the final text: send it as text, never lose it
                logger.warning("output card PATCH failed (%s); sending text", type(exc).__name__)
                target = DeliveryTarget(
                    self._channel_name, card.chat_id, card.run_id, card.owner_id or None
                )
                text_path = self._text_path(card.chat_id, self._plain(text, state), card.reply_to)
                return self.delivery.deliver([(text_path,)], target)
        except Exception:
            logger.exception("output card finalization failed (state %s)", state)
        return None

    def _plain(self, text: str, state: str) -> str:
        label = cards.strings(self._language)[state]
        return f"{text}\n\n---\n*{label}*" if text else f"*{label}*"

    def _card_path(self, chat_id: str, body: Any, reply_to: str | None = None) -> DeliveryPath:
        key = uuid.uuid4().hex  # one key per send, the same on every retry of it
        send = partial(self._api.send_card, chat_id, body, uuid=key, reply_to=reply_to)
        return DeliveryPath("card", send, idempotent=True)

    def _text_path(self, chat_id: str, text: str, reply_to: str | None = None) -> DeliveryPath:
        if self._send_text is not None:  # the caller's own sender: no key to rely on
            into = {"reply_to": reply_to} if reply_to else {}
            return DeliveryPath("text", partial(self._send_text, chat_id, text, **into))
        send = partial(self._api.send_text, chat_id, text, uuid=uuid.uuid4().hex, reply_to=reply_to)
        return DeliveryPath("text", send, idempotent=True)

    def deliver_text(
        self,
        chat_id: str,
        text: str,
        target: DeliveryTarget,
        *,
        as_card: bool = True,
        reply_to: str | None = None,
    ) -> DeliveryJob:
        """Deliver a final answer no card showed: a completed card (``as_card``), else
        plain text, through the delivery chain (``reply_to``: a message of the thread it
        belongs in). Returns once delivered, failed or a retry is booked
        (`DeliveryJob.raise_if_refused()` re-raises a refusal)."""
        paths: list[DeliveryPath] = []
        if as_card:
            body = cards.output_card(text, "completed", self._language, title=self._title)
            paths.append(self._card_path(chat_id, body, reply_to))
        paths.append(self._text_path(chat_id, text, reply_to))
        return self.delivery.deliver([tuple(paths)], target)

    def _release(self, card: OutputCard, state: str) -> None:
        with self._lock:
            if self.registry.get(card.segment_id) is card:
                self._drop_locked(card.segment_id)
        self.registry.bury(card.segment_id, (card.run_id, state))

    def _drop_locked(self, segment_id: str) -> None:
        card = self.registry.remove(segment_id)
        if card is not None and card.writer is not None:
            card.writer.close()

    def close_all(self, state: OutputState = "cancelled", wait: float = 5.0) -> None:
        """Finish every live card (channel shutdown)."""
        for card in self.live_cards():
            self.finish(card.segment_id, state, wait=wait)


if TYPE_CHECKING:
    from channelkit.platforms.common.contract import OutputSurface

    def _satisfies_the_contract(presenter: OutputCardPresenter) -> None:
        """mypy: the presenter is Feishu's output surface."""
        output: OutputSurface = presenter
        del output

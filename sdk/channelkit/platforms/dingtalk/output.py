"""Status cards: one streaming DingTalk card per visible output segment.

Lifecycle of a card (all network work runs on the run's projection queue):

1. first visible text (or a final response without chunks) creates the record and queues
   ``createAndDeliver`` with ``flowStatus=2``, ``statusLine="Running · <model> · 0s"``,
   Stop action on, then opens streaming with an empty full update. A final response
   without chunks, or a segment that ended before its creation job ran (a busy queue),
   gets no running card: its card is created once, already in the terminal state of
   step 3 (were it to end failed, it still opens and closes its stream, so that its
   error flag is set);
2. text is accumulated locally (20,000 chars max) and written as coalesced full
   snapshots through ``/card/streaming`` by a `SnapshotWriter` (one write in
   flight, one replaceable pending snapshot, >= 500 ms apart). After a snapshot write,
   the status line is refreshed when the displayed second changed - no separate timer;
3. terminal: stop accepting text, fold the pending snapshot into the final text, close
   streaming with ``isFinalize=true``, then one ``/card/instances`` update with
   ``blockList``/``content``/``copy_content``, the exact elapsed status line
   (``Completed|Failed|Stopped|Cancelled · <model> · Ns``), ``flowStatus=3`` and the
   actions off. The live record is then replaced by a tombstone.

A card that could not be created or finalized reports ``False`` from `finalize()` so
the presenter falls back to Markdown; the text is never lost.

The `DingtalkPresenter` (one per adapter) ties the two card types together: it
holds the eligible runs (bound from a real inbound message and its owner), each with ONE
ordered `ProjectionQueue` so card writes of a run happen in order (finish old
output segment -> create question card -> question terminal update -> next segment's
card), a `StatusCardController` (segment -> status card), a
`QuestionCardController` (request ->
question card) and the callback router: Stop goes to the status cards, everything else
to the question cards; owner checks and one-shot claims happen synchronously, before
the ACK. Failures degrade in their own scope (`CardSwitch`): a refused template
or credentials switch the card type off for every chat for a cool-down, a delivery refused
for one chat turns it off for that chat, any other failure affects only its own card.
All cross-callback state lives in the presenter's
`StateRegistry`.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import threading
import uuid
from collections.abc import Callable, Hashable
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from channelkit.core.catalog import Messages, en, messages
from channelkit.errors import ChannelKitError, Throttled
from channelkit.platforms.common import (
    OneShotClaim,
    SnapshotWriter,
    StateCell,
    bound_text,
    first_notice,
)
from channelkit.platforms.common.contract import Decision, Interaction
from channelkit.platforms.common.projection_queue import ProjectionQueue
from channelkit.platforms.common.registry import (
    CardRegistry,
    MemoryCardRegistry,
    MemoryStateRegistry,
    StateRegistry,
)
from channelkit.platforms.common.router import InteractionRouter
from channelkit.platforms.common.streamed import StreamedText
from channelkit.platforms.common.switch import CardSwitch
from channelkit.platforms.common.text import truncation_marker
from channelkit.platforms.common.types import Clock, Scheduler
from channelkit.platforms.dingtalk.api import (
    STATUS_CARD_TEMPLATE_ID,
    CardApi,
    CardTarget,
    is_chat_rejection,
    is_template_rejection,
    log_card_error,
)
from channelkit.platforms.dingtalk.ingress import CardCallback, card_interaction
from channelkit.platforms.dingtalk.markdown import card_markdown
from channelkit.platforms.dingtalk.questions import (
    ForbiddenNotice,
    InputRequestLike,
    QuestionCardController,
    SegmentLike,
    forbidden_decision,
)

__all__ = [
    "ANSWER_SENT_BELOW",
    "MAX_LIVE_RUNS",
    "MAX_LIVE_STATUS_CARDS",
    "STOP_ACTION_ID",
    "DingtalkPresenter",
    "RunBinding",
    "StatusCardController",
    "StatusRecord",
    "StatusTombstone",
    "final_param_map",
    "status_line",
]

logger = logging.getLogger(__name__)

#: The status words of a card's status line -> their catalog keys.
_STATUS_KEYS = {
    "Running": "status.running",
    "Completed": "status.completed",
    "Failed": "status.failed",
    "Stopped": "status.stopped",
    "Cancelled": "status.cancelled",
    "Unavailable": "status.unavailable",
    "Interrupted": "status.interrupted",
}

#: Live status cards kept at most (a further segment falls back to Markdown).
MAX_LIVE_STATUS_CARDS = 1_000


def status_line(state: str | None, model: str | None, elapsed_seconds: float) -> str:
    """``"<State> · <model> · <n>s"`` with the state or model left out when absent."""
    seconds = max(0, math.floor(elapsed_seconds))
    parts = [state or "", (model or "").strip(), f"{seconds}s"]
    return " · ".join(part for part in parts if part)


def final_param_map(content: str, line: str) -> dict[str, object]:
    """The terminal ``/card/instances`` variables (before stringification)."""
    block = json.dumps(
        [{"type": 0, "markdown": content}], ensure_ascii=False, separators=(",", ":")
    )
    return {
        "blockList": block,
        "content": content,
        "copy_content": content,
        "flowStatus": 3,
        "statusLine": line,
        "hasAction": "false",
        "stop_action": "false",
    }


@dataclass(frozen=True)
class StatusTombstone:
    """What remains of a finished status card: correlation and terminal state."""

    segment_id: str
    run_id: str
    state: str


@dataclass(eq=False)
class StatusRecord:
    """A live status card (one output segment)."""

    segment_id: str
    run_id: str
    session_id: str
    owner_key: str
    chat_id: str
    target: CardTarget
    out_track_id: str
    started_at: float
    writer: SnapshotWriter
    queue: ProjectionQueue
    #: creating -> live | failed; creating -> deferred (ended before it went out) ->
    #: final | failed
    phase: StateCell[str] = field(default_factory=lambda: StateCell("creating"))
    #: open -> terminal
    lifecycle: StateCell[str] = field(default_factory=lambda: StateCell("open"))
    stop_claim: OneShotClaim = field(default_factory=OneShotClaim)
    forbidden_actors: set[str] = field(default_factory=set)
    last_status_second: int = 0
    created: threading.Event = field(default_factory=threading.Event)

    @property
    def terminal(self) -> bool:
        return self.lifecycle.state == "terminal"


class StatusCardController:
    """Owns every status card of one adapter; see the module docstring.

    ``registry`` holds the live records (key: segment id; index ``track``: outTrackId)
    and their tombstones (key: outTrackId); ``segments`` remembers (as tombstones) the
    segments that ended, so a late chunk never opens a second card.
    ``on_flushed(out_track_id, text)`` is called with the card's visible text after each
    successful content write.
    """

    def __init__(
        self,
        api: CardApi,
        *,
        clock: Clock,
        scheduler: Scheduler,
        model: str | None = None,
        flush_interval: float = 0.5,
        write_timeout: float = 10.0,
        on_template_rejected: Callable[[], None] | None = None,
        on_chat_rejected: Callable[[str], None] | None = None,
        registry: CardRegistry[StatusRecord, StatusTombstone] | None = None,
        segments: CardRegistry[StatusRecord, str] | None = None,
        on_flushed: Callable[[str, str], None] | None = None,
        texts_for: Callable[[str | None], Messages] | None = None,
    ) -> None:
        self._api = api
        self._on_flushed = on_flushed
        #: the catalog texts of a card's owner (status line words, the Stop button)
        self.texts_for: Callable[[str | None], Messages] = texts_for or (lambda _: messages())
        self._clock = clock
        self._scheduler = scheduler
        self._model = model.strip() if model and model.strip() else None
        self._flush_interval = flush_interval
        self._write_timeout = write_timeout
        self._on_template_rejected = on_template_rejected
        self._on_chat_rejected = on_chat_rejected
        self.registry: CardRegistry[StatusRecord, StatusTombstone] = (
            registry if registry is not None else MemoryCardRegistry(clock)
        )
        self._segments: CardRegistry[StatusRecord, str] = (
            segments if segments is not None else MemoryCardRegistry(clock)
        )
        self._lock = self.registry.lock

    # -- inspection -------------------------------------------------------------------------
    @property
    def live_count(self) -> int:
        return len(self.registry)

    def record(self, segment_id: str) -> StatusRecord | None:
        return self.registry.get(segment_id)

    def by_track(self, out_track_id: str) -> StatusRecord | None:
        return self.registry.find("track", out_track_id)

    def live_segments(self, run_id: str) -> list[str]:
        return [r.segment_id for r in self.registry.records() if r.run_id == run_id]

    def is_terminal_segment(self, segment_id: str) -> bool:
        return self._segments.tombstone(segment_id) is not None

    # -- output -----------------------------------------------------------------------------
    def append(
        self, segment: SegmentLike, binding: RunBinding, chunk: str, *, final: bool = False
    ) -> StatusRecord | None:
        """Add visible text to the segment's card, creating the card on first text.

        ``binding`` is the segment's eligible run (its captured owner, chat, card target
        and projection queue). Returns the live record, or None when the text was not
        taken (segment terminal, too many live cards, or the segment id belongs to
        another run). ``final``: ``chunk`` is the segment's whole text and the segment
        ends now; a card created for it is deferred to its `finalize()`, which creates
        it in its terminal state in one call.
        """
        segment_id, run_id = segment.segment_id, binding.run_id
        with self._lock:
            record = self.registry.get(segment_id)
            if record is None:
                if self.is_terminal_segment(segment_id):
                    return None
                if len(self.registry) >= MAX_LIVE_STATUS_CARDS:
                    logger.warning("too many live status cards; segment falls back to Markdown")
                    return None
                record = self._new_record(segment_id, binding)
                if final:
                    record.phase.compare_and_set("creating", "deferred")
                    record.created.set()
                if not self.registry.add(segment_id, record, track=record.out_track_id):
                    return None
                if not final:
                    binding.queue.enqueue(functools.partial(self._create, record))
            elif record.run_id != run_id:
                return None
        if record.terminal:
            return None
        record.writer.append(chunk)
        return record

    def _new_record(self, segment_id: str, binding: RunBinding) -> StatusRecord:
        queue = binding.queue
        out_track_id = "ck-status-" + uuid.uuid4().hex
        holder: list[StatusRecord] = []

        def write(snapshot: str) -> None:
            self._write_snapshot(holder[0], snapshot)

        def on_error(exc: BaseException) -> None:
            log_card_error("status card streaming", exc, STATUS_CARD_TEMPLATE_ID, out_track_id)

        writer = SnapshotWriter(
            write,
            clock=self._clock,
            scheduler=self._scheduler,
            submit=queue.enqueue,
            min_interval=self._flush_interval,
            marker=truncation_marker(self.texts_for(binding.owner_key)),
            ready=False,
            on_error=on_error,
        )
        record = StatusRecord(
            segment_id=segment_id,
            run_id=binding.run_id,
            session_id=binding.session_id,
            owner_key=binding.owner_key,
            chat_id=binding.chat_id,
            target=binding.card_target,
            out_track_id=out_track_id,
            started_at=self._clock.now(),
            writer=writer,
            queue=queue,
            phase=self.registry.state("creating"),
            lifecycle=self.registry.state("open"),
            stop_claim=self.registry.claim(),
        )
        holder.append(record)
        return record

    def _create(self, record: StatusRecord, *, running: bool = False) -> None:
        """Create the running card and open its stream. A segment that ended before this
        job ran (a busy queue: its finalize job follows this one) gets no running card:
        its card is deferred to the finalize job, which creates it in its terminal state
        in one call. ``running`` creates the running card even then (a failed segment's
        card opens and closes its stream, so that its error flag is set)."""
        if not running and record.terminal and record.phase.compare_and_set("creating", "deferred"):
            record.created.set()
            return
        try:
            self._api.create_and_deliver(
                STATUS_CARD_TEMPLATE_ID,
                record.out_track_id,
                record.target,
                {
                    "content": "",
                    "flowStatus": 2,
                    "statusLine": status_line(self._word(record, "Running"), self._model, 0),
                    "hasAction": "true",
                    "stop_action": "true",
                    "stop_text": self.texts_for(record.owner_key).get("button.stop"),
                },
            )
        except ChannelKitError as exc:
            self._creation_failed(record, exc, delivered=False)
            return
        try:
            self._api.stream(record.out_track_id, "content", "", finalize=False)
        except ChannelKitError as exc:
            self._creation_failed(record, exc, delivered=True)
            return
        if record.phase.compare_and_set("creating", "live"):
            record.writer.start()
        record.created.set()

    def _create_final(self, record: StatusRecord, params: dict[str, object]) -> bool:
        """Create a deferred card already in its terminal state; False when it could
        not be (the caller sends the text as Markdown)."""
        try:
            self._api.create_and_deliver(
                STATUS_CARD_TEMPLATE_ID, record.out_track_id, record.target, params
            )
        except ChannelKitError as exc:
            self._creation_failed(record, exc, delivered=False)
            return False
        record.phase.compare_and_set("deferred", "final")
        return True

    def _word(self, record: StatusRecord, state: str) -> str:
        """The status word ``state`` (``"Running"``, ``"Failed"``...) in the language of
        the card's owner (another word is shown as it is)."""
        key = _STATUS_KEYS.get(state)
        return self.texts_for(record.owner_key).get(key) if key else state

    def _creation_failed(self, record: StatusRecord, exc: BaseException, delivered: bool) -> None:
        log_card_error("status card creation", exc, STATUS_CARD_TEMPLATE_ID, record.out_track_id)
        if not record.phase.compare_and_set("creating", "failed"):
            record.phase.compare_and_set("deferred", "failed")
        record.created.set()
        if is_template_rejection(exc) and self._on_template_rejected is not None:
            self._on_template_rejected()
        elif is_chat_rejection(exc) and self._on_chat_rejected is not None:
            self._on_chat_rejected(record.chat_id)
        if delivered:
            try:
                self._api.update_instance(
                    record.out_track_id,
                    {
                        "flowStatus": 3,
                        "statusLine": self._word(record, "Unavailable"),
                        "hasAction": "false",
                        "stop_action": "false",
                    },
                )
            except ChannelKitError:
                logger.debug("could not mark status card %s unavailable", record.out_track_id)

    def _write_snapshot(self, record: StatusRecord, snapshot: str) -> None:
        """Stream ``snapshot`` into the card, then refresh its status line when the shown
        second changed. Only the stream may raise `Throttled` (the writer tries the
        snapshot again later); a throttled refresh is left to the next write."""
        texts = self.texts_for(record.owner_key)
        shown = bound_text(
            card_markdown(snapshot, preview=True, texts=texts), marker=truncation_marker(texts)
        )
        self._api.stream(record.out_track_id, "content", shown, finalize=False)
        if self._on_flushed is not None:
            try:  # the card's visible text, for a survivor that finalizes it
                self._on_flushed(record.out_track_id, shown)
            except Exception:
                logger.exception("status card %s: recording its text failed", record.out_track_id)
        second = math.floor(self._clock.now() - record.started_at)
        if second != record.last_status_second and not record.terminal:
            shown_second, record.last_status_second = record.last_status_second, second
            try:
                self._api.update_instance(
                    record.out_track_id,
                    {"statusLine": status_line(self._word(record, "Running"), self._model, second)},
                )
            except Throttled:
                record.last_status_second = shown_second  # the next write refreshes it
            except ChannelKitError as exc:
                log_card_error(
                    "status card metadata", exc, STATUS_CARD_TEMPLATE_ID, record.out_track_id
                )

    # -- termination ------------------------------------------------------------------------
    def mark_terminal(self, segment_id: str) -> StatusRecord | None:
        """Synchronously stop the segment's card from taking text (late chunks are dropped).

        Returns the record if this call made it terminal.
        """
        with self._lock:
            record = self.registry.get(segment_id)
            self._segments.bury(segment_id, "terminal")
        if record is None or not record.lifecycle.compare_and_set("open", "terminal"):
            return None
        record.writer.close()
        return record

    def finalize(
        self,
        record: StatusRecord,
        state: str,
        *,
        is_error: bool = False,
        content: str | None = None,
    ) -> tuple[bool, str]:
        """Commit the terminal projection of ``record``; run on the run's queue.

        The card's final content is the text its segment streamed (folded with the
        pending snapshot, bounded, image markers sanitized), or ``content`` when given
        (the text went out another way: the card must not repeat it). Returns
        ``(card_finalized, final_text)``; on False the caller delivers the segment's
        text as Markdown.
        """
        streamed = record.writer.finalize(timeout=self._write_timeout)
        texts = self.texts_for(record.owner_key)
        final_text = bound_text(
            card_markdown(streamed if content is None else content, texts=texts),
            marker=truncation_marker(texts),
        )
        word = self._word(record, state)
        line = status_line(word, self._model, self._clock.now() - record.started_at)
        ok = False
        if record.phase.state == "deferred":
            if is_error:
                # a failure keeps the stream's error flag: the card is created
                # running and closed failed, as a live one is
                record.phase.compare_and_set("deferred", "creating")
                self._create(record, running=True)
            else:
                ok = self._create_final(record, final_param_map(final_text, line))
        if record.phase.state == "live":
            try:
                self._api.stream(
                    record.out_track_id, "content", "", finalize=True, is_error=is_error
                )
            except ChannelKitError as exc:
                log_card_error(
                    "status card stream close", exc, STATUS_CARD_TEMPLATE_ID, record.out_track_id
                )
            try:
                self._api.update_instance(record.out_track_id, final_param_map(final_text, line))
                ok = True
            except ChannelKitError as exc:
                log_card_error(
                    "status card finalization", exc, STATUS_CARD_TEMPLATE_ID, record.out_track_id
                )
        with self._lock:
            self.registry.remove(record.segment_id, record)
            self.registry.bury(
                record.out_track_id, StatusTombstone(record.segment_id, record.run_id, state)
            )
        return ok, final_text

    # -- Stop -------------------------------------------------------------------------------
    def claim_stop(self, out_track_id: str, actor_id: str) -> tuple[str, StatusRecord | None]:
        """Arbitrate a Stop click synchronously.

        Returns ``("accepted", record)`` for the first owner click on a live card,
        ``("forbidden", record)`` for the first click of each foreign user, else
        ``("ignored", None)``.
        """
        with self._lock:
            record = self.registry.find("track", out_track_id)
            if record is None or record.terminal:
                return "ignored", None
            if actor_id != record.owner_key:
                if not first_notice(record.forbidden_actors, actor_id):
                    return "ignored", None
                return "forbidden", record
        if not record.stop_claim.try_claim():
            return "ignored", None
        return "accepted", record


# -- the presenter -----------------------------------------------------------------------


#: A status card's final content when its answer went out as Markdown instead.
ANSWER_SENT_BELOW = en("status.answer_sent_below")

#: The action id of the status card's Stop button.
STOP_ACTION_ID = "btn_stop"
#: Live runs kept at most.
MAX_LIVE_RUNS = 1_000


@dataclass(eq=False)
class RunBinding:
    """An eligible run: captured owner and chat, and its projection queue."""

    run_id: str
    session_id: str
    owner_key: str
    chat_id: str
    is_group: bool
    queue: ProjectionQueue
    terminal: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)
    streamed: StreamedText = field(default_factory=StreamedText)

    @property
    def card_target(self) -> CardTarget:
        """Group cards go to the conversation, direct cards to the owner's user id."""
        return CardTarget(self.chat_id if self.is_group else self.owner_key, self.is_group)


class DingtalkPresenter:
    """Projects runs onto DingTalk cards; see the module docstring.

    ``submit(fn)`` hands work to the pool. ``send_fallback(chat_id, text, session_id)``
    is the Markdown sender; ``notify_forbidden(target, actor_id)`` tells a person once
    that a card is not theirs. ``cancel_run(session_id, run_id)`` is the exact-run
    cancellation of ChannelBase. ``status_cards`` / ``question_cards`` enable the two card
    types; ``question_timeout`` is the effective question lifetime in seconds.
    ``on_card_text(out_track_id, text)`` is told each status card's visible text after
    every successful write (on the run's projection queue).
    """

    def __init__(
        self,
        api: CardApi,
        *,
        clock: Clock,
        scheduler: Scheduler,
        submit: Callable[[Callable[[], Any]], Any],
        send_fallback: Callable[[str, str, str], Any],
        cancel_run: Callable[[str, str], bool],
        status_cards: bool = True,
        question_cards: bool = True,
        model: str | None = None,
        question_timeout: float = 270.0,
        flush_interval: float = 0.5,
        wait_timeout: float = 45.0,
        registry: StateRegistry | None = None,
        notify_forbidden: ForbiddenNotice | None = None,
        on_card_text: Callable[[str, str], None] | None = None,
        texts_for: Callable[[str | None], Messages] | None = None,
    ) -> None:
        self._submit = submit
        #: the notice to a person who pressed a card that is not theirs (None: no notice)
        self.notify_forbidden = notify_forbidden
        self._send_fallback = send_fallback
        self._cancel_run = cancel_run
        self._wait_timeout = wait_timeout
        state = registry if registry is not None else MemoryStateRegistry(clock)
        self._runs: CardRegistry[RunBinding, None] = state.cards(
            "dingtalk-runs", maxsize=MAX_LIVE_RUNS
        )
        self._lock = self._runs.lock
        self.status_switch = CardSwitch("dingtalk status card", clock=clock, enabled=status_cards)
        self.question_switch = CardSwitch(
            "dingtalk question card", clock=clock, enabled=question_cards
        )
        self.status: StatusCardController | None = None
        self.questions: QuestionCardController | None = None
        if status_cards:
            self.status = StatusCardController(
                api,
                clock=clock,
                scheduler=scheduler,
                model=model,
                flush_interval=flush_interval,
                on_template_rejected=lambda: self.status_switch.reject_globally("template"),
                on_chat_rejected=lambda chat: self.status_switch.reject_chat(chat, "delivery"),
                registry=state.cards("dingtalk-status"),
                segments=state.cards("dingtalk-status-segments"),
                on_flushed=on_card_text,
                texts_for=texts_for,
            )
        if question_cards:
            self.questions = QuestionCardController(
                api,
                clock=clock,
                scheduler=scheduler,
                timeout_seconds=question_timeout,
                send_text=lambda chat_id, text: self._send_fallback(chat_id, text, ""),
                on_template_rejected=lambda: self.question_switch.reject_globally("template"),
                registry=state.cards("dingtalk-questions"),
                notify_forbidden=notify_forbidden,
                texts_for=texts_for,
            )
        #: the card actions of this presenter's cards: Stop, then question forms
        self.router = InteractionRouter(
            (self.stop_pressed, self.form_action), name="dingtalk card action"
        )

    # -- runs -------------------------------------------------------------------------------
    def register_run(
        self, run_id: str, session_id: str, owner_key: str, chat_id: str, is_group: bool
    ) -> RunBinding | None:
        """Bind an eligible run (from a real inbound message); None when full."""
        with self._lock:
            existing = self._runs.get(run_id)
            if existing is not None:
                return existing
            if len(self._runs) >= MAX_LIVE_RUNS:
                logger.warning("too many live card runs; run %s gets no cards", run_id)
                return None
            key: Hashable = ("dingtalk-run", run_id)
            binding = RunBinding(
                run_id=run_id,
                session_id=session_id,
                owner_key=owner_key,
                chat_id=chat_id,
                is_group=is_group,
                queue=ProjectionQueue(self._submit, name=str(key)),
            )
            if not self._runs.add(run_id, binding):
                return None
            return binding

    def run(self, run_id: str) -> RunBinding | None:
        return self._runs.get(run_id)

    @property
    def live_runs(self) -> int:
        return len(self._runs)

    def eligible(self, run_id: str, owner_id: str, chat_id: str) -> RunBinding | None:
        """The live card binding of ``run_id`` when it belongs to ``owner_id`` in
        ``chat_id`` (None: the run gets no card: unbound, ended or someone else's)."""
        binding = self.run(run_id)
        if binding is None or binding.terminal:
            return None
        if binding.owner_key != owner_id or binding.chat_id != chat_id:
            return None
        return binding

    # -- output -------------------------------------------------------------------------------
    def append_output(self, segment: SegmentLike, chunk: str) -> bool:
        """Stream ``chunk`` into the segment's status card; False when no card takes it."""
        return self._append(segment, chunk, final=False)

    def _append(self, segment: SegmentLike, chunk: str, *, final: bool) -> bool:
        status = self.status
        if status is None or not chunk:
            return False
        binding = self.eligible(segment.run_id, segment.owner.id, segment.target.chat_id)
        if binding is None or not self.status_switch.allows(binding.chat_id):
            return False
        record = status.append(segment, binding, chunk, final=final)
        if record is None:
            return False
        binding.streamed.add(chunk)
        return True

    def undelivered_text(self, run_id: str, text: str) -> str:
        """The part of a run's final ``text`` that none of its status cards has taken.

        ``ChannelBase`` passes the whole run's text to ``on_response_complete``; text a
        status card took (from this or an earlier segment of the run) is already
        delivered by that card or its Markdown fallback and must not be shown again.
        """
        binding = self.run(run_id)
        return text if binding is None else binding.streamed.remainder(text)

    def close_output(
        self, segment: SegmentLike, text: str, reason: str, *, wait: bool = True
    ) -> bool:
        """Close the segment's card; True when the presenter delivered the text.

        ``completed``/``response_boundary``/``input_requested`` finalize the card as
        Completed with the text the segment streamed; with ``wait`` the call blocks
        (bounded) until the card is committed or, on failure, that text was sent as
        Markdown - otherwise the finalization is only queued in order. ``failed``
        finalizes as Failed. ``cancelled`` leaves the projection to
        `terminalize_run()`.

        ``text`` (the final response) is used only for a segment that streamed nothing:
        the part of it no earlier card of the run has taken (`undelivered_text()`)
        becomes one completed card; when nothing is left, nothing is shown. Returns False
        when the segment gets no card (the caller sends `undelivered_text()` itself).
        """
        status = self.status
        if status is None:
            return False
        segment_id = segment.segment_id
        record = status.record(segment_id)
        if record is None:
            if status.is_terminal_segment(segment_id):
                return True
            if not text or reason in ("cancelled", "failed"):
                return False
            # a final response without streamed chunks: one completed card with the
            # part of it that no earlier segment of the run has shown, created in
            # its final state (no running card that is finished right after)
            remainder = self.undelivered_text(segment.run_id, text)
            if not remainder:
                return True
            if not self._append(segment, remainder, final=True):
                return False
            record = status.record(segment_id)
            if record is None:
                return False
        if record.run_id != segment.run_id:
            return False
        if reason == "cancelled":
            return True
        marked = status.mark_terminal(segment_id)
        if marked is None:
            return True
        state = "Failed" if reason == "failed" else "Completed"
        return self._finish(marked, state, is_error=reason == "failed", wait=wait)

    def _finish(
        self, record: StatusRecord, state: str, *, is_error: bool = False, wait: bool
    ) -> bool:
        """Queue the terminal projection of ``record`` with the text the segment streamed.

        A card that cannot be finalized sends that segment text as Markdown instead.
        """
        status = self.status
        assert status is not None

        # Exactly one path delivers the segment's text: the card job, or the Markdown
        # fallback taken when the job did not start in time. Whoever claims first wins;
        # a card finalized after the fallback says "answer sent below" instead.
        decided: list[str] = []
        decide = threading.Lock()

        def claim(path: str) -> str:
            with decide:
                if not decided:
                    decided.append(path)
                return decided[0]

        def job() -> bool:
            if claim("card") == "card":
                ok, _final_text = status.finalize(record, state, is_error=is_error)
                text = record.writer.content  # the segment's own (bounded) text
                if not ok and text:
                    self._send_fallback(record.chat_id, text, record.session_id)
            else:
                below = status.texts_for(record.owner_key).text(ANSWER_SENT_BELOW)
                status.finalize(record, state, is_error=is_error, content=below)
            return True

        if not wait:
            record.queue.enqueue(job)
            return True
        try:
            return bool(record.queue.call(job, timeout=self._wait_timeout))
        except FutureTimeout:
            if claim("fallback") == "fallback":
                logger.warning("status card finalization timed out; sending Markdown")
                text = record.writer.content
                if text:
                    self._send_fallback(record.chat_id, text, record.session_id)
            return True

    # -- input ---------------------------------------------------------------------------------
    def present_input(self, ctx: InputRequestLike, *, timeout: float | None = None) -> str:
        """Present a structured question; returns presented / handled / unsupported.

        ``timeout`` is this card's lifetime in seconds (default: ``question_timeout``).
        """
        questions = self.questions
        if questions is None:
            return "unsupported"
        binding = self.eligible(ctx.run_id, ctx.owner.id, ctx.target.chat_id)
        if binding is None or bool(ctx.target.is_group) != binding.is_group:
            return "unsupported"
        if not self.question_switch.allows(binding.chat_id):
            return "unsupported"
        return questions.present(
            ctx,
            owner_key=binding.owner_key,
            chat_id=binding.chat_id,
            target=binding.card_target,
            queue=binding.queue,
            timeout=timeout,
        )

    # -- run end ------------------------------------------------------------------------------
    def terminalize_run(self, run_id: str, terminal: str, detail: str | None = None) -> None:
        """End every card of a run (idempotent); never blocks on the network.

        ``terminal`` is completed / failed / cancelled; ``detail`` is the cancellation
        reason (``cancel_command`` shows "Stopped", others "Cancelled").
        """
        with self._lock:
            binding = self._runs.remove(run_id)
        if binding is not None:
            binding.terminal = True
        if self.questions is not None:
            cancelled = terminal == "cancelled" and detail in ("cancel_command", "clear")
            self.questions.cancel_run(run_id, "cancelled" if cancelled else "expired")
        status = self.status
        if status is None:
            return
        if terminal == "failed":
            state, is_error = "Failed", True
        elif terminal == "cancelled":
            state, is_error = ("Stopped" if detail == "cancel_command" else "Cancelled"), False
        else:
            state, is_error = "Completed", False
        for segment_id in status.live_segments(run_id):
            record = status.mark_terminal(segment_id)
            if record is not None:
                self._finish(record, state, is_error=is_error, wait=False)

    # -- callbacks ------------------------------------------------------------------------------
    def route_callback(self, callback: CardCallback) -> Decision:
        """Decide a card callback synchronously (correlate, authorize, claim) through
        `router`; the decision's work calls the responder or the cancellation:
        hand it to the pool after the ACK."""
        return self.router.route(card_interaction(callback))

    def stop_pressed(self, interaction: Interaction) -> Decision | None:
        """The Stop button of a status card (None: another action)."""
        callback = interaction.raw
        if not isinstance(callback, CardCallback) or callback.action_id != STOP_ACTION_ID:
            return None
        status = self.status
        if status is None:
            return Decision.ignored()
        kind, record = status.claim_stop(callback.out_track_id, callback.actor_id)
        if record is None:
            return Decision.ignored()
        if kind == "forbidden":
            return forbidden_decision(self.notify_forbidden, record.target, callback.actor_id)

        def execute() -> None:
            cancelled = False
            try:
                cancelled = bool(self._cancel_run(record.session_id, record.run_id))
            except Exception:
                logger.exception("stop: cancelling run %s failed", record.run_id)
            if cancelled:
                self.terminalize_run(record.run_id, "cancelled", "cancel_command")
            elif status.record(record.segment_id) is record and not record.terminal:
                record.stop_claim.release()

        return Decision.ack().then(execute)

    def form_action(self, interaction: Interaction) -> Decision | None:
        """Submit or Cancel of a question (or approval) card (None: not a card action)."""
        callback = interaction.raw
        if not isinstance(callback, CardCallback):
            return None
        if self.questions is None:
            return Decision.ignored()
        return self.questions.claim(callback)

    # -- the platform contract's surfaces -------------------------------------------------------
    def open_segment(self, segment: SegmentLike) -> None:
        """`OutputSurface.open_segment`: nothing to do, the card comes with the first text."""

    def append(self, segment: SegmentLike, chunk: str) -> bool:
        """`OutputSurface.append`: `append_output()`."""
        return self.append_output(segment, chunk)

    def close_segment(self, segment: SegmentLike, reason: str) -> None:
        """`OutputSurface.close_segment`: the segment's card ends (queued, not awaited)."""
        self.close_output(segment, "", reason, wait=False)

    def present(self, request: InputRequestLike) -> str:
        """`QuestionSurface.present`: `present_input()` with the default lifetime."""
        return self.present_input(request)

    def close(self) -> None:
        """Finalize every live run as cancelled (used by ``ChannelBase.close``)."""
        with self._lock:
            run_ids = [binding.run_id for binding in self._runs.records()]
        for run_id in run_ids:
            self.terminalize_run(run_id, "cancelled", "shutdown")


if TYPE_CHECKING:
    from channelkit.core.context import UserInputRequestContext
    from channelkit.platforms.common.contract import OutputSurface, QuestionSurface

    def _satisfies_the_contract(presenter: DingtalkPresenter) -> None:
        """mypy: the presenter is DingTalk's output and question surface."""
        output: OutputSurface = presenter
        questions: QuestionSurface[UserInputRequestContext] = presenter
        del output, questions

"""Status cards: one streaming DingTalk card per visible output segment.

Lifecycle of a card (all network work runs on the run's projection queue):

1. first visible text (or a final response without chunks) creates the record and queues
   ``createAndDeliver`` with ``flowStatus=2``, ``statusLine="Running · <model> · 0s"``,
   Stop action on, then opens streaming with an empty full update;
2. text is accumulated locally (20,000 chars max) and written as coalesced full
   snapshots through ``/card/streaming`` by a :class:`SnapshotWriter` (one write in
   flight, one replaceable pending snapshot, >= 500 ms apart). After a snapshot write,
   the status line is refreshed when the displayed second changed - no separate timer;
3. terminal: stop accepting text, fold the pending snapshot into the final text, close
   streaming with ``isFinalize=true``, then one ``/card/instances`` update with
   ``blockList``/``content``/``copy_content``, the exact elapsed status line
   (``Completed|Failed|Stopped|Cancelled · <model> · Ns``), ``flowStatus=3`` and the
   actions off. The live record is then replaced by a tombstone.

A card that could not be created or finalized reports ``False`` from :meth:`finalize` so
the presenter falls back to Markdown; the text is never lost.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from channelkit.errors import ApiError, ChannelKitError
from channelkit.platforms.common import (
    OneShotClaim,
    SnapshotWriter,
    StateCell,
    TombstoneStore,
    bound_text,
    first_notice,
)
from channelkit.platforms.common.projection_queue import ProjectionQueue
from channelkit.platforms.common.types import Clock, Scheduler
from channelkit.platforms.dingtalk.card_api import (
    STATUS_CARD_TEMPLATE_ID,
    CardApi,
    CardDeliveryError,
    CardTarget,
)
from channelkit.platforms.dingtalk.markdown import sanitize_image_markers

__all__ = [
    "MAX_LIVE_STATUS_CARDS",
    "StatusCardController",
    "StatusRecord",
    "StatusTombstone",
    "final_param_map",
    "status_line",
]

logger = logging.getLogger(__name__)

#: Live status cards kept at most (a further segment falls back to Markdown).
MAX_LIVE_STATUS_CARDS = 1_000

TEMPLATE_REJECTION_CODES = frozenset(
    {
        "param.templateNotExist",
        "param.templateUnpublished",
        "param.cardTemplateIdEmpty",
        "param.invalid",
    }
)


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


def is_template_rejection(exc: BaseException) -> bool:
    """True when DingTalk refused the card template itself (not a transient failure)."""
    if isinstance(exc, CardDeliveryError):
        return True
    return isinstance(exc, ApiError) and str(exc.code) in TEMPLATE_REJECTION_CODES


def log_card_error(operation: str, exc: BaseException, template_id: str, out_track_id: str) -> None:
    """One structured error line for a failed Card OpenAPI call (never with content)."""
    code = getattr(exc, "code", None)
    status = getattr(exc, "status", None)
    request_id = getattr(exc, "request_id", None)
    level = logging.ERROR if is_template_rejection(exc) else logging.WARNING
    logger.log(
        level,
        "dingtalk %s failed: template=%s outTrackId=%s status=%s code=%s requestId=%s error=%s",
        operation,
        template_id,
        out_track_id,
        status,
        code,
        request_id,
        type(exc).__name__,
        extra={
            "dingtalk_operation": operation,
            "dingtalk_template_id": template_id,
            "dingtalk_code": code,
            "dingtalk_status": status,
        },
    )


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
    #: creating -> live | failed
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
    """Owns every status card of one adapter; see the module docstring."""

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
    ) -> None:
        self._api = api
        self._clock = clock
        self._scheduler = scheduler
        self._model = model.strip() if model and model.strip() else None
        self._flush_interval = flush_interval
        self._write_timeout = write_timeout
        self._on_template_rejected = on_template_rejected
        self._lock = threading.RLock()
        self._by_segment: dict[str, StatusRecord] = {}
        self._by_track: dict[str, StatusRecord] = {}
        self.tombstones: TombstoneStore[str, StatusTombstone] = TombstoneStore(clock)
        self._terminal_segments: TombstoneStore[str, str] = TombstoneStore(clock)

    # -- inspection -------------------------------------------------------------------------
    @property
    def live_count(self) -> int:
        with self._lock:
            return len(self._by_segment)

    def record(self, segment_id: str) -> StatusRecord | None:
        with self._lock:
            return self._by_segment.get(segment_id)

    def by_track(self, out_track_id: str) -> StatusRecord | None:
        with self._lock:
            return self._by_track.get(out_track_id)

    def live_segments(self, run_id: str) -> list[str]:
        with self._lock:
            return [r.segment_id for r in self._by_segment.values() if r.run_id == run_id]

    def is_terminal_segment(self, segment_id: str) -> bool:
        return segment_id in self._terminal_segments

    # -- output -----------------------------------------------------------------------------
    def append(
        self,
        *,
        segment_id: str,
        run_id: str,
        session_id: str,
        owner_key: str,
        chat_id: str,
        target: CardTarget,
        queue: ProjectionQueue,
        chunk: str,
    ) -> StatusRecord | None:
        """Add visible text to the segment's card, creating the card on first text.

        Returns the live record, or None when the text was not taken (segment terminal,
        too many live cards, or the segment id belongs to another run).
        """
        with self._lock:
            record = self._by_segment.get(segment_id)
            if record is None:
                if self.is_terminal_segment(segment_id):
                    return None
                if len(self._by_segment) >= MAX_LIVE_STATUS_CARDS:
                    logger.warning("too many live status cards; segment falls back to Markdown")
                    return None
                record = self._new_record(
                    segment_id, run_id, session_id, owner_key, chat_id, target, queue
                )
                self._by_segment[segment_id] = record
                self._by_track[record.out_track_id] = record
                queue.enqueue(functools.partial(self._create, record))
            elif record.run_id != run_id:
                return None
        if record.terminal:
            return None
        record.writer.append(chunk)
        return record

    def _new_record(
        self,
        segment_id: str,
        run_id: str,
        session_id: str,
        owner_key: str,
        chat_id: str,
        target: CardTarget,
        queue: ProjectionQueue,
    ) -> StatusRecord:
        out_track_id = "qwen-status-" + uuid.uuid4().hex
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
            ready=False,
            on_error=on_error,
        )
        record = StatusRecord(
            segment_id=segment_id,
            run_id=run_id,
            session_id=session_id,
            owner_key=owner_key,
            chat_id=chat_id,
            target=target,
            out_track_id=out_track_id,
            started_at=self._clock.now(),
            writer=writer,
            queue=queue,
        )
        holder.append(record)
        return record

    def _create(self, record: StatusRecord) -> None:
        try:
            # Created even when the segment already ended: its finalize job follows.
            self._api.create_and_deliver(
                STATUS_CARD_TEMPLATE_ID,
                record.out_track_id,
                record.target,
                {
                    "content": "",
                    "flowStatus": 2,
                    "statusLine": status_line("Running", self._model, 0),
                    "hasAction": "true",
                    "stop_action": "true",
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

    def _creation_failed(self, record: StatusRecord, exc: BaseException, delivered: bool) -> None:
        log_card_error("status card creation", exc, STATUS_CARD_TEMPLATE_ID, record.out_track_id)
        record.phase.compare_and_set("creating", "failed")
        record.created.set()
        if is_template_rejection(exc) and self._on_template_rejected is not None:
            self._on_template_rejected()
        if delivered:
            try:
                self._api.update_instance(
                    record.out_track_id,
                    {
                        "flowStatus": 3,
                        "statusLine": "Unavailable",
                        "hasAction": "false",
                        "stop_action": "false",
                    },
                )
            except ChannelKitError:
                logger.debug("could not mark status card %s unavailable", record.out_track_id)

    def _write_snapshot(self, record: StatusRecord, snapshot: str) -> None:
        self._api.stream(
            record.out_track_id, "content", sanitize_image_markers(snapshot), finalize=False
        )
        second = math.floor(self._clock.now() - record.started_at)
        if second != record.last_status_second and not record.terminal:
            record.last_status_second = second
            try:
                self._api.update_instance(
                    record.out_track_id,
                    {"statusLine": status_line("Running", self._model, second)},
                )
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
            record = self._by_segment.get(segment_id)
            self._terminal_segments.add(segment_id, "terminal")
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
        final_text = bound_text(sanitize_image_markers(streamed if content is None else content))
        line = status_line(state, self._model, self._clock.now() - record.started_at)
        ok = False
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
            self._by_segment.pop(record.segment_id, None)
            self._by_track.pop(record.out_track_id, None)
            self.tombstones.add(
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
            record = self._by_track.get(out_track_id)
            if record is None or record.terminal:
                return "ignored", None
            if actor_id != record.owner_key:
                if not first_notice(record.forbidden_actors, actor_id):
                    return "ignored", None
                return "forbidden", record
        if not record.stop_claim.try_claim():
            return "ignored", None
        return "accepted", record

"""The DingTalk interaction presenter: runs, output segments and input requests -> cards.

One presenter per adapter. It holds

* the eligible runs (bound from a real inbound message and its owner), each with ONE
  ordered :class:`ProjectionQueue` so card writes of a run happen in order:
  finish old output segment -> create question card -> question terminal update ->
  next segment's card;
* a :class:`StatusCardController` (segment -> status card) and a
  :class:`QuestionCardController` (request -> question card);
* the callback router: Stop goes to the status cards, everything else to the question
  cards; owner checks and one-shot claims happen synchronously, before the ACK.

A status card that cannot be created or finalized falls back to ``send_fallback`` (the
Markdown sender): the answer text is never lost. A template rejection switches that
card type off for the rest of the presenter's life (loud structured error, then
Markdown / text permission prompts).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Hashable
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Any

from channelkit.platforms.common.projection_queue import ProjectionQueue
from channelkit.platforms.common.streamed import StreamedText
from channelkit.platforms.common.types import Clock, Scheduler
from channelkit.platforms.dingtalk._types import CallbackResult, InputRequestLike, SegmentLike
from channelkit.platforms.dingtalk.card_api import CardApi, CardTarget
from channelkit.platforms.dingtalk.ingress import CardCallback
from channelkit.platforms.dingtalk.question_cards import QuestionCardController
from channelkit.platforms.dingtalk.status_cards import StatusCardController, StatusRecord

__all__ = ["STOP_ACTION_ID", "DingtalkPresenter", "RunBinding"]

logger = logging.getLogger(__name__)

#: A status card's final content when its answer went out as Markdown instead.
ANSWER_SENT_BELOW = "(The answer was sent below as a message.)"

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
    is the Markdown sender. ``cancel_run(session_id, run_id)`` is the exact-run
    cancellation of ChannelBase. ``status_cards`` / ``question_cards`` enable the two card
    types; ``question_timeout`` is the effective question lifetime in seconds.
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
    ) -> None:
        self._submit = submit
        self._send_fallback = send_fallback
        self._cancel_run = cancel_run
        self._wait_timeout = wait_timeout
        self._lock = threading.RLock()
        self._runs: dict[str, RunBinding] = {}
        self.status_enabled = status_cards
        self.question_enabled = question_cards
        self.status: StatusCardController | None = None
        self.questions: QuestionCardController | None = None
        if status_cards:
            self.status = StatusCardController(
                api,
                clock=clock,
                scheduler=scheduler,
                model=model,
                flush_interval=flush_interval,
                on_template_rejected=self._disable_status_cards,
            )
        if question_cards:
            self.questions = QuestionCardController(
                api,
                clock=clock,
                scheduler=scheduler,
                timeout_seconds=question_timeout,
                send_text=lambda chat_id, text: self._send_fallback(chat_id, text, ""),
                on_template_rejected=self._disable_question_cards,
            )

    # -- switches -----------------------------------------------------------------------
    def _disable_status_cards(self) -> None:
        if self.status_enabled:
            logger.error("dingtalk status card template rejected; using Markdown from now on")
        self.status_enabled = False

    def _disable_question_cards(self) -> None:
        if self.question_enabled:
            logger.error("dingtalk question card template rejected; using text prompts from now on")
        self.question_enabled = False

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
            self._runs[run_id] = binding
            return binding

    def run(self, run_id: str) -> RunBinding | None:
        with self._lock:
            return self._runs.get(run_id)

    @property
    def live_runs(self) -> int:
        with self._lock:
            return len(self._runs)

    def _eligible(self, run_id: str, owner_id: str, chat_id: str) -> RunBinding | None:
        binding = self.run(run_id)
        if binding is None or binding.terminal:
            return None
        if binding.owner_key != owner_id or binding.chat_id != chat_id:
            return None
        return binding

    # -- output -------------------------------------------------------------------------------
    def append_output(self, segment: SegmentLike, chunk: str) -> bool:
        """Stream ``chunk`` into the segment's status card; False when no card takes it."""
        status = self.status
        if status is None or not self.status_enabled or not chunk:
            return False
        binding = self._eligible(segment.run_id, segment.owner.id, segment.target.chat_id)
        if binding is None:
            return False
        record = status.append(
            segment_id=segment.segment_id,
            run_id=binding.run_id,
            session_id=binding.session_id,
            owner_key=binding.owner_key,
            chat_id=binding.chat_id,
            target=binding.card_target,
            queue=binding.queue,
            chunk=chunk,
        )
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
        :meth:`terminalize_run`.

        ``text`` (the final response) is used only for a segment that streamed nothing:
        the part of it no earlier card of the run has taken (:meth:`undelivered_text`)
        becomes one completed card; when nothing is left, nothing is shown. Returns False
        when the segment gets no card (the caller sends :meth:`undelivered_text` itself).
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
            # part of it that no earlier segment of the run has shown
            remainder = self.undelivered_text(segment.run_id, text)
            if not remainder:
                return True
            if not self.append_output(segment, remainder):
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
                status.finalize(record, state, is_error=is_error, content=ANSWER_SENT_BELOW)
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
        if questions is None or not self.question_enabled:
            return "unsupported"
        binding = self._eligible(ctx.run_id, ctx.owner.id, ctx.target.chat_id)
        if binding is None or bool(ctx.target.is_group) != binding.is_group:
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
            binding = self._runs.pop(run_id, None)
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
    def route_callback(self, callback: CardCallback) -> CallbackResult:
        """Decide a card callback synchronously (correlate, authorize, claim)."""
        if callback.action_id == STOP_ACTION_ID:
            return self._claim_stop(callback)
        if self.questions is None:
            return CallbackResult.ignored(callback.actor_id)
        return self.questions.claim(callback)

    def _claim_stop(self, callback: CardCallback) -> CallbackResult:
        status = self.status
        if status is None:
            return CallbackResult.ignored(callback.actor_id)
        kind, record = status.claim_stop(callback.out_track_id, callback.actor_id)
        if record is None:
            return CallbackResult.ignored(callback.actor_id if kind == "ignored" else None)
        if kind == "forbidden":
            return CallbackResult("forbidden", callback.actor_id, record.target)

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

        return CallbackResult("accepted", callback.actor_id, record.target, execute)

    def close(self) -> None:
        """Finalize every live run as cancelled (used by ``ChannelBase.close``)."""
        with self._lock:
            run_ids = list(self._runs)
        for run_id in run_ids:
            self.terminalize_run(run_id, "cancelled", "shutdown")

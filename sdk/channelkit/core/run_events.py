"""What happens inside a live run: output segments, the bridge's events, hook calls and
cancellation.

:class:`RunEvents` turns the agent's events (text chunks, response boundaries, tool
calls) into lazily opened output segments and hook calls posted on the run's lane, and
implements exact-run cancellation (local before the prompt went out, the bridge's cancel
afterwards; text held while a cancel is pending and released if it fails). Every method
that ends in ``_locked`` expects ``run.lock`` held.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from channelkit.agents.base import ToolCallEvent
from channelkit.core.runs import CancelAttempt, Run, new_id
from channelkit.core.text import sanitize_text
from channelkit.core.types import (
    CancellationReason,
    LifecycleEvent,
    LifecycleToolCall,
    LifecycleType,
    OutputSegmentContext,
    RunQueuedEvent,
    SegmentEndReason,
    SessionTarget,
    SettlementReason,
)

if TYPE_CHECKING:
    from channelkit.core.channel import ChannelBase

__all__ = ["RunEvents"]

logger = logging.getLogger("channelkit.core.channel")


class RunEvents:
    """Segments, sink handlers, hook callers and cancellation of the channel's runs."""

    def __init__(self, channel: ChannelBase) -> None:
        self._ch = channel

    # -- segments (callers hold run.lock) ---------------------------------------------

    def ensure_segment_locked(self, run: Run) -> OutputSegmentContext | None:
        if run.owner is None or run.kind != "inbound":
            return None
        segment = run.segment
        if segment is None:
            segment = OutputSegmentContext(
                self._ch.name,
                run.session_id,
                run.run_id,
                new_id(),
                run.owner,
                run.target,
                run.message_id,
            )
            run.segment = segment
        return segment

    def close_segment_locked(self, run: Run) -> OutputSegmentContext | None:
        segment = run.segment
        run.segment = None
        return segment

    def post_segment_end(
        self, run: Run, segment: OutputSegmentContext, reason: SegmentEndReason
    ) -> None:
        self._ch.lanes.post(run.lane, self.call_segment_end, run, segment, reason)

    def release_held_locked(self, run: Run) -> None:
        if not run.held:
            return
        held = run.held
        run.held = []
        for chunk in held:
            self.post_chunk_locked(run, chunk)

    def post_chunk_locked(self, run: Run, chunk: str) -> None:
        had_text = run.segment is not None or (run.owner is None and bool(run.shown_parts))
        run.raw_parts.append(chunk)
        if run.break_pending:
            run.break_pending = False
            if had_text and not chunk.startswith("\n\n"):
                # a tool call (or another non-text event) interrupted the text: the next
                # words start a new paragraph instead of being glued to the last ones
                chunk = "\n\n" + chunk.lstrip("\n")
        run.shown_parts.append(chunk)
        segment = self.ensure_segment_locked(run)
        event = LifecycleEvent(
            LifecycleType.TEXT_CHUNK,
            self._ch.name,
            run.target.chat_id,
            run.session_id,
            run.run_id,
            run.owner,
            run.message_id,
            chunk,
            thread_id=run.target.thread_id,
        )
        self._ch.lanes.post(run.lane, self.call_chunk, run, event, chunk, segment)

    # -- sink handlers ----------------------------------------------------------------

    def on_chunk(self, run: Run, session_id: str, chunk: str) -> None:
        if not chunk or session_id != run.session_id:
            return
        with run.lock:
            if run.done or run.cancelled or run.terminal:
                return
            if run.cancel_pending:
                run.held.append(chunk)
                return
            if run.held:
                self.release_held_locked(run)
            self.post_chunk_locked(run, chunk)

    def on_boundary(self, run: Run, session_id: str) -> None:
        if session_id != run.session_id:
            return
        with run.lock:
            if not run.live_locked() or run.cancel_pending:
                return
            segment = self.close_segment_locked(run)
            if segment is not None:
                self.post_segment_end(run, segment, SegmentEndReason.RESPONSE_BOUNDARY)

    def on_tool_call(self, run: Run, event: ToolCallEvent) -> None:
        if event.session_id != run.session_id:
            return
        with run.lock:
            lifecycle: LifecycleEvent | None = None
            if run.live_locked() and not run.cancel_pending:
                lifecycle = self._ch._event(
                    run,
                    LifecycleType.TOOL_CALL,
                    tool_call=LifecycleToolCall(
                        session_id=event.session_id,
                        tool_call_id=event.tool_call_id,
                        kind=sanitize_text(event.kind, 20),
                        title=sanitize_text(event.title, 80),
                        status=sanitize_text(event.status, 20),
                    ),
                )
            if run.done:
                return
            run.break_pending = True
            self._ch.lanes.post(run.lane, self.call_tool_call, run, lifecycle, event)

    # -- hook callers (run on lanes; never raise) -------------------------------------

    def hook_failed(self, hook: str, run: Run, exc: BaseException, detail: str = "") -> None:
        logger.error(
            "[%s] %s threw%s for session %s run %s: %s",
            self._ch.name,
            hook,
            detail,
            run.session_id,
            run.run_id,
            exc,
            exc_info=True,
        )

    def call_lifecycle(self, run: Run, event: LifecycleEvent) -> None:
        try:
            self._ch.on_task_lifecycle(event)
        except Exception as exc:
            self.hook_failed("on_task_lifecycle", run, exc, f" for {event.type}")

    def call_chunk(
        self, run: Run, event: LifecycleEvent, chunk: str, segment: OutputSegmentContext | None
    ) -> None:
        try:
            self._ch.on_task_lifecycle(event)
        except Exception as exc:
            self.hook_failed("on_task_lifecycle", run, exc, " for text_chunk")
        try:
            self._ch.on_response_chunk(run.target.chat_id, chunk, run.session_id, segment)
        except Exception as exc:
            self.hook_failed("on_response_chunk", run, exc)

    def call_segment_end(
        self, run: Run, segment: OutputSegmentContext, reason: SegmentEndReason
    ) -> None:
        try:
            self._ch.on_output_segment_end(run.target.chat_id, run.session_id, segment, reason)
        except Exception as exc:
            self.hook_failed("on_output_segment_end", run, exc, f" ({reason})")

    def call_tool_call(
        self, run: Run, lifecycle: LifecycleEvent | None, raw: ToolCallEvent
    ) -> None:
        if lifecycle is not None:
            self.call_lifecycle(run, lifecycle)
        try:
            self._ch.on_tool_call(run.target.chat_id, raw)
        except Exception as exc:
            self.hook_failed("on_tool_call", run, exc)

    # =================================================================================
    # Cancellation
    # =================================================================================

    def cancel_run_obj(self, run: Run, reason: CancellationReason | str) -> bool:
        with run.lock:
            if run.cancelled:
                return True
            if run.past_cancel_point():
                return False
            if not run.prompting:
                # The prompt has not gone out yet: cancel locally, no RPC needed.
                run.cancelled = True
                run.held = []
                early = True
            else:
                early = False
        if early:
            self.finish_cancellation(run, reason)
            return True
        with run.lock:
            if run.is_cancelled():
                return True
            if run.past_cancel_point():
                return False
            attempt = run.cancel_attempt
            first = attempt is None
            if attempt is None:
                attempt = run.cancel_attempt = CancelAttempt()
                run.cancel_pending = True
        if not first:
            attempt.decided.wait(self._ch.config.cancel_timeout)
            return attempt.result
        try:
            try:
                ok = bool(self._ch._bridge.cancel_session(run.session_id))
            except Exception as exc:
                logger.warning(
                    "[%s] cancel_session failed for session=%s: %s",
                    self._ch.name,
                    run.session_id,
                    exc,
                )
                ok = False
            with run.lock:
                run.cancel_pending = False
                deferred = run.deferred
                run.deferred = []
                failed = not ok or run.past_cancel_point()
                if failed:
                    run.cancel_attempt = None
                    if not run.done:
                        self.release_held_locked(run)
                else:
                    run.cancelled = True
                    run.held = []
                    attempt.result = True
            if failed:
                # The cancel did not happen: apply resolutions that arrived meanwhile.
                for pending, pending_reason in deferred:
                    self._ch._requests.remove(pending, pending_reason)
                return False
            self.finish_cancellation(run, reason)
            return True
        finally:
            attempt.decided.set()

    def finish_cancellation(self, run: Run, reason: CancellationReason | str) -> None:
        # Settlement first, so listeners see run_cancelled before any collapsed bridge
        # cancellation; then the run's single cancelled lifecycle event.
        self._ch._requests.remove_for_session(run.session_id, SettlementReason.RUN_CANCELLED)
        with run.lock:
            if run.terminal:
                return
            run.terminal = True
            segment = self.close_segment_locked(run)
            if segment is not None:
                self.post_segment_end(run, segment, SegmentEndReason.CANCELLED)
            self._ch.lanes.post(
                run.lane,
                self.call_lifecycle,
                run,
                self._ch._event(run, LifecycleType.CANCELLED, reason=reason),
            )

    @staticmethod
    def shown_response(run: Run, response: str) -> str:
        """The final response as the person saw it streamed: where a bridge returns
        everything it streamed, the paragraph breaks added after tool calls are kept."""
        if not run.shown_parts:
            return response
        raw = "".join(run.raw_parts)
        if raw == "" or not response.startswith(raw):
            return response
        return "".join(run.shown_parts) + response[len(raw) :]

    # -- queue and busy notices -----------------------------------------------------

    def queued_event(self, run: Run, ahead: int, *, first: bool) -> RunQueuedEvent:
        return RunQueuedEvent(
            channel_name=self._ch.name,
            chat_id=run.target.chat_id,
            session_id=run.session_id,
            run_id=run.run_id,
            owner=run.owner,
            message_id=run.message_id,
            ahead=ahead,
            first=first,
            thread_id=run.target.thread_id,
        )

    def post_queued(self, run: Run, event: RunQueuedEvent) -> None:
        try:
            self._ch.lanes.post(run.lane, self.call_queued, run, event)
        except Exception:
            logger.debug("[%s] queue notice not posted", self._ch.name, exc_info=True)

    def call_queued(self, run: Run, event: RunQueuedEvent) -> None:
        with run.lock:
            if run.done or run.prompting or run.cancelled:
                return  # it started (or ended) meanwhile: the notice is stale
        try:
            self._ch.on_run_queued(event)
        except Exception as exc:
            self._ch._events.hook_failed("on_run_queued", run, exc)

    def post_rejected(self, target: SessionTarget, reason: str) -> None:
        def notify() -> None:
            try:
                self._ch.on_run_rejected(target, reason)
            except Exception:
                logger.exception("[%s] on_run_rejected failed", self._ch.name)

        try:
            self._ch.lanes.post(("chat", target.chat_id, target.thread_id or ""), notify)
        except Exception:
            logger.warning("[%s] busy notice not sent (pool closed)", self._ch.name)

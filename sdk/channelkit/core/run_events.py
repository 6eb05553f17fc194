"""What happens inside a live run: output segments, the bridge's events and hook calls.

`RunEvents` turns the agent's events (text chunks, response boundaries, tool
calls, presentations) into lazily opened output segments and hook calls posted on the
run's lane, in event order; it builds the run's lifecycle events and its queue and busy
notices. Every method that ends in ``_locked`` expects ``run.lock`` held. Text is held
while a cancel is pending (`channelkit.core.cancellation` releases it when the
cancel fails).

A presentation (``Turn.present``) ends the current output segment under the run's lock
and is delivered on the run's lane, so it shows after the text said before it and before
any later text; it first waits (bounded) for the adapter to have written the run's
earlier output (``await_run_output``). A file or image (``Turn.send_file``) is ordered
the same way and then handed to the channel's `FileDeliveries` on the run's lane.

It calls the channel only through `ChannelHooks` (the
public hooks) and never raises out of a hook call.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from channelkit.agents.base import FileEvent, PresentationEvent, ToolCallEvent
from channelkit.core.runs import Run, new_id
from channelkit.core.text import sanitize_text
from channelkit.core.types import (
    LifecycleEvent,
    LifecycleToolCall,
    LifecycleType,
    OutputSegmentContext,
    RunQueuedEvent,
    SegmentEndReason,
    SessionTarget,
)
from channelkit.observability import hub
from channelkit.observability.observer import RunReport, chat_hash

if TYPE_CHECKING:
    from channelkit.core.hooks import ChannelHooks
    from channelkit.core.outbound_files import FileDeliveries
    from channelkit.runtime.serial import KeyedSerialQueue

__all__ = ["PRESENTATION_ORDER_WAIT_S", "RunEvents"]

logger = logging.getLogger("channelkit.core.channel")

#: How long a run's presentation waits for the run's earlier output to reach the platform.
PRESENTATION_ORDER_WAIT_S = 10.0
#: Segment ends after which the run goes on (text-only output sends the text there).
_FLUSH_REASONS = frozenset({SegmentEndReason.RESPONSE_BOUNDARY, SegmentEndReason.INPUT_REQUESTED})


class RunEvents:
    """Segments, sink handlers and hook callers of one channel's runs.

    ``channel_name`` names the channel in events and logs, ``lanes`` are the channel's
    serial lanes (each run's hooks run on ``run.lane``), ``hooks`` the channel.
    """

    def __init__(self, channel_name: str, lanes: KeyedSerialQueue, hooks: ChannelHooks) -> None:
        self.channel_name = channel_name
        self.lanes = lanes
        self.hooks = hooks
        #: the platform label of the channel's metrics and log lines
        self.platform = hub.channel_opened(hooks)
        #: where a run's files go (`ChannelBase` sets it; None: files are refused)
        self.files: FileDeliveries | None = None

    # -- events -----------------------------------------------------------------------

    def event(self, run: Run, type_: LifecycleType, **fields: Any) -> LifecycleEvent:
        """A lifecycle event of ``run``."""
        return LifecycleEvent(
            type_,
            self.channel_name,
            run.target.chat_id,
            run.session_id,
            run.run_id,
            run.owner,
            run.message_id,
            thread_id=run.target.thread_id,
            **fields,
        )

    def post_lifecycle(self, run: Run, type_: LifecycleType, **fields: Any) -> None:
        """Post a lifecycle event of ``run`` on its lane."""
        self.lanes.post(run.lane, self.call_lifecycle, run, self.event(run, type_, **fields))

    # -- segments (callers hold run.lock) ---------------------------------------------

    def ensure_segment_locked(self, run: Run) -> OutputSegmentContext | None:
        if run.owner is None or run.kind != "inbound":
            return None
        segment = run.segment
        if segment is None:
            segment = OutputSegmentContext(
                self.channel_name,
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
        if segment is not None and self.hooks.text_only_output:
            # nothing showed it while it ran: its text is sent when its end hook runs
            # (at a boundary or a question), and the final answer leaves it out
            text = "".join(run.shown_parts[run.closed_parts :])
            run.closed_parts = len(run.shown_parts)
            run.flushed_chars += len(text)
            run.flush_texts[segment.segment_id] = text
        return segment

    def post_segment_end(
        self, run: Run, segment: OutputSegmentContext, reason: SegmentEndReason
    ) -> None:
        self.lanes.post(run.lane, self.call_segment_end, run, segment, reason)

    def end_segment_locked(self, run: Run, reason: SegmentEndReason) -> bool:
        """Close the open segment (if any) and post its end with ``reason``; True when
        a segment was open (it shows the text said since the last boundary)."""
        segment = self.close_segment_locked(run)
        if segment is None:
            return False
        self.post_segment_end(run, segment, reason)
        return True

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
            self.channel_name,
            run.target.chat_id,
            run.session_id,
            run.run_id,
            run.owner,
            run.message_id,
            chunk,
            thread_id=run.target.thread_id,
        )
        self.lanes.post(run.lane, self.call_chunk, run, event, chunk, segment)

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
            self.end_segment_locked(run, SegmentEndReason.RESPONSE_BOUNDARY)
            # text after a response boundary never joins the text before it (where it
            # shares a message: a run without segments)
            run.break_pending = True

    def on_tool_call(self, run: Run, event: ToolCallEvent) -> None:
        if event.session_id != run.session_id:
            return
        with run.lock:
            lifecycle: LifecycleEvent | None = None
            if run.live_locked() and not run.cancel_pending:
                lifecycle = self.event(
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
            self.lanes.post(run.lane, self.call_tool_call, run, lifecycle, event)

    def on_presentation(self, run: Run, event: PresentationEvent) -> None:
        """End the segment and post the presentation's delivery on the run's lane."""
        if event.session_id != run.session_id:
            return
        with run.lock:
            if not run.live_locked():
                return
            if run.cancel_pending:
                logger.warning(
                    "[%s] presentation of run %s dropped: a cancel is pending",
                    self.channel_name,
                    run.run_id,
                )
                return
            self.end_segment_locked(run, SegmentEndReason.RESPONSE_BOUNDARY)
            run.break_pending = True
            self.lanes.post(run.lane, self.deliver_presentation, run, event)

    def deliver_presentation(self, run: Run, event: PresentationEvent) -> None:
        """On the run's lane: send the presentation after the run's earlier output."""
        with run.lock:
            if run.cancelled:
                return
        try:
            self.hooks.await_run_output(run.run_id, PRESENTATION_ORDER_WAIT_S)
        except Exception as exc:
            self.hook_failed("await_run_output", run, exc)
        origin = run.target
        if event.chat_id:
            target = SessionTarget(
                origin.channel_name, origin.sender_id, event.chat_id, event.thread_id
            )
        else:
            target = origin
        try:
            self.hooks.send_presentation(target, event.payload, origin=origin)
        except Exception as exc:
            self.hook_failed("send_presentation", run, exc)

    def on_file(self, run: Run, event: FileEvent) -> None:
        """End the segment and post the file's delivery on the run's lane (its reply
        fails at once when the run is over or a cancel is pending)."""
        from channelkit.errors import FileNotDelivered

        if event.session_id != run.session_id or self.files is None:
            reason = "this channel does not send files" if self.files is None else "wrong session"
            _refuse(event, FileNotDelivered(name=event.file.name, reason=reason))
            return
        with run.lock:
            if not run.live_locked() or run.cancel_pending:
                _refuse(event, FileNotDelivered(name=event.file.name, reason="the run was stopped"))
                return
            self.end_segment_locked(run, SegmentEndReason.RESPONSE_BOUNDARY)
            run.break_pending = True
            self.lanes.post(run.lane, self.deliver_file, run, event)

    def deliver_file(self, run: Run, event: FileEvent) -> None:
        """On the run's lane: the file's first attempt, after the run's earlier output."""
        from channelkit.core.outbound_files import FileJob

        files = self.files
        assert files is not None  # on_file checked it
        try:
            self.hooks.await_run_output(run.run_id, PRESENTATION_ORDER_WAIT_S)
        except Exception as exc:
            self.hook_failed("await_run_output", run, exc)
        job = FileJob(
            target=run.target,
            file=event.file,
            image=event.image,
            caption=event.caption,
            reply=event.reply,
            lane=run.lane,
            texts=self.hooks.messages_for(run.owner.id if run.owner is not None else None),
            cancelled=run.is_cancelled,
        )
        files.attempt(job)

    # -- hook callers (run on lanes; never raise) -------------------------------------

    def hook_failed(self, hook: str, run: Run, exc: BaseException, detail: str = "") -> None:
        logger.error(
            "[%s] %s threw%s for session %s run %s: %s",
            self.channel_name,
            hook,
            detail,
            run.session_id,
            run.run_id,
            exc,
            exc_info=True,
        )

    def call_lifecycle(self, run: Run, event: LifecycleEvent) -> None:
        if event.type is LifecycleType.STARTED:
            run.started_at = time.monotonic()
            hub.run_started(self.report(run, "started"))
        try:
            self.hooks.on_task_lifecycle(event)
        except Exception as exc:
            self.hook_failed("on_task_lifecycle", run, exc, f" for {event.type}")
        if event.type is LifecycleType.STARTED:
            # the started hook shows the first sign (card, reaction, typing)
            self.reacted(run)
        elif event.type.terminal and not run.ended_observed:
            run.ended_observed = True
            hub.run_ended(self.report(run, str(event.type)))

    # -- what the observers see (on the run's lane) -----------------------------------

    def report(self, run: Run, outcome: str) -> RunReport:
        """``run`` as `channelkit.observability` reports it (no text, no people)."""
        now = time.monotonic()
        started = run.started_at
        target = run.target
        return RunReport(
            platform=self.platform,
            channel=self.channel_name,
            run_id=run.run_id,
            kind=run.kind,
            chat=chat_hash(self.channel_name, target.chat_id, target.thread_id),
            outcome=outcome,
            waited_s=(started if started is not None else now) - run.received_at,
            ran_s=0.0 if started is None or outcome == "started" else now - started,
            first_reaction_s=(None if run.reacted_at is None else run.reacted_at - run.received_at),
        )

    def reacted(self, run: Run) -> None:
        """The person saw the first sign of ``run`` now (once per person's run)."""
        if run.reacted_at is not None or run.kind != "inbound":
            return
        run.reacted_at = time.monotonic()
        hub.first_reaction(self.platform, run.reacted_at - run.received_at)

    def call_chunk(
        self, run: Run, event: LifecycleEvent, chunk: str, segment: OutputSegmentContext | None
    ) -> None:
        try:
            self.hooks.on_task_lifecycle(event)
        except Exception as exc:
            self.hook_failed("on_task_lifecycle", run, exc, " for text_chunk")
        try:
            self.hooks.on_response_chunk(run.target.chat_id, chunk, run.session_id, segment)
        except Exception as exc:
            self.hook_failed("on_response_chunk", run, exc)

    def call_segment_end(
        self, run: Run, segment: OutputSegmentContext, reason: SegmentEndReason
    ) -> None:
        with run.lock:
            text = run.flush_texts.pop(segment.segment_id, "")
        if reason in _FLUSH_REASONS and text.strip():
            # text-only output: the segment's text, before the question that follows
            try:
                self.hooks.send_message(
                    run.target.chat_id, text.strip("\n"), thread_id=run.target.thread_id
                )
            except Exception as exc:
                self.hook_failed("send_message", run, exc, f" ({reason} text)")
        try:
            self.hooks.on_output_segment_end(run.target.chat_id, run.session_id, segment, reason)
        except Exception as exc:
            self.hook_failed("on_output_segment_end", run, exc, f" ({reason})")

    def call_tool_call(
        self, run: Run, lifecycle: LifecycleEvent | None, raw: ToolCallEvent
    ) -> None:
        if lifecycle is not None:
            self.call_lifecycle(run, lifecycle)
        try:
            self.hooks.on_tool_call(run.target.chat_id, raw)
        except Exception as exc:
            self.hook_failed("on_tool_call", run, exc)

    @staticmethod
    def shown_response(run: Run, response: str) -> str:
        """The final response as the person saw it streamed: where a bridge returns
        everything it streamed, the paragraph breaks added after tool calls are kept.
        With text-only output, the text of the segments already sent is left out."""
        if not run.shown_parts:
            return response
        raw = "".join(run.raw_parts)
        if raw == "" or not response.startswith(raw):
            return response
        shown = "".join(run.shown_parts) + response[len(raw) :]
        if run.flushed_chars:
            shown = shown[run.flushed_chars :].lstrip("\n")
        return shown

    # -- queue and busy notices -----------------------------------------------------

    def queued_event(self, run: Run, ahead: int, *, first: bool) -> RunQueuedEvent:
        return RunQueuedEvent(
            channel_name=self.channel_name,
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
            self.lanes.post(run.lane, self.call_queued, run, event)
        except Exception:
            logger.debug("[%s] queue notice not posted", self.channel_name, exc_info=True)

    def post_queued_move(self, run: Run) -> None:
        """Post the newest queue place of ``run`` (``run.queued_ahead``) to its lane."""
        try:
            self.lanes.post(run.lane, self.call_queued_move, run)
        except Exception:
            with run.lock:
                run.move_posted = False
            logger.debug("[%s] queue move not posted", self.channel_name, exc_info=True)

    def call_queued_move(self, run: Run) -> None:
        with run.lock:
            run.move_posted = False  # a move from now on posts again
            ahead = run.queued_ahead
        self.call_queued(run, self.queued_event(run, ahead, first=False))

    def call_queued(self, run: Run, event: RunQueuedEvent) -> None:
        with run.lock:
            if run.done or run.prompting or run.cancelled:
                return  # it started (or ended) meanwhile: the notice is stale
        try:
            self.hooks.on_run_queued(event)
        except Exception as exc:
            self.hook_failed("on_run_queued", run, exc)
        else:
            self.reacted(run)  # the queue notice is the first sign

    def post_rejected(self, target: SessionTarget, reason: str) -> None:
        hub.run_ended(
            RunReport(
                platform=self.platform,
                channel=self.channel_name,
                run_id="",
                kind="inbound",
                chat=chat_hash(self.channel_name, target.chat_id, target.thread_id),
                outcome="rejected",
            )
        )

        def notify() -> None:
            try:
                self.hooks.on_run_rejected(target, reason)
            except Exception:
                logger.exception("[%s] on_run_rejected failed", self.channel_name)

        try:
            self.lanes.post(("chat", target.chat_id, target.thread_id or ""), notify)
        except Exception:
            logger.warning("[%s] busy notice not sent (pool closed)", self.channel_name)


def _refuse(event: FileEvent, error: BaseException) -> None:
    if not event.reply.done():
        try:
            event.reply.set_exception(error)
        except Exception:  # completed meanwhile
            pass

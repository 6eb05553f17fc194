"""Live output of a Slack run: one streamed message per visible output segment.

:class:`SegmentStreams` owns ``segment_id -> LiveSegment``. A segment's message is
opened on its first visible text (on the run's serial lane, so model output never waits
for the network) and written through a
:class:`~channelkit.platforms.common.SnapshotWriter`: one call in flight, one
replaceable pending snapshot, at least ``stream_interval_s`` (0.5 s) between two calls.

* **stream** mode: ``chat.startStream`` (a reply in the request's thread; in channels
  with ``recipient_user_id`` / ``recipient_team_id``) with the text so far, then
  ``chat.appendStream`` with what was added since the last call, and one
  ``chat.stopStream`` when the segment ends. A streamed segment therefore makes at most
  ``ceil(T / 0.5 s) + 2`` streaming calls over ``T`` seconds. The Stop button lives on a
  small control message posted next to the stream (streams take no blocks until they
  stop); it is updated to its terminal text when the segment ends.
* **update** mode (``streaming="update"``, or after ``chat.startStream`` was refused:
  the channel then stops trying to stream): ``chat.postMessage`` with the text and a
  Stop button, then ``chat.update`` at most once per ``update_interval_s`` (the failing
  segment itself keeps the stream interval), and a last ``chat.update`` without the
  button when it ends.

The final answer: :meth:`SegmentStreams.finish_run` ends the live segment with the part
of the run's text no earlier segment showed (``chat.stopStream`` markdown, or the last
``chat.update``); text no message showed goes through the delivery chain as
``chat.postMessage``.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

from channelkit.core import OutputSegmentContext
from channelkit.errors import ApiError
from channelkit.platforms.common import SnapshotWriter, StreamedText, first_notice
from channelkit.platforms.common.text import MAX_VISIBLE_CHARS
from channelkit.platforms.slack.api import SlackApi
from channelkit.platforms.slack.renderer import escape_mass_mentions
from channelkit.presentation.text import split_text

__all__ = ["STOP_ACTION", "LiveSegment", "SegmentStreams"]

logger = logging.getLogger(__name__)

#: ``action_id`` of the Stop button (its ``value`` is the segment id).
STOP_ACTION = "ck:stop"
#: Characters of ``markdown_text`` per streaming call (Slack: 12,000).
MAX_MARKDOWN = 12_000
#: Characters of ``text`` per posted / updated message.
MAX_TEXT = 3_000
FINALIZE_TIMEOUT = 10.0
TEXT_WORKING = "Working…"
TEXT_STOPPED = "_Stopped._"
TEXT_FINISHED = {"completed": "Done.", "cancelled": "Stopped.", "failed": "Failed."}

Submit = Callable[[Hashable, Callable[[], Any]], object]


@dataclass(eq=False)
class LiveSegment:
    """The native handle of one output segment."""

    segment: OutputSegmentContext
    channel: str
    anchor: str | None  # thread_ts the stream replies to
    recipient: tuple[str, str] | None  # (user, team) when streaming in a channel
    mode: str  # stream | update
    ts: str | None = None  # the message ts (stream or posted message)
    control_ts: str | None = None  # stream mode: the Stop button's message
    sent: str = ""  # the text the message shows
    writer: SnapshotWriter | None = None
    stopping: bool = False
    ended: bool = False
    noticed: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)


def stop_blocks(segment_id: str, text: str | None) -> list[dict[str, Any]]:
    """A section with ``text`` (when any) and the Stop button."""
    blocks: list[dict[str, Any]] = []
    if text:
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": text}})
    blocks.append(
        {
            "type": "actions",
            "block_id": "ck_stop",
            "elements": [
                {
                    "type": "button",
                    "action_id": STOP_ACTION,
                    "text": {"type": "plain_text", "text": "Stop"},
                    "style": "danger",
                    "value": segment_id,
                }
            ],
        }
    )
    return blocks


class SegmentStreams:
    """Per-segment live messages; see the module docstring."""

    def __init__(
        self,
        api: SlackApi,
        *,
        clock: Any,
        scheduler: Any,
        submit: Submit,
        mode: str = "stream",
        stream_interval: float = 0.5,
        update_interval: float = 1.0,
    ) -> None:
        self._api = api
        self._clock = clock
        self._scheduler = scheduler
        self._submit = submit
        self._mode = mode
        self._stream_interval = stream_interval
        self._update_interval = update_interval
        self._lock = threading.Lock()
        self._live: dict[str, LiveSegment] = {}
        self._shown: dict[str, StreamedText] = {}  # run id -> text closed segments showed
        self.streaming_available = mode == "stream"

    # -- state --------------------------------------------------------------------------
    def get(self, segment_id: str) -> LiveSegment | None:
        with self._lock:
            return self._live.get(segment_id)

    def live_for_run(self, run_id: str) -> list[LiveSegment]:
        with self._lock:
            return [s for s in self._live.values() if s.segment.run_id == run_id]

    def claim_stop(self, live: LiveSegment, user: str) -> str:
        """``"owner"`` (first Stop of the owner), ``"again"`` (already stopping),
        ``"notice"`` (a foreigner's first tap) or ``"ignore"``."""
        with live.lock:
            if user != live.segment.owner.id:
                return "notice" if first_notice(live.noticed, user) else "ignore"
            if live.stopping or live.ended:
                return "again"
            live.stopping = True
            return "owner"

    # -- input --------------------------------------------------------------------------
    def append(
        self, segment: OutputSegmentContext, chunk: str, anchor: str | None, im: bool, team: str
    ) -> None:
        """Add visible text to the segment's message (opened on the first text)."""
        if self._mode == "off" or not chunk:
            return
        with self._lock:
            live = self._live.get(segment.segment_id)
            if live is None:
                mode = "stream" if self.streaming_available else "update"
                recipient = None if im else (segment.owner.id, team)
                live = LiveSegment(segment, segment.target.chat_id, anchor, recipient, mode)
                interval = self._stream_interval if mode == "stream" else self._update_interval
                live.writer = SnapshotWriter(
                    functools.partial(self._write, live),
                    clock=self._clock,
                    scheduler=self._scheduler,
                    submit=functools.partial(self._submit, ("slack-stream", segment.run_id)),
                    min_interval=interval,
                    max_chars=MAX_VISIBLE_CHARS,
                )
                self._live[segment.segment_id] = live
        assert live.writer is not None
        live.writer.append(chunk)

    def _write(self, live: LiveSegment, snapshot: str) -> None:
        if live.mode == "stream":
            try:
                self._write_stream(live, snapshot)
                return
            except ApiError as exc:
                if live.ts is not None:
                    raise
                logger.info("slack streaming unavailable (%s); posting and updating", exc)
                self.streaming_available = False
                live.mode = "update"
        self._write_update(live, snapshot, final=False)

    def _write_stream(self, live: LiveSegment, snapshot: str) -> None:
        text = escape_mass_mentions(snapshot)
        if live.ts is None:
            first = text[:MAX_MARKDOWN]
            live.ts = self._api.start_stream(live.channel, live.anchor, first, live.recipient)
            live.sent = first
            self._post_control(live)
            return
        if not text.startswith(live.sent):
            return  # the bounded text dropped its head: the rest arrives with the final
        delta = text[len(live.sent) :][:MAX_MARKDOWN]
        if delta:
            self._api.append_stream(live.channel, live.ts, delta)
            live.sent += delta

    def _post_control(self, live: LiveSegment) -> None:
        try:
            blocks = stop_blocks(live.segment.segment_id, None)
            live.control_ts = self._api.post(live.channel, TEXT_WORKING, live.anchor, blocks)
        except Exception as exc:
            logger.warning("slack Stop button could not be posted: %s", type(exc).__name__)

    def _write_update(self, live: LiveSegment, snapshot: str, *, final: bool) -> None:
        text = escape_mass_mentions(snapshot)[-MAX_TEXT:] or " "
        blocks = [] if final else stop_blocks(live.segment.segment_id, None)
        body_blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": text}}, *blocks]
        if live.ts is None:
            live.ts = self._api.post(live.channel, text, live.anchor, body_blocks)
        else:
            self._api.update(live.channel, live.ts, text, body_blocks)
        live.sent = text

    # -- termination --------------------------------------------------------------------
    def end_segment(self, segment: OutputSegmentContext, state: str) -> str | None:
        """Close the segment's message with all of its text (``state``: completed /
        cancelled / failed). Returns the text nobody saw (no message, or a failed
        final write), else None."""
        live = self._pop(segment.segment_id)
        if live is None:
            return None
        assert live.writer is not None
        content = live.writer.finalize(FINALIZE_TIMEOUT)
        if state == "completed":
            self._shown.setdefault(segment.run_id, StreamedText()).add(content)
        return self._close(live, content, state)

    def finish_run(self, segment: OutputSegmentContext, text: str) -> str:
        """End the run's live segment as its final answer: returns the part of ``text``
        that still has to be posted (empty when the live message shows all of it)."""
        with self._lock:
            shown = self._shown.pop(segment.run_id, None)
        remainder = shown.remainder(text) if shown is not None else text
        live = self._pop(segment.segment_id)
        if live is None:
            return remainder
        assert live.writer is not None
        live.writer.finalize(FINALIZE_TIMEOUT)
        unsent = self._close(live, remainder, "completed")
        return unsent or ""

    def _close(self, live: LiveSegment, content: str, state: str) -> str | None:
        """Write ``content`` as the message's final text; the unseen rest or None."""
        with live.lock:
            live.ended = True
        suffix = "\n\n" + TEXT_STOPPED if state == "cancelled" else ""
        try:
            if live.ts is None:
                return content or None
            if live.mode == "stream":
                text = escape_mass_mentions(content)
                rest = text[len(live.sent) :] if text.startswith(live.sent) else ""
                pieces = split_text(rest + suffix, MAX_MARKDOWN) if rest + suffix else []
                for piece in pieces[:-1]:
                    self._api.append_stream(live.channel, live.ts, piece)
                self._api.stop_stream(live.channel, live.ts, pieces[-1] if pieces else None)
                if not text.startswith(live.sent):
                    return content[len(live.sent) :] or None
                return None
            full = escape_mass_mentions(content + suffix)
            if len(full) > MAX_TEXT:
                self._write_update(live, live.sent, final=True)
                return content[len(live.sent) :] or None
            self._write_update(live, content + suffix, final=True)
            return None
        except Exception as exc:
            logger.warning("slack segment close failed: %s", type(exc).__name__)
            return content[len(live.sent) :] or None
        finally:
            self._close_control(live, state)

    def _close_control(self, live: LiveSegment, state: str) -> None:
        if live.control_ts is None:
            return
        try:
            text = TEXT_FINISHED.get(state, "Done.")
            self._api.update(
                live.channel,
                live.control_ts,
                text,
                [{"type": "context", "elements": [{"type": "mrkdwn", "text": text}]}],
            )
        except Exception as exc:
            logger.warning("slack Stop button could not be removed: %s", type(exc).__name__)

    def _pop(self, segment_id: str) -> LiveSegment | None:
        with self._lock:
            return self._live.pop(segment_id, None)

    def discard_run(self, run_id: str) -> None:
        """Forget the run's shown text and close its leftovers (the run ended)."""
        with self._lock:
            self._shown.pop(run_id, None)
            leftovers = [s for s in self._live.values() if s.segment.run_id == run_id]
        for live in leftovers:
            self.end_segment(live.segment, "cancelled")

    def close(self) -> None:
        with self._lock:
            leftovers = list(self._live.values())
            self._live.clear()
            self._shown.clear()
        for live in leftovers:
            if live.writer is not None:
                live.writer.close()

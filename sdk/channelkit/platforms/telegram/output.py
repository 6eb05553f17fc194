"""Plain-message output of a Telegram run: each segment's text in order, sent once.

Telegram shows no streaming output; a run's text goes out as plain messages. Without
this module the text an agent wrote before asking a question would only arrive with
the final answer, after the question was answered. :class:`SegmentOutput` keeps the
visible text of the run's open output segment and

* sends it when the segment ends with ``response_boundary`` or ``input_requested``
  (on the run's lane, so before the question messages of the following
  ``present_user_input_request`` or the text permission prompt);
* at ``on_response_complete`` works out what is still unsent: the run's final text
  repeats everything streamed, so the prefix of closed segments (tracked by length and
  digest, :class:`~channelkit.platforms.common.StreamedText`) is dropped; text of a
  flush that failed is sent first, so nothing is lost;
* drops the open segment's text when the segment ends ``failed`` (as
  :class:`~channelkit.core.ChannelBase` does: a failed run delivers no final text);
* when the segment ends ``cancelled`` (``/cancel``, any cancellation), sends the text
  the agent wrote so far followed by :data:`CANCELLED_MARKER`, so what the agent said
  is kept.

The final answer goes through the shared delivery chain
(:mod:`channelkit.platforms.common.delivery`): :func:`final_parts` makes its parts, each
with the formatted (Telegram HTML) path first and plain text second.

State is per run, in a bounded map (1,000 runs), removed at the run's terminal
lifecycle event. Each segment keeps at most 20,000 characters (the newest, behind the
truncation marker); so does the unsent text of failed flushes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial

from channelkit.core import OutputSegmentContext
from channelkit.platforms.common import MAX_VISIBLE_CHARS, StreamedText, bound_text
from channelkit.platforms.common.delivery import DeliveryPath
from channelkit.platforms.telegram.markdown import PARSE_MODE, to_html
from channelkit.platforms.telegram.questions import MAX_MESSAGE_CHARS
from channelkit.runtime import BoundedMap, Clock

__all__ = [
    "CANCELLED_MARKER",
    "MAX_OUTPUT_RUNS",
    "SegmentOutput",
    "final_parts",
    "split_message",
]

logger = logging.getLogger(__name__)

#: Runs whose output is tracked at once (the oldest is dropped beyond it).
MAX_OUTPUT_RUNS = 1_000

#: ``send(chat_id, text, thread_id)``: send one message (``text`` fits one message).
SendText = Callable[[str, str, "str | None"], None]

#: Ends the partial text of a cancelled segment.
CANCELLED_MARKER = "[cancelled]"

_FLUSH_REASONS = frozenset({"response_boundary", "input_requested", "completed"})


def split_message(text: str, limit: int = MAX_MESSAGE_CHARS) -> list[str]:
    """Split ``text`` into Telegram-sized parts, preferring line breaks."""
    if len(text) <= limit:
        return [text]
    parts: list[str] = []
    rest = text
    while len(rest) > limit:
        cut = rest.rfind("\n", 0, limit)
        if cut < limit // 2:
            cut = limit
        parts.append(rest[:cut])
        rest = rest[cut:].lstrip("\n")
    if rest:
        parts.append(rest)
    return parts


#: ``send(text, parse_mode)``: one ``sendMessage`` of one part (``parse_mode`` or None).
SendPart = Callable[[str, "str | None"], object]


def final_parts(
    text: str, send: SendPart, *, limit: int = MAX_MESSAGE_CHARS
) -> list[tuple[DeliveryPath, ...]]:
    """The final answer's parts for the delivery chain, in order.

    Each part is tried formatted (its Markdown as Telegram HTML) and then as plain text
    (when Telegram rejects the entities, or the formatted sends keep failing); a part
    whose HTML equals it, or does not fit one message, has the plain path only.
    ``sendMessage`` has no idempotency key: no path is ``idempotent``.
    """
    parts: list[tuple[DeliveryPath, ...]] = []
    for part in split_message(text or " ", limit):
        plain = DeliveryPath("sendMessage plain", partial(send, part, None))
        formatted = to_html(part)
        if formatted == part or len(formatted) > limit:
            parts.append((plain,))
        else:
            html = DeliveryPath("sendMessage HTML", partial(send, formatted, PARSE_MODE))
            parts.append((html, plain))
    return parts


class _RunOutput:
    """One run's output state; touched only from the run's lane (one hook at a time)."""

    __slots__ = ("closed", "segment_id", "streamed", "text", "unsent")

    def __init__(self) -> None:
        self.segment_id: str | None = None
        self.text = ""  # the open segment's visible text (bounded)
        self.streamed = StreamedText()  # every chunk of the run
        self.closed = StreamedText()  # checkpoint: the chunks of the closed segments
        self.unsent = ""  # text of closed segments whose messages failed (bounded)

    def close_segment(self) -> str:
        """Close the open segment; returns everything now due (unsent first)."""
        due = self.unsent + self.text
        self.unsent = ""
        self.text = ""
        self.segment_id = None
        self.closed = self.streamed.copy()
        return due


class SegmentOutput:
    """Per-run segment text for an adapter with plain (non-streaming) output.

    ``send(chat_id, text, thread_id)`` sends one message (the adapter's
    ``send_message``; every ``text`` given fits one message). All methods are called
    from the run's hooks, on the run's lane; a different run may run concurrently.
    """

    def __init__(
        self,
        send: SendText,
        *,
        clock: Clock | None = None,
        max_runs: int = MAX_OUTPUT_RUNS,
        max_chars: int = MAX_VISIBLE_CHARS,
        message_chars: int = MAX_MESSAGE_CHARS,
    ) -> None:
        self._send = send
        self._max_chars = max_chars
        self._message_chars = message_chars
        self._runs: BoundedMap[str, _RunOutput] = BoundedMap(max_runs, clock=clock)

    @property
    def live_runs(self) -> int:
        """Runs with output state."""
        return len(self._runs)

    def append(self, segment: OutputSegmentContext, chunk: str) -> None:
        """Add a visible chunk to the segment's text."""
        if not chunk:
            return
        state = self._runs.setdefault(segment.run_id, _RunOutput)
        if state.segment_id != segment.segment_id:
            if state.text:
                # A segment that never ended here: keep its text for the next send.
                state.unsent = bound_text(state.close_segment(), self._max_chars)
            state.segment_id = segment.segment_id
        state.streamed.add(chunk)
        state.text = bound_text(state.text + chunk, self._max_chars)

    def segment_ended(self, segment: OutputSegmentContext, reason: str) -> None:
        """Send the segment's text (``response_boundary`` / ``input_requested`` /
        ``completed``), send it with :data:`CANCELLED_MARKER` (``cancelled``), or drop
        it (``failed``)."""
        state = self._runs.get(segment.run_id)
        if state is None:
            return
        if reason == "cancelled":
            due = state.close_segment()
            if due.strip():
                target = segment.target
                self._send_all(
                    target.chat_id, f"{due.rstrip()}\n\n{CANCELLED_MARKER}", target.thread_id
                )
            return
        if reason not in _FLUSH_REASONS:
            state.text = ""
            state.segment_id = None
            state.closed = state.streamed.copy()
            return
        due = state.close_segment()
        target = segment.target
        left = self._send_all(target.chat_id, due, target.thread_id)
        if left:
            state.unsent = bound_text(left, self._max_chars)

    def final_text(self, segment: OutputSegmentContext | None, text: str) -> str:
        """What of the run's final ``text`` is still unsent (may be ``""``).

        The prefix made of the run's closed segments is dropped (it was sent, or is
        the unsent text put first). When ``text`` does not start with that prefix, the
        open segment's own text is used, or, if it streamed nothing, all of ``text``.
        """
        if segment is None:
            return text
        state = self._runs.get(segment.run_id)
        if state is None:
            return text
        rest = state.closed.after_prefix(text)
        if rest is None:
            rest = state.text if state.text else text
        due = state.unsent + rest
        state.unsent = ""
        state.text = ""
        state.segment_id = None
        state.closed = state.streamed.copy()
        return due

    def send_final(self, chat_id: str, text: str, thread_id: str | None) -> None:
        """Send ``text`` (from :meth:`final_text`) in order; raises when a send fails."""
        if not text.strip():
            return
        for part in split_message(text, self._message_chars):
            self._send(chat_id, part, thread_id)

    def discard(self, run_id: str) -> None:
        """Forget a run (its terminal lifecycle event)."""
        self._runs.pop(run_id)

    def close(self) -> None:
        """Forget every run."""
        self._runs.clear()

    def _send_all(self, chat_id: str, text: str, thread_id: str | None) -> str:
        """Send ``text`` in parts; returns what could not be sent (``""`` when all was)."""
        rest = text
        if not rest.strip():
            return ""
        for part in split_message(text, self._message_chars):
            try:
                self._send(chat_id, part, thread_id)
            except Exception as exc:
                logger.warning(
                    "telegram: sending segment text failed (%s); it goes out with the "
                    "final answer",
                    type(exc).__name__,
                )
                return rest
            rest = rest[len(part) :].lstrip("\n")
        return ""

"""Live output of a Slack run: one streamed message per visible output segment.

`SegmentStreams` owns ``segment_id -> LiveSegment``. A segment's message is
opened on its first visible text (on the run's serial lane, so model output never waits
for the network) and written through a
`SnapshotWriter`: one call in flight, one
replaceable pending snapshot, at least ``stream_interval_s`` (0.5 s) between two calls.

* **stream** mode: ``chat.startStream`` (a reply in the request's thread; in channels
  with ``recipient_user_id`` / ``recipient_team_id``) with the text so far, then
  ``chat.appendStream`` with what was added since the last call, and one
  ``chat.stopStream`` when the segment ends. What was added is tracked by offset (the
  writer's running total), not by comparing the 20,000-character bounded text, so the
  stream keeps growing for the whole answer. Slack's documented limits are encoded:
  ``markdown_text`` holds at most `MAX_MARKDOWN` (12,000) characters per call, and
  ``chat.appendStream`` is a Tier 4 method (`APPEND_STREAM_CALLS_PER_MINUTE`, 100 a
  minute), so calls of a stream are at least `MIN_STREAM_INTERVAL` (0.6 s) apart
  whatever ``stream_interval_s`` says. A streamed segment therefore makes at most
  ``ceil(T / interval) + 2`` streaming calls over ``T`` seconds while text keeps coming.
  The end is one bounded call sequence: the rest of the text goes with
  ``chat.stopStream`` (one call, right after the last update at most); a rest longer
  than one call (only when output outran ``12,000`` characters per interval) is sent
  one ``chat.appendStream`` now and the remaining pieces spaced by the interval on the
  scheduler, the last one with ``chat.stopStream``; never a burst. The Stop button lives
  on a small control message posted next to the stream (streams take no blocks until
  they stop); it is updated to its terminal text when the stream stops.
* **update** mode (``streaming="update"``, or after ``chat.startStream`` was refused:
  the channel then stops trying to stream): ``chat.postMessage`` with the text and a
  Stop button, then ``chat.update`` at most once per ``update_interval_s`` (the failing
  segment itself keeps the stream interval), and a last ``chat.update`` without the
  button when it ends.

The final answer: `SegmentStreams.finish_run()` ends the live segment with the part
of the run's text no earlier segment showed (``chat.stopStream`` markdown, or the last
``chat.update``); text no message showed goes through the delivery chain as
``chat.postMessage`` (text a paced end could not stream is handed to ``on_unseen``).
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from channelkit.core import OutputSegmentContext
from channelkit.core.catalog import Messages, en, messages
from channelkit.errors import ApiError, Throttled
from channelkit.markdown import Dialect, render
from channelkit.platforms.common import SnapshotWriter, StreamedText, first_notice
from channelkit.platforms.common.text import MAX_VISIBLE_CHARS, TRUNCATION_MARKER
from channelkit.platforms.slack.api import SlackApi
from channelkit.platforms.slack.renderer import escape_mass_mentions

__all__ = [
    "APPEND_STREAM_CALLS_PER_MINUTE",
    "MAX_MARKDOWN",
    "MIN_STREAM_INTERVAL",
    "STOP_ACTION",
    "LiveSegment",
    "SegmentStreams",
]

logger = logging.getLogger(__name__)

#: ``action_id`` of the Stop button (its ``value`` is the segment id).
STOP_ACTION = "ck:stop"
#: Characters of ``markdown_text`` per streaming call (Slack documents 12,000 for
#: ``chat.startStream``, ``chat.appendStream`` and ``chat.stopStream``).
MAX_MARKDOWN = 12_000
#: ``chat.appendStream`` is a Tier 4 Web API method: 100 calls a minute.
APPEND_STREAM_CALLS_PER_MINUTE = 100
#: The shortest time between two streaming calls of a segment (the Tier 4 budget).
MIN_STREAM_INTERVAL = 60.0 / APPEND_STREAM_CALLS_PER_MINUTE
#: Characters of ``text`` per posted / updated message.
MAX_TEXT = 3_000
FINALIZE_TIMEOUT = 10.0
TEXT_WORKING = en("slack.working")
TEXT_STOPPED = en("slack.stopped")
TEXT_FINISHED = {
    "completed": en("slack.done"),
    "cancelled": en("slack.finished_stopped"),
    "failed": en("slack.failed"),
}

Submit = Callable[[Hashable, Callable[[], Any]], object]
Unseen = Callable[[OutputSegmentContext, str], object]
#: ``(segment, state, live message of a failed segment or None, unseen text or None)``
Closed = Callable[[OutputSegmentContext, str, "LiveSegment | None", "str | None"], object]


def fit_markdown(raw: str, limit: int = MAX_MARKDOWN) -> tuple[int, str]:
    """How many characters of ``raw`` fit in one ``markdown_text`` once mass mentions
    are escaped, and that escaped piece."""
    n = min(len(raw), limit)
    piece = escape_mass_mentions(raw[:n])
    while len(piece) > limit:  # escaping only lengthens: take fewer characters
        n -= len(piece) - limit
        piece = escape_mass_mentions(raw[:n])
    return n, piece


def markdown_pieces(raw: str, limit: int = MAX_MARKDOWN) -> list[tuple[str, str]]:
    """``raw`` cut into ``(raw piece, escaped piece)`` pairs, each escaped piece one
    ``markdown_text`` of at most ``limit`` characters."""
    pieces: list[tuple[str, str]] = []
    while raw:
        n, piece = fit_markdown(raw, limit)
        pieces.append((raw[:n], piece))
        raw = raw[n:]
    return pieces


def _body(snapshot: str, total: int) -> tuple[str, int]:
    """The text a bounded snapshot holds and the offset of its first character."""
    if total > len(snapshot) and snapshot.startswith(TRUNCATION_MARKER):
        body = snapshot[len(TRUNCATION_MARKER) :]
        return body, total - len(body)
    return snapshot, max(0, total - len(snapshot))


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
    control_due: bool = False  # stream mode: the Stop button is still to be posted
    sent: str = ""  # update mode: the text the message shows
    shown: int = 0  # stream mode: characters of the segment's text the stream showed
    shown_tail: str = ""  # stream mode: the last of them (at most 20,000)
    gapped: bool = False  # stream mode: text fell out of the bounded buffer unshown
    last_call_at: float | None = None  # stream mode: when the last streaming call went
    writer: SnapshotWriter | None = None
    stopping: bool = False
    ended: bool = False
    noticed: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)


def stop_blocks(
    segment_id: str, text: str | None, texts: Messages | None = None
) -> list[dict[str, Any]]:
    """A section with ``text`` (when any) and the Stop button (labelled in the locale of
    ``texts``, default English)."""
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
                    "text": {
                        "type": "plain_text",
                        "text": (texts or messages()).get("button.stop"),
                    },
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
        on_unseen: Unseen | None = None,
        team_of: Callable[[str], str] | None = None,
        on_closed: Closed | None = None,
    ) -> None:
        self._api = api
        #: the catalog texts of a segment's owner (the channel sets its ``messages_for``)
        self.texts_for: Callable[[str | None], Messages] = lambda _: messages()
        #: the workspace of a channel (a stream outside a DM names its recipient's team)
        self._team_of = team_of
        #: what follows a closed segment (its unseen text, the failed marker)
        self._on_closed = on_closed
        self._clock = clock
        self._scheduler = scheduler
        self._submit = submit
        self._mode = mode
        self._stream_interval = max(float(stream_interval), MIN_STREAM_INTERVAL)
        self._on_unseen = on_unseen
        self._update_interval = update_interval
        self._lock = threading.Lock()
        self._live: dict[str, LiveSegment] = {}
        self._shown: dict[str, StreamedText] = {}  # run id -> text closed segments showed
        #: paced stream ends still waiting for their timer (sent at once on close)
        self._paced: dict[int, tuple[object, LiveSegment, list[tuple[str, str]], str]] = {}
        self.streaming_available = mode == "stream"

    # -- state --------------------------------------------------------------------------
    def get(self, segment_id: str) -> LiveSegment | None:
        with self._lock:
            return self._live.get(segment_id)

    def run_ids(self) -> list[str]:
        """The runs with a live segment (each once, oldest segment first)."""
        with self._lock:
            return list(dict.fromkeys(s.segment.run_id for s in self._live.values()))

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
    def open_segment(self, segment: OutputSegmentContext) -> None:
        """`OutputSurface.open_segment`: nothing to do, the message comes with the first
        text."""

    def append(self, segment: OutputSegmentContext, chunk: str) -> bool:
        """Add visible text to the segment's message (opened on the first text, in the
        segment's thread, else under the message that started the run); True when a
        message takes it."""
        if self._mode == "off" or not chunk:
            return False
        channel = segment.target.chat_id
        anchor = segment.target.thread_id or segment.message_id
        im = channel.startswith("D")
        team = self._team_of(channel) if self._team_of is not None else ""
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
                    with_total=True,
                )
                self._live[segment.segment_id] = live
        assert live.writer is not None
        live.writer.append(chunk)
        return True

    def _write(self, live: LiveSegment, snapshot: str, total: int) -> None:
        if live.mode == "stream":
            try:
                self._write_stream(live, snapshot, total)
                return
            except ApiError as exc:
                if live.ts is not None:
                    raise
                logger.info("slack streaming unavailable (%s); posting and updating", exc)
                self.streaming_available = False
                live.mode = "update"
        self._write_update(live, snapshot, final=False)

    def _write_stream(self, live: LiveSegment, snapshot: str, total: int) -> None:
        """One streaming call with what is new since the last one (at most one
        ``markdown_text``; a longer lag is carried by the next calls). Safe to run again
        after `Throttled` (a rate-limited call, before it went out): what was streamed
        is marked shown, and a Stop button still to post is posted first."""
        if live.control_due:
            self._post_control(live)
        body, start = _body(snapshot, total)
        prefix = ""
        if live.shown < start:  # more than the bounded buffer arrived within one interval
            logger.info("slack stream lagged by more than %d characters", len(body))
            prefix = TRUNCATION_MARKER
            live.shown, live.gapped = start, True
        new = body[live.shown - start :]
        if not new:
            return
        n, piece = fit_markdown(new, MAX_MARKDOWN - len(prefix))
        if live.ts is None:
            live.ts = self._api.start_stream(
                live.channel, live.anchor, prefix + piece, live.recipient
            )
            self._mark_shown(live, new[:n])
            live.control_due = True
            self._post_control(live)
            return
        self._api.append_stream(live.channel, live.ts, prefix + piece)
        self._mark_shown(live, new[:n])

    def _mark_shown(self, live: LiveSegment, raw: str) -> None:
        live.last_call_at = self._clock.now()
        live.shown += len(raw)
        live.shown_tail = (live.shown_tail + raw)[-MAX_VISIBLE_CHARS:]

    def _post_control(self, live: LiveSegment) -> None:
        """Post the Stop button's message; `Throttled` is raised (the writer's next try
        posts it), any other failure leaves the stream without one."""
        try:
            texts = self._texts(live)
            blocks = stop_blocks(live.segment.segment_id, None, texts)
            working = texts.text(TEXT_WORKING)
            live.control_ts = self._api.post(live.channel, working, live.anchor, blocks)
        except Throttled:
            raise
        except Exception as exc:
            logger.warning("slack Stop button could not be posted: %s", type(exc).__name__)
        live.control_due = False

    def _write_update(self, live: LiveSegment, snapshot: str, *, final: bool) -> None:
        """Show ``snapshot``'s Markdown as mrkdwn (`channelkit.markdown`; a preview with
        open constructs closed until ``final``; its last `MAX_TEXT` part when longer)."""
        text = escape_mass_mentions(snapshot)[-MAX_TEXT:] or " "
        parts = render(snapshot, Dialect.SLACK, limit=MAX_TEXT, preview=not final)
        shown = parts[-1] if parts and (not final or len(parts) == 1) else text
        blocks = [] if final else stop_blocks(live.segment.segment_id, None, self._texts(live))
        body_blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": shown}}, *blocks]
        if live.ts is None:
            live.ts = self._api.post(live.channel, shown, live.anchor, body_blocks)
        else:
            self._api.update(live.channel, live.ts, shown, body_blocks)
        live.sent = text  # what the message holds of the segment's text

    # -- termination --------------------------------------------------------------------
    def close_segment(self, segment: OutputSegmentContext, reason: str) -> None:
        """`OutputSurface.close_segment`: `end_segment()` in the state of ``reason``
        (cancelled / failed, anything else completed), then ``on_closed(segment, state,
        live, unseen)`` (``live``: the failed segment's message, else None)."""
        state = {"cancelled": "cancelled", "failed": "failed"}.get(reason, "completed")
        live = self.get(segment.segment_id) if state == "failed" else None
        unseen = self.end_segment(segment, state)
        if self._on_closed is not None:
            self._on_closed(segment, state, live, unseen)

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
            self._shown_by_run(segment.run_id).add(content)
        if live.mode == "stream":
            body, start = _body(content, live.writer.total_chars)
            if live.shown >= start:
                return self._close_stream(live, body[live.shown - start :], state)
            return self._close_stream(live, TRUNCATION_MARKER + body, state)
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
        if live.mode == "stream":
            tail = live.shown_tail
            if live.gapped or remainder[max(0, live.shown - len(tail)) : live.shown] == tail:
                rest, unseen = remainder[live.shown :], ""
            else:  # the final text is not what streamed: the stream ends as it is
                rest, unseen = "", remainder[live.shown :]
            return (self._close_stream(live, rest, "completed") or "") + unseen
        unsent = self._close(live, remainder, "completed")
        return unsent or ""

    def _shown_by_run(self, run_id: str) -> StreamedText:
        with self._lock:
            return self._shown.setdefault(run_id, StreamedText())

    def _close_stream(self, live: LiveSegment, rest: str, state: str) -> str | None:
        """End a stream with ``rest`` (raw text it did not show yet) as one bounded call
        sequence; returns the text nobody saw (no stream, or a failed stop), else None."""
        with live.lock:
            live.ended = True
        if live.ts is None:
            self._close_control(live, state)
            return rest or None
        suffix = "\n\n" + self._texts(live).text(TEXT_STOPPED) if state == "cancelled" else ""
        pieces = markdown_pieces(rest)
        if suffix and (not pieces or len(pieces[-1][1]) + len(suffix) > MAX_MARKDOWN):
            pieces.append(("", ""))
        if pieces:
            pieces[-1] = (pieces[-1][0], pieces[-1][1] + suffix)
        if len(pieces) > 1:
            # more than one call's worth: every piece spaced by the interval (the first
            # one too, after the last update), the last one with the stop; never a burst
            since = self._clock.now() - (live.last_call_at or float("-inf"))
            self._schedule_piece(live, pieces, state, max(0.0, self._stream_interval - since))
            return None
        try:
            self._api.stop_stream(live.channel, live.ts, pieces[0][1] if pieces else None)
        except Exception as exc:
            logger.warning("slack segment close failed: %s", type(exc).__name__)
            self._close_control(live, state)
            return rest or None
        self._close_control(live, state)
        return None

    def _schedule_piece(
        self, live: LiveSegment, pieces: list[tuple[str, str]], state: str, delay: float
    ) -> None:
        """Send ``pieces`` one per interval on the run's stream lane (the last with
        ``chat.stopStream``); on a failure the pieces not shown go to ``on_unseen``."""
        key = ("slack-stream", live.segment.run_id)
        token = object()

        def send() -> None:
            with self._lock:
                if self._paced.pop(id(token), None) is None:
                    return  # close() sent the pieces already
            (_, piece), more = pieces[0], pieces[1:]
            assert live.ts is not None  # a paced end follows a started stream
            try:
                if more:
                    self._api.append_stream(live.channel, live.ts, piece)
                else:
                    self._api.stop_stream(live.channel, live.ts, piece or None)
            except Exception as exc:
                logger.warning("slack paced stream end failed: %s", type(exc).__name__)
                self._close_control(live, state)
                self._unseen(live, "".join(raw for raw, _ in pieces))
                return
            if more:
                self._schedule_piece(live, more, state, self._stream_interval)
            else:
                self._close_control(live, state)

        def due() -> None:
            try:
                self._submit(key, send)
            except Exception:
                logger.exception("could not queue a paced stream write")
                with self._lock:
                    if self._paced.pop(id(token), None) is None:
                        return
                self._unseen(live, "".join(raw for raw, _ in pieces))

        with self._lock:
            self._paced[id(token)] = (token, live, pieces, state)
        self._scheduler.call_later(delay, due)

    def _unseen(self, live: LiveSegment, unseen: str) -> None:
        """Hand text a paced stream end could not show to ``on_unseen``."""
        if unseen.strip() and self._on_unseen is not None:
            try:
                self._on_unseen(live.segment, unseen)
            except Exception:
                logger.exception("slack: delivering the unstreamed rest failed")

    def _close(self, live: LiveSegment, content: str, state: str) -> str | None:
        """Update mode: write ``content`` as the message's final text; the unseen rest
        or None."""
        with live.lock:
            live.ended = True
        suffix = "\n\n" + self._texts(live).text(TEXT_STOPPED) if state == "cancelled" else ""
        try:
            if live.ts is None:
                return content or None
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

    def _texts(self, live: LiveSegment) -> Messages:
        """The texts the segment's owner reads."""
        return self.texts_for(live.segment.owner.id)

    def _close_control(self, live: LiveSegment, state: str) -> None:
        if live.control_ts is None:
            return
        try:
            text = self._texts(live).text(TEXT_FINISHED.get(state, TEXT_FINISHED["completed"]))
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
        """Abandon live writers; a paced stream end still waiting sends its remaining
        pieces now (nothing of a finished answer is dropped)."""
        with self._lock:
            leftovers = list(self._live.values())
            self._live.clear()
            self._shown.clear()
            paced = list(self._paced.values())
            self._paced.clear()
        for live in leftovers:
            if live.writer is not None:
                live.writer.close()
        for _, live, pieces, state in paced:
            self._send_now(live, pieces, state)

    def _send_now(self, live: LiveSegment, pieces: list[tuple[str, str]], state: str) -> None:
        assert live.ts is not None  # a paced end follows a started stream
        for n, (_, piece) in enumerate(pieces):
            try:
                if n < len(pieces) - 1:
                    self._api.append_stream(live.channel, live.ts, piece)
                else:
                    self._api.stop_stream(live.channel, live.ts, piece or None)
            except Exception as exc:
                logger.warning("slack stream end at close failed: %s", type(exc).__name__)
                self._unseen(live, "".join(raw for raw, _ in pieces[n:]))
                break
        self._close_control(live, state)


if TYPE_CHECKING:
    from channelkit.platforms.common.contract import OutputSurface

    def _satisfies_the_contract(streams: SegmentStreams) -> None:
        """mypy: the segment streams are Slack's output surface."""
        surface: OutputSurface = streams
        del surface

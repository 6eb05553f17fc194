"""Plain-message output of a Telegram run: each segment's text in order, sent once.

Telegram shows no streaming output; a run's text goes out as plain messages. Without
this module the text an agent wrote before asking a question would only arrive with
the final answer, after the question was answered. `SegmentOutput` keeps the
visible text of the run's open output segment and

* sends it when the segment ends with ``response_boundary`` or ``input_requested``
  (on the run's lane, so before the question messages of the following
  ``present_user_input_request`` or the text permission prompt);
* at ``on_response_complete`` works out what is still unsent: the run's final text
  repeats everything streamed, so the prefix of closed segments (tracked by length and
  digest, `StreamedText`) is dropped; text of a
  flush that failed is sent first, so nothing is lost;
* when the segment ends ``failed``, sends (or leaves on the streamed message) the text
  the agent wrote so far followed by `FAILED_MARKER` (never mistaken for an
  answer): the failure notice follows it, it never replaces it;
* when the segment ends ``cancelled`` (``/cancel``, any cancellation), sends the text
  the agent wrote so far followed by `CANCELLED_MARKER`, so what the agent said
  is kept; ending `STOPPED` (the channel is closing: SIGTERM) it is followed by
  `STOPPED_MARKER`.

The final answer goes through the shared delivery chain
(`channelkit.platforms.common.delivery`): `final_parts()` makes its parts, each
with the formatted (Telegram HTML) path first and plain text second.

State is per run, in a bounded map (1,000 runs), removed at the run's terminal
lifecycle event. Each segment keeps at most 20,000 characters (the newest, behind the
truncation marker); so does the unsent text of failed flushes.

Streaming (``TelegramConfig.streaming``, `LiveStreams`): while a segment is open
its text is also shown live, through one
`SnapshotWriter` per segment (one call in flight, one
replaceable pending snapshot, ``stream_interval_s`` - 0.5 s - between calls; the calls run
on the run's own stream lane, so appending never waits for the network):

* **draft** (private chats): an empty ``sendMessageDraft`` when the segment opens (the
  thinking placeholder), then the text so far rendered as a preview (Telegram HTML with
  the constructs still open closed, `formatted_parts()`; its last part) under one
  non-zero ``draft_id`` per segment. The segment's text is then sent with ``sendMessage``
  exactly as without streaming (the draft is only a preview). A draft Telegram *rejects*
  (4xx: drafts unavailable for the bot or chat) switches the segment, and later segments of
  that chat, to post-and-edit; any other failure stops streaming the segment, and the
  final ``sendMessage`` delivers its text.
* **edit** (groups, or ``streaming="edit"``): the first snapshot's preview (its first
  part) is posted with ``sendMessage``, later ones ``editMessageText`` it - at most one
  edit per second per chat (`ChatEditLimiter`, shared by every segment of the chat); a 429's
  ``retry_after`` holds the chat's next edit at least that long (a timer on the scheduler,
  never a sleeping worker). When the segment ends, its final text (formatted) replaces the
  streamed message by one last edit through the delivery chain (the limiter's wait is a
  scheduled retry); what does not fit 4,096 characters follows as new messages. A failed
  edit falls back to ``sendMessage`` of the part (the edit definitely failed: no
  duplicate). A cancelled segment's message keeps its text with `CANCELLED_MARKER`.

Previews and final messages are the same rendering (`channelkit.markdown`): a preview is
sent with ``parse_mode="HTML"``; one Telegram refuses ("can't parse entities") is sent
again as the plain rendering.
"""

from __future__ import annotations

import logging
import secrets
import threading
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from channelkit.core import OutputSegmentContext
from channelkit.core.catalog import en
from channelkit.errors import ApiError, RateLimited
from channelkit.markdown import Dialect, looks_plain, parse, render_document, safe_cut, split
from channelkit.platforms.common import (
    MAX_VISIBLE_CHARS,
    SnapshotWriter,
    StreamedText,
    bound_text,
)
from channelkit.platforms.common.delivery import DeliveryPath, DeliveryTarget
from channelkit.platforms.common.rate_limit import ChatRateLimiter, RateGate, Throttled
from channelkit.platforms.common.types import Scheduler, TimerHandle
from channelkit.platforms.telegram.questions import MAX_MESSAGE_CHARS
from channelkit.runtime import BoundedMap, Clock

__all__ = [
    "CANCELLED_MARKER",
    "EDIT_INTERVAL",
    "FAILED_MARKER",
    "MAX_OUTPUT_RUNS",
    "PARSE_MODE",
    "STOPPED",
    "STOPPED_MARKER",
    "ChatEditLimiter",
    "LiveStreams",
    "SegmentOutput",
    "StreamCalls",
    "final_parts",
    "formatted_parts",
    "is_entity_error",
    "split_message",
]

logger = logging.getLogger(__name__)

#: Runs whose output is tracked at once (the oldest is dropped beyond it).
MAX_OUTPUT_RUNS = 1_000

#: ``send(chat_id, text, thread_id)``: send one message (``text`` fits one message).
SendText = Callable[[str, str, "str | None"], None]

#: Ends the partial text of a cancelled segment.
CANCELLED_MARKER = en("marker.cancelled")
#: Ends the partial text of a segment whose run failed (the failure notice follows).
FAILED_MARKER = en("marker.failed")
#: Ends the partial text of a segment whose run was stopped by a shutdown (SIGTERM).
STOPPED_MARKER = en("marker.stopped")
#: The segment end reason the adapter passes when a run was cancelled by a shutdown.
STOPPED = "stopped"

_FLUSH_REASONS = frozenset({"response_boundary", "input_requested", "completed"})


#: The parse mode formatted parts are sent with.
PARSE_MODE = "HTML"


def is_entity_error(exc: BaseException) -> bool:
    """True for Telegram's 400 answer to text whose entities it cannot parse."""
    status = getattr(exc, "status", None)
    return status == 400 and "can't parse entities" in str(exc).lower()


def formatted_parts(
    text: str, limit: int = MAX_MESSAGE_CHARS, *, preview: bool = False
) -> list[tuple[str, str]]:
    """The agent's Markdown ``text`` as Telegram messages: one ``(html, plain)`` pair
    per part, in order, each within ``limit`` characters; ``[]`` when nothing shows.

    The text is parsed and split once (at block boundaries, `channelkit.markdown`);
    each part is rendered as Telegram HTML and as plain text (its fallback when
    Telegram refuses the entities). ``preview``: ``text`` is the stream so far, its
    open constructs are closed. A text without any Markdown that fits one message is
    sent exactly as written.
    """
    if len(text) <= limit and text.strip() and looks_plain(text):
        return [(text, text)]  # nothing to render (the common short reply)
    pairs: list[tuple[str, str]] = []
    for part in split(parse(text, preview=preview), Dialect.TELEGRAM, limit):
        html = render_document(part, Dialect.TELEGRAM)
        plain = render_document(part, Dialect.PLAIN)
        if len(plain) > limit:  # never expected (plain is never longer than HTML)
            plain = plain[: safe_cut(plain, limit)]
        pairs.append((html, plain))
    if len(pairs) == 1 and len(text) <= limit and pairs[0][0] == pairs[0][1] == text.strip():
        return [(text, text)]
    return pairs


def split_message(text: str, limit: int = MAX_MESSAGE_CHARS) -> list[str]:
    """Split plain ``text`` into Telegram-sized parts, preferring line breaks (never
    inside a grapheme cluster)."""
    if len(text) <= limit:
        return [text]
    parts: list[str] = []
    rest = text
    while len(rest) > limit:
        cut = rest.rfind("\n", 0, limit)
        if cut < limit // 2:
            cut = safe_cut(rest, limit)
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
    """The final answer's parts for the delivery chain, in order (`formatted_parts()`).

    Each part is tried formatted (Telegram HTML) and then as its plain rendering (when
    Telegram rejects the entities, or the formatted sends keep failing); a part whose
    HTML equals its plain text has the plain path only. ``sendMessage`` has no
    idempotency key: no path is ``idempotent``.
    """
    return _delivery_parts(formatted_parts(text, limit), send)


def _delivery_parts(
    pairs: Sequence[tuple[str, str]], send: SendPart
) -> list[tuple[DeliveryPath, ...]]:
    parts: list[tuple[DeliveryPath, ...]] = []
    for html, text in pairs or [(" ", " ")]:
        plain = DeliveryPath("sendMessage plain", partial(send, text, None))
        if html == text:
            parts.append((plain,))
        else:
            formatted = DeliveryPath("sendMessage HTML", partial(send, html, PARSE_MODE))
            parts.append((formatted, plain))
    return parts


#: Minimum seconds between two edits of messages in one chat (Telegram: about one a second).
EDIT_INTERVAL = 1.0
#: Chats whose edit times (and drafts-unavailable marks) are remembered at once.
MAX_CHATS = 1_000
#: Seconds a chat waits after a 429 without ``retry_after``.
DEFAULT_RETRY_AFTER = 1.0
#: Seconds the end of a segment waits for its streamed call in flight.
FINISH_TIMEOUT = 10.0

#: ``deliver(parts, target)``: hand parts to the channel's delivery chain.
Deliver = Callable[[Sequence[Sequence[DeliveryPath]], DeliveryTarget], object]


@dataclass(frozen=True)
class StreamCalls:
    """The Bot API calls a live segment makes (the adapter binds them to its api).

    ``draft(chat_id, draft_id, text, thread, parse_mode)``: ``sendMessageDraft``;
    ``post(chat_id, text, thread, parse_mode) -> message_id``: ``sendMessage``;
    ``edit(chat_id, message_id, text, parse_mode)``: ``editMessageText``
    (``parse_mode``: `PARSE_MODE` or None for plain text).
    """

    draft: Callable[[str, int, str, int | None, str | None], object]
    post: Callable[[str, str, int | None, str | None], int]
    edit: Callable[[str, int, str, str | None], object]


class ChatEditLimiter:
    """At most one edit per ``interval`` seconds per chat, slots granted in the order
    asked, none before a 429's ``retry_after`` ran out (thread-safe, ``max_chats``)."""

    def __init__(
        self, clock: Clock, *, interval: float = EDIT_INTERVAL, max_chats: int = MAX_CHATS
    ) -> None:
        self._clock = clock
        self._interval = interval
        self._max = max_chats
        self._lock = threading.Lock()
        # chat -> [next free slot, 429 hold end, last edit]
        self._chats: dict[str, list[float]] = {}

    def reserve(self, chat_id: str) -> float:
        """Book the chat's next free edit slot; returns the seconds until it. 0.0: the
        edit goes now (it is counted as made)."""
        now = self._clock.now()
        with self._lock:
            free, hold, last = self._entry_locked(chat_id)
            slot = max(now, free, hold, last + self._interval)
            entry = [slot + self._interval, hold, now if slot <= now else last]
            self._chats[chat_id] = entry
            return slot - now

    def claim(self, chat_id: str) -> bool:
        """Use a booked slot that is due: True (counted as made) unless another edit of
        the chat went less than ``interval`` ago or a 429 hold still runs."""
        now = self._clock.now()
        with self._lock:
            free, hold, last = self._entry_locked(chat_id)
            if now < hold or now < last + self._interval:
                return False
            self._chats[chat_id] = [max(free, now + self._interval), hold, now]
            return True

    def penalize(self, chat_id: str, seconds: float) -> None:
        """A 429: no edit of ``chat_id`` for ``seconds``."""
        until = self._clock.now() + max(0.0, seconds)
        with self._lock:
            free, hold, last = self._entry_locked(chat_id)
            self._chats[chat_id] = [max(free, until), max(hold, until), last]

    def _entry_locked(self, chat_id: str) -> list[float]:
        entry = self._chats.pop(chat_id, None)
        if entry is None:
            entry = [0.0, 0.0, float("-inf")]
        self._chats[chat_id] = entry  # most recent last
        while len(self._chats) > self._max:
            self._chats.pop(next(iter(self._chats)))
        return entry


def _rejected(exc: BaseException) -> bool:
    """Telegram refused the method for this bot or chat (4xx other than 429)."""
    return (
        isinstance(exc, ApiError)
        and not isinstance(exc, RateLimited)
        and not exc.retryable
        and 400 <= exc.status < 500
    )


def _thread(thread_id: str | None) -> int | None:
    try:
        return int(thread_id) if thread_id else None
    except ValueError:
        return None


class LiveStream:
    """One segment shown while it streams (a draft or a posted message); see the module
    docstring. Its platform calls run one at a time on the run's stream lane."""

    def __init__(self, streams: LiveStreams, segment: OutputSegmentContext, mode: str) -> None:
        self._streams = streams
        self.segment = segment
        self.chat_id = segment.target.chat_id
        self.thread = _thread(segment.target.thread_id)
        self.mode = mode  # "draft" | "edit"
        self.draft_id = secrets.randbelow(2**31 - 1) + 1  # non-zero, stable for the segment
        self.message_id: int | None = None  # the posted message (edit mode)
        self.shown: str | None = None  # the text of the last write Telegram accepted
        self.failed = False
        self._closed = False
        self._lock = threading.RLock()  # the writer (swapped on a rejected draft), appends
        self._io = threading.Lock()  # held during each platform call
        self._wake: TimerHandle | None = None
        self._slot: float | None = None  # the chat's edit slot this stream booked
        self.writer = self._new_writer(ready=mode == "edit")

    def take_slot(self) -> float:
        """0.0 when this stream may edit now (its slot is used up), else the seconds
        until its booked slot (`ChatEditLimiter`, first come first served)."""
        limiter = self._streams.limiter
        now = self._streams.clock.now()
        with self._lock:
            slot = self._slot
            if slot is not None and slot > now:
                return slot - now
            if slot is not None and limiter.claim(self.chat_id):
                self._slot = None
                return 0.0
            wait = limiter.reserve(self.chat_id)  # none booked, or the slot was lost
            self._slot = now + wait if wait > 0 else None
            return wait

    def rate_limited(self, exc: RateLimited) -> float:
        """A 429 on an edit: hold the chat; returns the seconds to this stream's next slot."""
        wait = exc.retry_after if exc.retry_after is not None else DEFAULT_RETRY_AFTER
        self._streams.limiter.penalize(self.chat_id, wait)
        with self._lock:
            self._slot = None
        return max(wait, self.take_slot())

    @property
    def posted(self) -> bool:
        """True when a streamed message exists that the final text should replace."""
        return self.mode == "edit" and self.message_id is not None

    def _new_writer(self, *, ready: bool) -> SnapshotWriter:
        s = self._streams
        return SnapshotWriter(
            self._write,
            clock=s.clock,
            scheduler=s.scheduler,
            submit=partial(s.submit, self.segment.run_id),
            min_interval=s.interval,
            ready=ready,
            on_error=self._on_error,
        )

    def open(self) -> None:
        """Draft mode: queue the thinking placeholder (an empty draft), then stream."""
        if self.mode == "draft":
            self._streams.submit(self.segment.run_id, self._placeholder)

    def append(self, chunk: str) -> None:
        with self._lock:
            self.writer.append(chunk)

    def finish(self, timeout: float = FINISH_TIMEOUT) -> None:
        """No more streamed calls: cancel the timers and wait for the call in flight."""
        with self._lock:
            self._closed = True
            writer, wake, self._wake = self.writer, self._wake, None
        if wake is not None:
            wake.cancel()
        writer.finalize(timeout)
        with self._io:  # a placeholder in flight ends first
            pass

    def abandon(self) -> None:
        with self._lock:
            self._closed = True
            wake, self._wake = self._wake, None
            self.writer.close()
        if wake is not None:
            wake.cancel()

    # -- on the stream lane --------------------------------------------------------------
    def _placeholder(self) -> None:
        error: Exception | None = None
        with self._io:
            if self._closed:
                return
            try:
                # no token: no placeholder, the text follows when the chat has one
                if self._streams.stream_wait(self.chat_id) <= 0:
                    self._streams.calls.draft(self.chat_id, self.draft_id, "", self.thread, None)
            except Exception as exc:
                error = exc
        if error is not None:
            self._on_error(error)
        self._start_writer()

    def _start_writer(self) -> None:
        with self._lock:
            writer = self.writer
        writer.start(mark_written=False)  # the text follows at once

    def _write(self, snapshot: str) -> None:
        calls = self._streams.calls
        with self._io:
            if self._closed:
                return
            try:
                pairs = formatted_parts(snapshot, preview=True)
                if not pairs:
                    return
                if self.mode == "draft":
                    html, plain = pairs[-1]
                    if self._throttled():
                        return
                    self.shown = _formatted_or_plain(
                        html,
                        plain,
                        lambda text, mode: calls.draft(
                            self.chat_id, self.draft_id, text, self.thread, mode
                        ),
                    )
                    return
                html, plain = pairs[0]
                if not plain.strip() or html == self.shown:
                    return
                if self.message_id is None:
                    if self._throttled():
                        return
                    posted: list[int] = []
                    self.shown = _formatted_or_plain(
                        html,
                        plain,
                        lambda text, mode: posted.append(
                            calls.post(self.chat_id, text, self.thread, mode)
                        ),
                    )
                    self.message_id = posted[-1]
                    return
                wait = self.take_slot()
                if wait > 0:
                    self._defer(wait)
                    return
                if self._throttled():
                    return
                message_id = self.message_id
                self.shown = _formatted_or_plain(
                    html,
                    plain,
                    lambda text, mode: calls.edit(self.chat_id, message_id, text, mode),
                )
            except RateLimited as exc:
                if self.mode == "edit":
                    self._defer(self.rate_limited(exc))
                else:
                    after = exc.retry_after
                    self._defer(after if after is not None else DEFAULT_RETRY_AFTER)

    def _throttled(self) -> bool:
        """The chat's shared token bucket is empty: write the newest text later (True)."""
        wait = self._streams.stream_wait(self.chat_id)
        if wait <= 0:
            return False
        self._defer(wait)
        return True

    def _defer(self, wait: float) -> None:
        """Write the newest text again in ``wait`` seconds (one timer at most)."""
        with self._lock:
            if self._closed or self._wake is not None:
                return
            self._wake = self._streams.scheduler.call_later(wait, self._repend)

    def _repend(self) -> None:
        with self._lock:
            self._wake = None
            if not self._closed:
                self.writer.replace(self.writer.content)

    def _on_error(self, exc: BaseException) -> None:
        chat_drafts_rejected = self.mode == "draft" and _rejected(exc)
        logger.warning(
            "telegram: streaming %s of a segment failed (%s); %s",
            self.mode,
            type(exc).__name__,
            "switching to post-and-edit"
            if chat_drafts_rejected
            else "its text goes out with the segment's final message",
        )
        if not chat_drafts_rejected:
            with self._lock:
                self.failed = True
                self.writer.close()
            return
        self._streams.drafts_rejected(self.chat_id)
        with self._lock:
            if self._closed:
                return
            old = self.writer
            old.close()
            self.mode = "edit"
            self.writer = self._new_writer(ready=True)
            self.writer.replace(old.content)


def _formatted_or_plain(html: str, plain: str, call: Callable[[str, str | None], object]) -> str:
    """``call(html, PARSE_MODE)``, or ``call(plain, None)`` when the HTML is the plain
    text or Telegram refuses its entities; returns the text shown."""
    if html == plain:
        call(plain, None)
        return plain
    try:
        call(html, PARSE_MODE)
    except ApiError as exc:
        if not is_entity_error(exc):
            raise
        logger.info("telegram rejected a formatted preview; showing it as plain text")
        call(plain, None)
        return plain
    return html


class LiveStreams:
    """Opens a `LiveStream` per segment (``mode``: ``TelegramConfig.streaming``,
    not ``"off"``) and builds the final delivery of a streamed segment.

    ``submit(run_id, fn)`` queues ``fn`` on the run's stream lane (one at a time, in
    order); ``deliver(parts, target)`` hands parts to the channel's delivery chain.
    """

    def __init__(
        self,
        calls: StreamCalls,
        *,
        clock: Clock,
        scheduler: Scheduler,
        submit: Callable[[Hashable, Callable[[], Any]], object],
        deliver: Deliver,
        mode: str = "draft",
        interval: float = 0.5,
        channel_name: str = "telegram",
        rate_limiter: ChatRateLimiter | None = None,
    ) -> None:
        self.calls = calls
        self.clock = clock
        self.scheduler = scheduler
        self.submit = submit
        self.deliver = deliver
        self.mode = mode
        self.interval = interval
        self.channel_name = channel_name
        self.limiter = ChatEditLimiter(clock)
        #: the chats' shared token buckets (None: only `ChatEditLimiter` paces edits)
        self.rate_limiter = rate_limiter
        self._lock = threading.Lock()
        self._no_drafts: dict[str, None] = {}  # chats whose drafts Telegram rejected

    def stream_wait(self, chat_id: str) -> float:
        """0.0 when a streamed write into ``chat_id`` may go now (its token taken), else
        the seconds to wait (`ChatRateLimiter.stream_wait()`)."""
        limiter = self.rate_limiter
        return 0.0 if limiter is None else limiter.stream_wait(chat_id)

    def drafts_rejected(self, chat_id: str) -> None:
        with self._lock:
            self._no_drafts[chat_id] = None
            while len(self._no_drafts) > MAX_CHATS:
                self._no_drafts.pop(next(iter(self._no_drafts)))

    def open(self, segment: OutputSegmentContext) -> LiveStream:
        with self._lock:
            drafts = segment.target.chat_id not in self._no_drafts
        private = not segment.target.is_group
        mode = "draft" if self.mode == "draft" and private and drafts else "edit"
        stream = LiveStream(self, segment, mode)
        stream.open()
        return stream

    def replace(self, stream: LiveStream, text: str, send: SendPart) -> None:
        """Deliver ``text`` (due at the segment's end) over ``stream``'s posted message:
        the first part replaces it (formatted edit, plain edit, then formatted / plain
        ``sendMessage``), the rest follows as new messages."""
        target = stream.segment.target
        owner = stream.segment.owner.id
        parts = self.replace_parts(stream, text, send)
        job = DeliveryTarget(self.channel_name, target.chat_id, stream.segment.run_id, owner)
        self.deliver(parts, job)

    def replace_parts(
        self, stream: LiveStream, text: str, send: SendPart
    ) -> list[tuple[DeliveryPath, ...]]:
        """The delivery parts of `replace()` (the edit paths first)."""
        pairs = formatted_parts(text) or [(" ", " ")]
        parts = _delivery_parts(pairs, send)
        html, first = pairs[0]
        limiter = self.rate_limiter
        gate = limiter.gate(stream.chat_id) if limiter is not None else None
        edits: list[DeliveryPath] = []
        if html != first:
            edits.append(self._edit_path(stream, html, PARSE_MODE, gate))
        edits.append(self._edit_path(stream, first, None, gate))
        parts[0] = (*edits, *parts[0])
        return parts

    def _edit_path(
        self, stream: LiveStream, text: str, parse_mode: str | None, gate: RateGate | None
    ) -> DeliveryPath:
        def edit() -> None:
            if parse_mode is None and text == stream.shown:
                return  # already shown as it is
            message_id = stream.message_id
            if message_id is None:
                raise ApiError("telegram: no streamed message to edit", status=400)
            wait = stream.take_slot()
            if wait > 0:  # our own pacing: the chain waits, no attempt is counted
                raise Throttled(wait)
            if gate is not None:
                gate()  # Throttled: the chain waits for the chat's token (no attempt)
            try:
                self.calls.edit(stream.chat_id, message_id, text, parse_mode)
            except RateLimited as exc:
                wait = stream.rate_limited(exc)
                raise RateLimited(str(exc), status=429, retry_after=wait) from exc
            stream.shown = text

        name = "editMessageText HTML" if parse_mode else "editMessageText plain"
        return DeliveryPath(name, edit, idempotent=True)


class _RunOutput:
    """One run's output state; touched only from the run's lane (one hook at a time)."""

    __slots__ = ("closed", "segment_id", "stream", "streamed", "text", "unsent")

    def __init__(self) -> None:
        self.segment_id: str | None = None
        self.stream: LiveStream | None = None  # the open segment shown live (streaming)
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
    ``streams`` shows each open segment live (None: ``streaming="off"``); ``send_part``
    (``(chat_id, thread_id) -> SendPart``) makes the ``sendMessage`` fallback of an edit.
    """

    def __init__(
        self,
        send: SendText,
        *,
        clock: Clock | None = None,
        max_runs: int = MAX_OUTPUT_RUNS,
        max_chars: int = MAX_VISIBLE_CHARS,
        message_chars: int = MAX_MESSAGE_CHARS,
        streams: LiveStreams | None = None,
        send_part: Callable[[str, str | None], SendPart] | None = None,
    ) -> None:
        self._send = send
        self.streams = streams
        self._send_part = send_part
        self._max_chars = max_chars
        self._message_chars = message_chars
        self._runs: BoundedMap[str, _RunOutput] = BoundedMap(max_runs, clock=clock)

    @property
    def live_runs(self) -> int:
        """Runs with output state."""
        return len(self._runs)

    def run_ids(self) -> list[str]:
        """The runs with output state (oldest first)."""
        return list(self._runs.keys())

    def open_segment(self, segment: OutputSegmentContext) -> None:
        """`OutputSurface.open_segment`: nothing to do, the segment's text (and its live
        stream) starts with its first chunk."""

    def append(self, segment: OutputSegmentContext, chunk: str) -> bool:
        """Add a visible chunk to the segment's text (True: it was taken; an empty chunk
        is not)."""
        if not chunk:
            return False
        state = self._runs.setdefault(segment.run_id, _RunOutput)
        if state.segment_id != segment.segment_id:
            self._end_stream(state)
            if state.text:
                # A segment that never ended here: keep its text for the next send.
                state.unsent = bound_text(state.close_segment(), self._max_chars)
            state.segment_id = segment.segment_id
            if self.streams is not None:
                state.stream = self.streams.open(segment)
        state.streamed.add(chunk)
        state.text = bound_text(state.text + chunk, self._max_chars)
        if state.stream is not None:
            state.stream.append(chunk)
        return True

    def close_segment(self, segment: OutputSegmentContext, reason: str) -> None:
        """`OutputSurface.close_segment`: `segment_ended()`."""
        self.segment_ended(segment, reason)

    def segment_ended(self, segment: OutputSegmentContext, reason: str) -> None:
        """Send the segment's text (``response_boundary`` / ``input_requested`` /
        ``completed``), or send it with `CANCELLED_MARKER` (``cancelled``),
        `STOPPED_MARKER` (`STOPPED`) or `FAILED_MARKER` (``failed``:
        the failure notice comes after it)."""
        state = self._runs.get(segment.run_id)
        if state is None:
            return
        stream = self._end_stream(state)
        if reason in ("cancelled", STOPPED, "failed"):
            due = state.close_segment()
            if due.strip():
                target = segment.target
                marker = {
                    "cancelled": CANCELLED_MARKER,
                    STOPPED: STOPPED_MARKER,
                    "failed": FAILED_MARKER,
                }[reason]
                text = f"{due.rstrip()}\n\n{marker}"
                if not self._replace(stream, text):
                    self._send_all(target.chat_id, text, target.thread_id)
            return
        if reason not in _FLUSH_REASONS:
            state.text = ""
            state.segment_id = None
            state.closed = state.streamed.copy()
            return
        due = state.close_segment()
        target = segment.target
        if due.strip() and self._replace(stream, due):
            return
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
        self._end_stream(state)
        rest = state.closed.after_prefix(text)
        if rest is None:
            rest = state.text if state.text else text
        due = state.unsent + rest
        state.unsent = ""
        state.text = ""
        state.segment_id = None
        state.closed = state.streamed.copy()
        return due

    def final_answer(
        self, segment: OutputSegmentContext, text: str, send: SendPart
    ) -> list[tuple[DeliveryPath, ...]]:
        """The delivery parts of what the run's final ``text`` still has to show
        (`final_text()`; ``[]`` when nothing): over the segment's streamed message
        when it has one (edit first, `LiveStreams.replace_parts()`), else new
        messages (`final_parts()`)."""
        state = self._runs.get(segment.run_id)
        stream = state.stream if state is not None else None
        due = self.final_text(segment, text)
        if not due.strip():
            return []
        if stream is not None and stream.posted and self.streams is not None:
            return self.streams.replace_parts(stream, due, send)
        return final_parts(due, send)

    def send_final(self, chat_id: str, text: str, thread_id: str | None) -> None:
        """Send ``text`` (from `final_text()`) in order; raises when a send fails."""
        if not text.strip():
            return
        for part in split_message(text, self._message_chars):
            self._send(chat_id, part, thread_id)

    def discard(self, run_id: str) -> None:
        """Forget a run (its terminal lifecycle event)."""
        state = self._runs.pop(run_id)
        if state is not None and state.stream is not None:
            state.stream.abandon()

    def close(self) -> None:
        """Forget every run."""
        for run_id in list(self._runs.keys()):
            self.discard(run_id)
        self._runs.clear()

    def _end_stream(self, state: _RunOutput) -> LiveStream | None:
        """Stop the open segment's live output (waits for its call in flight)."""
        stream, state.stream = state.stream, None
        if stream is not None:
            stream.finish()
        return stream

    def _replace(self, stream: LiveStream | None, text: str) -> bool:
        """Deliver ``text`` over ``stream``'s posted message; False when it has none."""
        if stream is None or not stream.posted or self.streams is None:
            return False
        if self._send_part is None:
            return False
        target = stream.segment.target
        self.streams.replace(stream, text, self._send_part(target.chat_id, target.thread_id))
        return True

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


if TYPE_CHECKING:
    from channelkit.platforms.common.contract import OutputSurface

    def _satisfies_the_contract(output: SegmentOutput) -> None:
        """mypy: the segment output is Telegram's output surface."""
        surface: OutputSurface = output
        del surface

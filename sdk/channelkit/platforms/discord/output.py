"""Live output of a Discord run: one message per visible output segment, edited as it
grows, with a Stop button.

`SegmentMessages` owns `segment_id -> LiveMessage`. A segment's message is posted on its
first visible text (on the run's serial lane, so model output never waits for the
network) and then edited through a `SnapshotWriter`: one edit in flight, one
replaceable pending snapshot, at least `edit_interval_s` (1 s by default) between two
writes. Every write goes through the REST rate limiter (`DiscordApi`), which waits out
the channel's message bucket, so a segment streamed for `T` seconds makes at most
`ceil(T / edit_interval_s) + 2` writes (the first post, the edits, the last edit) and
never runs into a 429 it could have foreseen.

While the segment runs, the message shows the Markdown so far (`channelkit.markdown`,
Discord dialect, open constructs closed) - its last `MAX_CONTENT` characters when longer
- and a Stop button whose `custom_id` is `ck:stop:<token>`: an opaque random token mapped
to the segment here, never a run or session id. `claim_stop()` decides a press: the
run's owner stops it once; anyone else gets an ephemeral notice (the channel answers it)
and nothing changes.

When the segment ends the message is edited once more without the button: all of its
text (its first part when longer than one message: the rest is returned as unseen text,
which the channel posts as further messages), with "Stopped." after a cancelled one. A
segment whose message was never posted returns all of its text as unseen.

The final answer: `SegmentMessages.finish_run()` ends the live segment with the part of
the run's text no earlier segment showed and returns what still has to be posted.
"""

from __future__ import annotations

import functools
import logging
import secrets
import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from channelkit.core import OutputSegmentContext
from channelkit.core.catalog import Messages, en, messages
from channelkit.markdown import Dialect, render
from channelkit.platforms.common import SnapshotWriter, StreamedText
from channelkit.platforms.common.text import MAX_VISIBLE_CHARS
from channelkit.platforms.discord.api import DiscordApi
from channelkit.runtime import BoundedMap

__all__ = [
    "MAX_CONTENT",
    "STOP_PREFIX",
    "TEXT_STOP",
    "TEXT_STOPPED",
    "LiveMessage",
    "SegmentMessages",
    "stop_components",
]

logger = logging.getLogger(__name__)

#: `custom_id` prefix of a Stop button (followed by the segment's opaque token).
STOP_PREFIX = "ck:stop:"
#: Characters of `content` per message (Discord allows 2,000).
MAX_CONTENT = 2_000
FINALIZE_TIMEOUT = 10.0
#: the Stop button's label and the marks of a stopped or failed segment's message, each
#: shown in its owner's language (`SegmentMessages.texts_for`)
TEXT_STOP = en("button.stop")
TEXT_STOPPED = en("discord.stopped")
TEXT_FAILED_MARK = en("discord.failed")
#: Ended segments whose Stop token is still recognised (a late press is ignored quietly).
MAX_ENDED_TOKENS = 1_000

Submit = Callable[[Hashable, Callable[[], Any]], object]
#: `(segment, message contents no message shows, end state)`: the channel posts them.
Unseen = Callable[[OutputSegmentContext, list[str], str], object]


@dataclass(eq=False)
class LiveMessage:
    """The native handle of one output segment: its message and Stop token."""

    segment: OutputSegmentContext
    channel: str
    token: str
    message_id: str | None = None
    writer: SnapshotWriter | None = None
    stopping: bool = False
    ended: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)


def stop_components(token: str, texts: Messages | None = None) -> list[dict[str, Any]]:
    """One action row with the red Stop button, labelled in the locale of ``texts``
    (default English)."""
    label = (texts or messages()).text(TEXT_STOP)
    button = {"type": 2, "style": 4, "label": label, "custom_id": f"{STOP_PREFIX}{token}"}
    return [{"type": 1, "components": [button]}]


def message_parts(text: str, *, final: bool) -> list[str]:
    """`text` (the agent's Markdown) as Discord message contents of at most
    `MAX_CONTENT` characters (while streaming, open constructs are closed)."""
    try:
        parts = render(text, Dialect.DISCORD, limit=MAX_CONTENT, preview=not final)
    except ValueError:
        parts = []
    if not parts and text.strip():
        parts = [text[i : i + MAX_CONTENT] for i in range(0, len(text), MAX_CONTENT)]
    return [p for p in parts if p.strip()]


class SegmentMessages:
    """Per-segment live messages; see the module docstring.

    `submit(key, fn)` runs `fn` on the per-key serial lane of the channel's pool; writes
    of one run share the key `("discord-out", run_id)`. `texts_for(person)` gives the
    catalog texts a segment's owner reads (the channel sets its `messages_for`): the
    Stop label and the Stopped / Failed marks are in that language.
    """

    def __init__(
        self,
        api: DiscordApi,
        *,
        clock: Any,
        scheduler: Any,
        submit: Submit,
        edit_interval: float = 1.0,
        on_unseen: Unseen | None = None,
    ) -> None:
        self._api = api
        self._on_unseen = on_unseen
        self._clock = clock
        self._scheduler = scheduler
        self._submit = submit
        self._edit_interval = float(edit_interval)
        self._lock = threading.Lock()
        self._live: dict[str, LiveMessage] = {}
        self._tokens: dict[str, str] = {}  # stop token -> segment id (live segments only)
        self._ended: BoundedMap[str, bool] = BoundedMap(MAX_ENDED_TOKENS, clock=clock)
        self._shown: dict[str, StreamedText] = {}  # run id -> text closed segments showed
        #: the catalog texts a person reads (the channel sets its ``messages_for``)
        self.texts_for: Callable[[str | None], Messages] = lambda _: messages()

    # -- state ----------------------------------------------------------------------------
    def get(self, segment_id: str) -> LiveMessage | None:
        """The live message of a segment, or None."""
        with self._lock:
            return self._live.get(segment_id)

    def by_token(self, token: str) -> LiveMessage | None:
        """The live message whose Stop button carries `token`, or None."""
        with self._lock:
            segment_id = self._tokens.get(token)
            return self._live.get(segment_id) if segment_id is not None else None

    def ended_token(self, token: str) -> bool:
        """True for the Stop token of a segment that already ended."""
        return self._ended.get(token) is not None

    def run_ids(self) -> list[str]:
        """The runs with a live segment (each once, oldest segment first)."""
        with self._lock:
            return list(dict.fromkeys(s.segment.run_id for s in self._live.values()))

    def claim_stop(self, live: LiveMessage, user: str) -> str:
        """`"owner"` (the owner's first Stop), `"again"` (already stopping or ended) or
        `"foreign"` (anyone else: told, nothing changes)."""
        with live.lock:
            if user != live.segment.owner.id:
                return "foreign"
            if live.stopping or live.ended:
                return "again"
            live.stopping = True
            return "owner"

    # -- input ----------------------------------------------------------------------------
    def open_segment(self, segment: OutputSegmentContext) -> None:
        """`OutputSurface.open_segment`: nothing to do, the message comes with the first
        text."""

    def append(self, segment: OutputSegmentContext, chunk: str) -> bool:
        """Add visible text to the segment's message (posted with the first text)."""
        if not chunk:
            return False
        with self._lock:
            live = self._live.get(segment.segment_id)
            if live is None:
                token = secrets.token_urlsafe(12)
                live = LiveMessage(segment, segment.target.chat_id, token)
                live.writer = SnapshotWriter(
                    functools.partial(self._write, live),
                    clock=self._clock,
                    scheduler=self._scheduler,
                    submit=functools.partial(self._submit, ("discord-out", segment.run_id)),
                    min_interval=self._edit_interval,
                    max_chars=MAX_VISIBLE_CHARS,
                )
                self._live[segment.segment_id] = live
                self._tokens[token] = segment.segment_id
        assert live.writer is not None
        live.writer.append(chunk)
        return True

    def _write(self, live: LiveMessage, snapshot: str) -> None:
        """Post or edit the message with the snapshot's last part and the Stop button."""
        parts = message_parts(snapshot, final=False)
        if not parts:
            return
        shown = parts[-1]
        components = stop_components(live.token, self.texts_for(live.segment.owner.id))
        if live.message_id is None:
            live.message_id = self._api.post(live.channel, shown, components)
        else:
            self._api.edit(live.channel, live.message_id, shown, components)

    # -- termination ----------------------------------------------------------------------
    def close_segment(self, segment: OutputSegmentContext, reason: str) -> None:
        """`OutputSurface.close_segment`: end the segment's message in the state of
        `reason` (cancelled / failed, anything else completed); the text no message
        shows goes to `on_unseen(segment, contents, state)` (the channel posts them)."""
        state = {"cancelled": "cancelled", "failed": "failed"}.get(reason, "completed")
        live = self._pop(segment.segment_id)
        if live is None:
            return
        assert live.writer is not None
        content = live.writer.finalize(FINALIZE_TIMEOUT)
        if state == "completed":
            with self._lock:
                self._shown.setdefault(segment.run_id, StreamedText()).add(content)
        unseen = self._close(live, content, state)
        if unseen and self._on_unseen is not None:
            try:
                self._on_unseen(segment, unseen, state)
            except Exception:
                logger.exception("discord: posting a segment's unseen text failed")

    def finish_run(self, segment: OutputSegmentContext, text: str) -> list[str]:
        """End the run's live segment as its final answer: returns the message contents
        of the part of `text` that still has to be posted (none when the live message
        shows all of it)."""
        with self._lock:
            shown = self._shown.pop(segment.run_id, None)
        remainder = shown.remainder(text) if shown is not None else text
        live = self._pop(segment.segment_id)
        if live is None:
            return message_parts(remainder, final=True)
        assert live.writer is not None
        live.writer.finalize(FINALIZE_TIMEOUT)
        return self._close(live, remainder, "completed")

    def _close(self, live: LiveMessage, content: str, state: str) -> list[str]:
        """Edit the message to its final text without the button; the message contents
        no message shows yet (ready to post, in order)."""
        with live.lock:
            live.ended = True
        marked = {"cancelled": TEXT_STOPPED, "failed": TEXT_FAILED_MARK}.get(state)
        mark = None if marked is None else self.texts_for(live.segment.owner.id).text(marked)
        parts = message_parts(content, final=True)
        if mark is not None:
            if parts and len(parts[-1]) + len(mark) + 2 <= MAX_CONTENT:
                parts[-1] = f"{parts[-1]}\n\n{mark}"
            else:
                parts.append(mark)
        if live.message_id is None:
            return parts if content.strip() else []
        first, rest = (parts[0], parts[1:]) if parts else (mark or "\u200b", [])
        try:
            self._api.edit(live.channel, live.message_id, first, [])
        except Exception as exc:
            logger.warning("discord segment close failed: %s", type(exc).__name__)
            return parts  # the message shows an older snapshot: post the whole text
        return rest

    def _pop(self, segment_id: str) -> LiveMessage | None:
        with self._lock:
            live = self._live.pop(segment_id, None)
            if live is not None:
                self._tokens.pop(live.token, None)
        if live is not None:
            self._ended[live.token] = True
        return live

    def discard_run(self, run_id: str) -> None:
        """Forget the run's shown text and close its leftovers (the run ended)."""
        with self._lock:
            self._shown.pop(run_id, None)
            leftovers = [s for s in self._live.values() if s.segment.run_id == run_id]
        for live in leftovers:
            self.close_segment(live.segment, "cancelled")

    def close(self) -> None:
        """Abandon live writers (the channel is closing)."""
        with self._lock:
            leftovers = list(self._live.values())
            self._live.clear()
            self._tokens.clear()
            self._shown.clear()
        for live in leftovers:
            if live.writer is not None:
                live.writer.close()


if TYPE_CHECKING:
    from channelkit.platforms.common.contract import OutputSurface

    def _satisfies_the_contract(messages: SegmentMessages) -> None:
        """mypy: the segment messages are Discord's output surface."""
        surface: OutputSurface = messages
        del surface

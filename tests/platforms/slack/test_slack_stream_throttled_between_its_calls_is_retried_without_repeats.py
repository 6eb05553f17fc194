"""Slack: a stream's first write makes two calls (``chat.startStream``, then the Stop
button's ``chat.postMessage``). When the second is throttled (the outbound pacer's
`Throttled`, inside the writer's `no_wait()`), the writer tries again later: the Stop
button is posted then, and the text that already streamed is not streamed again."""

from __future__ import annotations

from typing import Any

from channelkit.core import ChannelPromptOwner, OutputSegmentContext, SessionTarget
from channelkit.errors import Throttled
from channelkit.platforms.slack.output import SegmentStreams


class _Api:
    """Records the calls that went; ``throttle`` names calls told to wait once."""

    def __init__(self, *throttle: str) -> None:
        self.calls: list[tuple[str, str | None]] = []
        self.throttle = set(throttle)

    def _go(self, name: str, text: str | None) -> None:
        if name in self.throttle:
            self.throttle.discard(name)
            raise Throttled(1.0)
        self.calls.append((name, text))

    def start_stream(self, channel: str, anchor: Any, text: str, recipient: Any) -> str:
        self._go("start", text)
        return "1.0"

    def append_stream(self, channel: str, ts: str, text: str) -> None:
        self._go("append", text)

    def stop_stream(self, channel: str, ts: str, text: str | None) -> None:
        self._go("stop", text)

    def post(self, channel: str, text: str, *args: Any) -> str:
        self._go("post", None)
        return "2.0"

    def update(self, *args: Any) -> None:
        self._go("update", None)


def _segment() -> OutputSegmentContext:
    target = SessionTarget("slack", "U1", "D1", None, False)
    return OutputSegmentContext(
        "slack", "s1", "r1", "seg1", ChannelPromptOwner("U1"), target, message_id="1.1"
    )


def test_a_throttled_stop_button_is_posted_on_the_next_try_and_nothing_streams_twice(
    rt: Any,
) -> None:
    api = _Api("post")
    streams = SegmentStreams(
        api,  # type: ignore[arg-type]
        clock=rt.clock,
        scheduler=rt.scheduler,
        submit=lambda key, fn: rt.serial.submit(key, fn),
    )
    segment = _segment()
    streams.append(segment, "hello ")
    rt.settle()
    assert api.calls == [("start", "hello ")]  # the Stop button was told to wait
    live = streams.get(segment.segment_id)
    assert live is not None and live.control_ts is None
    assert live.writer is not None and not live.writer.failed
    rt.advance(1.0)  # the retry: the Stop button, and no text again
    assert api.calls == [("start", "hello "), ("post", None)]
    assert live.control_ts == "2.0"
    streams.append(segment, "world")
    rt.advance(1.0)
    assert api.calls[-1] == ("append", "world")
    assert streams.finish_run(segment, "hello world") == ""
    assert api.calls[-2:] == [("stop", None), ("update", None)]

"""DingTalk: a status card's streamed write told to wait by the outbound pacer
(`Throttled`, inside the writer's `no_wait()`) is not a failure: the newest text goes
when the wait is over, and later writes keep coming. A throttled status-line refresh
(the write's second call) is left to the next write, which refreshes it."""

from __future__ import annotations

from typing import Any

from channelkit.errors import Throttled


def _once(error: BaseException) -> Any:
    left = [error]
    return lambda kw: left.pop() if left else None


def test_a_throttled_snapshot_goes_later_with_the_newest_text(harness: Any) -> None:
    h = harness()
    h.run()
    seg = h.segment()
    h.presenter.append_output(seg, "a")
    h.api.fail["stream"] = _once(Throttled(2.0))
    h.advance(0.5)  # the flush: told to wait 2 s
    h.presenter.append_output(seg, "b")
    h.advance(1.9)
    assert [c[1]["content"] for c in h.api.ops("stream")] == ["", "a"]  # the try only
    h.advance(0.1)
    assert [c[1]["content"] for c in h.api.ops("stream")][-1] == "ab"
    h.presenter.append_output(seg, "c")
    h.advance(0.5)
    assert h.api.ops("stream")[-1][1]["content"] == "abc"  # the writer goes on


def test_a_throttled_status_line_is_refreshed_by_the_next_write(harness: Any) -> None:
    h = harness(model="m")
    h.run()
    seg = h.segment()
    h.presenter.append_output(seg, "x")
    h.advance(0.5)  # its flush (second 0: no refresh)
    h.advance(4.6)
    h.api.fail["update"] = _once(Throttled(1.0))
    h.presenter.append_output(seg, "y")  # a flush at 5.1 s: its refresh told to wait
    h.presenter.append_output(seg, "z")
    h.advance(0.5)  # the next flush, still in second 5, refreshes it
    updates = [c[1]["params"] for c in h.api.ops("update")]  # the try recorded too
    assert updates == [{"statusLine": "Running · m · 5s"}] * 2
    assert h.api.ops("stream")[-1][1]["content"] == "xyz"

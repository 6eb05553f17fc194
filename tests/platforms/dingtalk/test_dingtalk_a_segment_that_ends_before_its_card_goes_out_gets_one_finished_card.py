"""A segment that ends before its status card went out gets that card created once,
already finished.

A card's creation is queued on its run's projection queue. When the queue is busy (a
burst of people at once) the segment can end before the creation job runs; creating a
running card, opening its stream, closing it and updating it to the terminal state right
after would be four calls where one shows the same thing. The card is created once in its
terminal state, with the segment's text and no Stop button. A segment that ended failed
still opens and closes its stream, so the card carries the stream's error flag.
"""

from __future__ import annotations

from collections.abc import Callable


class HeldQueue:
    """A projection queue's submitter that runs nothing until `release()`."""

    def __init__(self) -> None:
        self.jobs: list[Callable[[], object]] = []

    def submit(self, fn: Callable[[], object]) -> None:
        self.jobs.append(fn)

    def release(self) -> None:
        while self.jobs:
            self.jobs.pop(0)()


def test_a_segment_that_completed_first_gets_one_completed_card(harness):
    held = HeldQueue()
    h = harness(model="qwen3.7-max", submit=held.submit)
    h.run()
    seg = h.segment()
    assert h.presenter.append_output(seg, "the whole ")
    assert h.presenter.append_output(seg, "answer")
    assert h.presenter.close_output(seg, "", "completed", wait=False)
    assert h.api.calls == []  # the creation is still queued
    held.release()
    assert h.api.names() == ["create"]
    params = h.api.ops("create")[0][1]["params"]
    assert params["content"] == "the whole answer" and params["flowStatus"] == 3
    assert params["statusLine"] == "Completed · qwen3.7-max · 0s"
    assert params["hasAction"] == "false" and params["stop_action"] == "false"
    assert h.presenter.status.live_count == 0


def test_a_segment_whose_card_went_out_first_still_streams(harness):
    held = HeldQueue()
    h = harness(submit=held.submit)
    h.run()
    seg = h.segment()
    assert h.presenter.append_output(seg, "partial")
    held.release()  # the card goes out running while the segment is open
    assert h.api.names() == ["create", "stream"]
    assert h.api.ops("create")[0][1]["params"]["flowStatus"] == 2
    assert h.presenter.close_output(seg, "", "completed", wait=False)
    held.release()
    assert h.api.names()[-2:] == ["stream", "update"]
    final = h.api.ops("update")[-1][1]["params"]
    assert final["content"] == "partial" and final["flowStatus"] == 3


def test_a_segment_that_failed_first_still_carries_the_error_flag(harness):
    held = HeldQueue()
    h = harness(submit=held.submit)
    h.run()
    seg = h.segment()
    assert h.presenter.append_output(seg, "partial")
    h.presenter.close_output(seg, "", "failed", wait=False)
    held.release()
    assert h.api.names() == ["create", "stream", "stream", "update"]
    assert h.api.ops("stream")[-1][1]["is_error"] is True
    final = h.api.ops("update")[-1][1]["params"]
    assert final["statusLine"].startswith("Failed") and final["content"] == "partial"


def test_a_run_stopped_before_its_card_went_out_gets_one_stopped_card(harness):
    held = HeldQueue()
    h = harness(submit=held.submit)
    h.run()
    seg = h.segment()
    assert h.presenter.append_output(seg, "working")
    h.clock.advance(3.2)
    h.presenter.terminalize_run("run-1", "cancelled", "cancel_command")
    held.release()
    assert h.api.names() == ["create"]
    params = h.api.ops("create")[0][1]["params"]
    assert params["statusLine"] == "Stopped · 3s" and params["content"] == "working"
    assert params["stop_action"] == "false"

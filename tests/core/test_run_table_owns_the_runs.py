"""The run table owns the channel's queued and live runs and their lock.

A live run is found by its session while it runs and gone once it ended; a stale run
never removes its successor; a closed table refuses new runs with an error naming the
channel and hands the live runs to cancel exactly once.
"""

from __future__ import annotations

import threading

import pytest
from channelkit.core.runs import Run, RunTable
from channelkit.core.types import ChannelPromptOwner, SessionTarget
from channelkit.errors import ChannelClosed
from channelkit.testing import ScriptedBridge, gate, inbound


def _run(session_id: str = "s-1") -> Run:
    return Run(
        kind="inbound",
        session_id=session_id,
        target=SessionTarget("test", "u-1", "c-1"),
        owner=ChannelPromptOwner("u-1"),
        message_id=None,
        text="hi",
    )


def test_a_stale_run_never_removes_its_successor() -> None:
    table = RunTable("test")
    first, second = _run(), _run()
    table.activate(first)
    table.activate(second)  # the session's next run replaced it
    table.deactivate(first)
    assert table.active_run("s-1") is second
    table.deactivate(second)
    assert table.active_run("s-1") is None


def test_a_closed_table_refuses_runs_and_hands_over_the_live_ones_once() -> None:
    table = RunTable("support")
    live, queued = _run("s-1"), _run("s-2")
    table.activate(live)
    table.queue(queued)
    assert table.queued_count == 1
    assert table.close() == [live]
    assert table.closed and table.queued_count == 0
    assert table.close() is None  # already closed: nothing to cancel twice
    with pytest.raises(ChannelClosed, match="'support' is closed"):
        table.queue(_run("s-3"))


def test_the_channel_shows_its_live_run_through_the_table(channel_factory) -> None:
    release = threading.Event()
    ch = channel_factory(ScriptedBridge([gate(release)]))
    handle = ch.handle_inbound(inbound("hi"))
    ch.wait_for_event("started")
    run = ch.run_table.active_run(handle.session_id)
    assert run is not None and run.run_id == handle.run_id
    assert ch.active_run_id(handle.session_id) == handle.run_id
    release.set()
    assert handle.result().status == "completed"
    assert ch.run_table.active_run(handle.session_id) is None

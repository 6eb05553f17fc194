"""How a channel is wired to its pools, scheduler and clock: they must agree, and a
run pool that refuses work cancels the run without leaking its queue slot."""

from __future__ import annotations

import pytest
from channelkit.core import ChannelBase, ChannelConfig
from channelkit.errors import ConfigurationError
from channelkit.runtime import FakeClock, PoolClosed, Scheduler, WorkerPool
from channelkit.testing import ScriptedBridge, inbound


def test_scheduler_and_clock_must_agree():
    pool = WorkerPool(2)
    scheduler = Scheduler(pool, clock=FakeClock())
    try:
        with pytest.raises(ConfigurationError) as info:
            ChannelBase(
                ChannelConfig(name="x"),
                ScriptedBridge([]),
                executor=pool,
                scheduler=scheduler,
                clock=FakeClock(),
            )
        assert info.value.path == "clock"
    finally:
        scheduler.stop()
        pool.shutdown(timeout=5)


def test_enqueue_failure_releases_the_queue_slot():
    runs = WorkerPool(2)
    ch = ChannelBase(ChannelConfig(name="test"), ScriptedBridge([]), run_executor=runs)
    runs.shutdown(timeout=5)
    try:
        handle = ch.handle_inbound(inbound("hi"))
        assert handle.result(5).status == "cancelled"  # the run pool refused it
        assert ch.run_table.queued_count == 0  # the reserved slot is released, not leaked
        assert ch.run_stats == {"active": 0, "waiting": 0, "queued": 0}
        with pytest.raises(PoolClosed):
            runs.post(print)
    finally:
        ch.close(timeout=1)

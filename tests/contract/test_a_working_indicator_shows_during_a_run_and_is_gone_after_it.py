"""Contract: the "working on it" indicator (a reaction on the person's message, a typing
status or action, an assistant status) shows while a run works, and none is left once
the run ended: completed, cancelled or failed. After the end the bot makes no more
indicator calls while the clock moves on (a refreshed typing action would show again),
and an indicator the platform keeps as state reads off. On every chat platform through
its emulator.
"""

from __future__ import annotations

import threading

import pytest
from channelkit.agents import Turn
from contract_drivers import BOUND_S, Driver, wait_for
from contract_harness import Context

#: clock seconds moved after a run's end: several typing refreshes (every 4-8 s) and
#: more than any indicator's own lifetime
AFTER_END_S = 30.0


def _indicator_gone(d: Driver) -> bool:
    shown = d.indicator_shown()
    return shown is None or not shown


@pytest.mark.parametrize("end", ["completed", "cancelled", "failed"])
def test_the_indicator_shows_while_a_run_works_and_is_gone_after_it_ends(
    ctx: Context, end: str
) -> None:
    d = ctx.driver
    d.require("working_indicator")
    release = threading.Event()
    started = threading.Event()

    def works(turn: Turn) -> str | None:
        started.set()
        while not release.wait(0.01) and not turn.cancelled:
            pass
        if end == "failed":
            raise RuntimeError("agent process exited")
        return None if turn.cancelled else "done"

    ctx.script.fn = works
    try:
        before = len(d.indicators())
        d.send("work on it")
        assert started.wait(BOUND_S), "the run never started"
        wait_for(lambda: len(d.indicators()) > before, "an indicator call", tick=d.tick)
        if d.indicator_shown() is not None:
            wait_for(d.indicator_shown, "the indicator shown while the run works", tick=d.tick)
        if end == "cancelled":
            d.send("/cancel")
        else:
            release.set()
        wait_for(
            lambda: _indicator_gone(d) and d.pg.channel.wait_idle(0.2),
            lambda: f"the indicator gone after the run {end}: {d.indicators()[-3:]}",
            tick=d.tick,
        )
    finally:
        release.set()
    d.settle()
    calls = len(d.indicators())
    for _ in range(int(AFTER_END_S / 0.25)):
        d.tick()
    assert d.pg.channel.wait_idle(BOUND_S)
    d.settle()
    assert len(d.indicators()) == calls, d.indicators()[calls:]  # nothing refreshed it
    assert _indicator_gone(d)

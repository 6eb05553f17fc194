"""Contract: a visible output segment ends completed, cancelled by its owner's Stop (and
only its own run), or failed with the failure told once in the chat; on every chat
platform through its emulator."""

from __future__ import annotations

import threading
import time

import pytest
from channelkit.agents import Turn
from channelkit.core import InboundMessage
from contract_drivers import BOUND_S, FOREIGN, wait_for
from contract_harness import (
    Context,
    hold_until_cancelled,
    known_defect,
    new_token,
)

# -- output segments -----------------------------------------------------------------------------


def test_a_reply_ends_its_segment_completed(ctx: Context) -> None:
    token = new_token()
    ctx.script.fn = lambda turn: f"echo {token}"
    ctx.driver.send("hello")
    ctx.driver.wait_segment(token, "completed")
    assert ctx.driver.failures() == 0


def test_the_owners_stop_cancels_the_run_and_ends_its_segment_cancelled(ctx: Context) -> None:
    d = ctx.driver
    token = new_token()
    said = threading.Event()
    ctx.script.fn = hold_until_cancelled(ctx.script, f"holding {token}", said)
    d.send("hold")
    assert said.wait(BOUND_S)
    if d.caps.live_output is None:
        running = d.wait_segment(token, "running")
        if d.caps.stop_button is None:
            running = d.wait_stoppable(token)
    else:  # nothing shows before the segment ends
        running = None
    d.stop_run(running)  # type: ignore[arg-type]
    assert ctx.script.outcome() == "cancelled"
    if d.caps.live_output is None:
        d.wait_segment(token, "cancelled")
    assert d.pg.channel.wait_idle(BOUND_S)
    d.settle()
    assert all(s.state != "completed" for s in d.segments() if token in s.text), d.segments()
    assert d.failures() == 0


def test_a_stop_cancels_exactly_its_own_run_and_a_run_in_another_chat_goes_on(
    ctx: Context,
) -> None:
    """Run A (the emulated chat) and run B (another chat and person, handed to the
    channel as a real human message) run at once; stopping A leaves B running."""
    d = ctx.driver
    token = new_token()
    said_a, entered_b, release_b = threading.Event(), threading.Event(), threading.Event()
    hold_a = hold_until_cancelled(ctx.script, f"holding {token}", said_a)

    def fn(turn: Turn) -> str | None:
        if turn.text != "run B":
            return hold_a(turn)
        entered_b.set()
        deadline = time.monotonic() + BOUND_S
        while not turn.cancelled and not release_b.is_set() and time.monotonic() < deadline:
            time.sleep(0.01)
        ctx.script.outcomes.put("B cancelled" if turn.cancelled else "B released")
        return None

    ctx.script.fn = fn
    d.send("hold")
    assert said_a.wait(BOUND_S)
    channel = d.pg.channel
    channel.handle_inbound(
        InboundMessage(
            channel_name=channel.name,
            chat_id=d.other_chat,
            sender_id=FOREIGN,
            text="run B",
            message_id=f"other-{token}",
        )
    )
    assert entered_b.wait(BOUND_S)
    running = None
    if d.caps.live_output is None:
        running = d.wait_segment(token, "running")
        if d.caps.stop_button is None:
            running = d.wait_stoppable(token)
    d.stop_run(running)  # type: ignore[arg-type]
    assert ctx.script.outcome() == "cancelled"  # run A
    assert ctx.script.no_outcome(0.3)  # run B goes on
    release_b.set()
    assert ctx.script.outcome() == "B released"


def test_a_foreign_users_stop_is_refused_privately_and_the_run_goes_on(ctx: Context) -> None:
    d = ctx.driver
    d.require("stop_button")
    d.require("foreign_users")
    token = new_token()
    ctx.script.fn = hold_until_cancelled(ctx.script, f"holding {token}")
    d.send("hold")
    running = d.wait_stoppable(token)
    d.stop(running, user=FOREIGN)
    if d.caps.private_notice is None:
        wait_for(lambda: d.notices(FOREIGN), "the private notice to the foreign user")
        assert len(d.notices(FOREIGN)) == 1
    assert ctx.script.no_outcome(0.3)  # the run was not cancelled
    assert d.segment(token).state == "running"
    d.stop(running)
    assert ctx.script.outcome() == "cancelled"
    d.wait_segment(token, "cancelled")
    assert len(d.notices(FOREIGN)) == (1 if d.caps.private_notice is None else 0)


@pytest.mark.parametrize("when", ["mid-run", "before any output"])
def test_a_failed_run_ends_failed_and_the_failure_is_told_once(
    ctx: Context, request: pytest.FixtureRequest, when: str
) -> None:
    d = ctx.driver
    bound = known_defect(d, "failure_told_once", request)
    token = new_token()

    def fails(turn: Turn) -> str:
        if when == "mid-run":
            turn.say(f"partial {token}")
        raise RuntimeError("agent process exited")

    ctx.script.fn = lambda turn: f"before {new_token()}"  # not the chat's first run
    d.send("hello")
    wait_for(lambda: [s for s in d.segments() if s.state == "completed"], "a first reply")
    assert d.pg.channel.wait_idle(BOUND_S)
    d.settle()
    shown_before = len(d.chat_texts())
    ctx.script.fn = fails
    d.send("fail")
    wait_for(d.failures, "the failure shown in the chat", bound, tick=d.tick)
    assert d.pg.channel.wait_idle(BOUND_S)
    d.settle()
    assert d.failures() == 1
    seg = d.segment(token)
    assert seg is None or seg.state == "failed", seg  # never shown as a normal answer
    if when == "before any output":  # the failure is all the chat shows of this run
        assert len(d.chat_texts()) == shown_before + 1, d.chat_texts()[shown_before:]
    elif d.caps.keeps_failed_text is None:  # the failed segment keeps what was said
        assert seg is not None and seg.state == "failed", d.segments()

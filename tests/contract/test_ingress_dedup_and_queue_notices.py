"""Contract: a redelivered message starts no second run, and a run that must wait for a
slot (the channel's admission limit) is told it is queued, then runs; on every chat
platform through its emulator."""

from __future__ import annotations

import threading
import time

from channelkit.agents import Turn
from channelkit.core import InboundMessage
from contract_drivers import BOUND_S, FOREIGN, wait_for
from contract_harness import (
    Context,
    new_token,
)


def test_a_redelivered_message_starts_no_second_run(ctx: Context) -> None:
    d = ctx.driver
    token = new_token()
    runs: list[str] = []

    def counts(turn: Turn) -> str:
        runs.append(turn.text)
        return f"once {token}"

    ctx.script.fn = counts
    d.send(f"dedup {token}")
    d.wait_segment(f"once {token}", "completed")
    assert d.pg.channel.wait_idle(BOUND_S)
    assert d.redeliver_last_message() == 200  # ACKed, so the platform stops retrying
    time.sleep(0.3)  # a second run would start now
    assert d.pg.channel.wait_idle(BOUND_S)
    d.settle()
    assert runs == [f"dedup {token}"]
    assert len([s for s in d.segments() if f"once {token}" in s.text]) == 1


def test_a_run_that_must_wait_for_a_slot_is_told_it_is_queued_then_runs(
    one_slot: Context,
) -> None:
    from channelkit.core.text import MSG_QUEUED_AHEAD, MSG_QUEUED_NEXT

    ctx = one_slot
    d = ctx.driver
    entered_b, release_b = threading.Event(), threading.Event()
    token = new_token()

    def fn(turn: Turn) -> str | None:
        if turn.text == "run B":  # holds the only slot
            entered_b.set()
            release_b.wait(BOUND_S)
            return None
        return f"after the queue {token}"

    ctx.script.fn = fn
    channel = d.pg.channel
    channel.handle_inbound(
        InboundMessage(
            channel_name=channel.name, chat_id=d.other_chat, sender_id=FOREIGN, text="run B"
        )
    )
    assert entered_b.wait(BOUND_S)
    d.send("hello")
    queued = (MSG_QUEUED_NEXT, MSG_QUEUED_AHEAD.split("{", 1)[0])
    wait_for(
        lambda: any(t.startswith(queued) for t in d.chat_texts()),
        "the queue notice in the waiting person's chat",
        tick=d.tick,
    )
    assert d.segment(f"after the queue {token}") is None  # it waits
    release_b.set()
    d.wait_segment(f"after the queue {token}", "completed")

"""Contract: a queue notice is ONE message or card, edited in place as the queue moves
("Queued, 1 ahead" -> "Queued: ... as soon as a slot is free" -> "Starting now."), on
every chat platform that can edit what it sent (issue 23, item 10): all but Weixin, whose
messages cannot be edited (it keeps the core's single text notice)."""

from __future__ import annotations

import threading

import pytest
from channelkit.agents import Turn
from channelkit.core import InboundMessage
from channelkit.core.queue_notices import MSG_STARTING
from channelkit.core.text import MSG_QUEUED_NEXT, format_queued
from contract_drivers import BOUND_S, FOREIGN, wait_for
from contract_harness import Context, new_token


@pytest.fixture
def one_slot_editing(one_slot: Context) -> Context:
    """A channel of its own that runs one agent run at a time, on a platform whose queue
    notice is edited in place."""
    one_slot.driver.require("edited_queue_notice")
    return one_slot


def _notices(texts: list[str]) -> list[str]:
    queued = (MSG_QUEUED_NEXT, format_queued(1).split("1", 1)[0], MSG_STARTING)
    return [t for t in texts if t.startswith(queued)]


def test_a_queue_notice_is_edited_in_place_as_the_queue_moves(
    one_slot_editing: Context,
) -> None:
    ctx = one_slot_editing
    d = ctx.driver
    token = new_token()
    gates = {"run B": threading.Event(), "run C": threading.Event()}
    entered = {"run B": threading.Event(), "run C": threading.Event()}

    def fn(turn: Turn) -> str | None:
        if turn.text in gates:  # B holds the only slot, C waits before the person
            entered[turn.text].set()
            gates[turn.text].wait(BOUND_S)
            return None
        return f"after the queue {token}"

    ctx.script.fn = fn
    channel = d.pg.channel
    # two other people in two other conversations (one conversation or one person may
    # serialize their runs before admission)
    others = (("run B", d.other_chat, FOREIGN), ("run C", d.other_chat + "2", FOREIGN + "9"))
    for text, chat, sender in others:
        channel.handle_inbound(
            InboundMessage(channel_name=channel.name, chat_id=chat, sender_id=sender, text=text)
        )
    assert entered["run B"].wait(BOUND_S)
    wait_for(lambda: channel.run_stats["queued"] == 1, "run C queued", tick=d.tick)
    d.settle()  # C's own notice (where the emulator shows that chat) comes first
    d.send("hello")
    wait_for(
        lambda: _notices(d.chat_texts())[-1:] == [format_queued(1)],
        "the person's notice: one run ahead",
        tick=d.tick,
    )
    shown = len(_notices(d.chat_texts()))  # the person's notice last (C's, if shown, first)
    gates["run B"].set()  # C starts, the person is next
    assert entered["run C"].wait(BOUND_S)
    wait_for(
        lambda: _notices(d.chat_texts())[-1:] == [MSG_QUEUED_NEXT],
        "the same notice edited: next",
        tick=d.tick,
    )
    gates["run C"].set()  # the person's run starts
    d.wait_segment(f"after the queue {token}", "completed")
    wait_for(
        lambda: _notices(d.chat_texts())[shown - 1 : shown] == [MSG_STARTING],
        "the person's notice edited in place to starting now",
        tick=d.tick,
    )
    assert len(_notices(d.chat_texts())) == shown, d.chat_texts()  # no second notice

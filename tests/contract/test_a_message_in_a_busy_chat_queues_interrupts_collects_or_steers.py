"""Contract: what a person's second message does while their conversation's run is still
going (``ChannelConfig.busy``), on every chat platform through its emulator:

* ``queue`` (default): the person sees a queue notice within 1 s of the second message,
  and the two runs happen in order;
* ``interrupt``: exactly the running run of that conversation is cancelled (its output
  shows the platform's stopped state; another conversation's run goes on), then the new
  message runs;
* ``collect``: messages within the window (on the channel's FakeClock) are one turn with
  both texts, and messages sent while that turn runs are the next turn;
* ``steer``: the new text reaches the running ``FunctionAgent`` turn (no second turn).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator

import pytest
from channelkit.agents import Turn
from channelkit.core import InboundMessage
from channelkit.core.queue_notices import MSG_STARTING
from channelkit.core.text import MSG_QUEUED_NEXT, format_queued
from contract_drivers import BOUND_S, DRIVERS, FOREIGN, wait_for
from contract_harness import Context, new_token, open_platform

#: the promise of the ``queue`` mode: the notice shows within this (real seconds)
NOTICE_WITHIN_S = 1.0


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Every chat platform with a contract driver (read when the tests are collected)."""
    if "platform" in metafunc.fixturenames:
        metafunc.parametrize("platform", sorted(DRIVERS))


@pytest.fixture
def queue_chat(platform: str) -> Iterator[Context]:
    """A channel of its own with the default busy mode (``queue``)."""
    with open_platform(platform) as context:
        yield context


@pytest.fixture
def interrupt_chat(platform: str) -> Iterator[Context]:
    with open_platform(platform, busy="interrupt") as context:
        yield context


@pytest.fixture
def collect_chat(platform: str) -> Iterator[Context]:
    with open_platform(platform, busy="collect") as context:
        yield context


@pytest.fixture
def steer_chat(platform: str) -> Iterator[Context]:
    with open_platform(platform, busy="steer") as context:
        yield context


def _queue_notices(texts: list[str]) -> list[str]:
    prefixes = (MSG_QUEUED_NEXT, format_queued(1).split("1", 1)[0], MSG_STARTING)
    return [t for t in texts if t.startswith(prefixes)]


def _send(ctx: Context, text: str, chat: str | None = None, sender: str | None = None) -> None:
    """A person's message: the emulated person by default, else straight to the channel
    (a conversation the emulator does not show)."""
    if chat is None:
        ctx.driver.send(text)
        return
    channel = ctx.driver.pg.channel
    channel.handle_inbound(
        InboundMessage(
            channel_name=channel.name, chat_id=chat, sender_id=sender or FOREIGN, text=text
        )
    )


def test_queue_the_second_message_is_told_within_a_second_and_runs_after_the_first(
    queue_chat: Context,
) -> None:
    ctx = queue_chat
    d = ctx.driver
    token = new_token()
    first, second = f"first {token}", f"second {token}"
    entered, release = threading.Event(), threading.Event()
    prompts: list[str] = []

    def fn(turn: Turn) -> str | None:
        prompts.append(turn.text)
        if turn.text == first:
            turn.say(f"working {token} ")
            entered.set()
            release.wait(BOUND_S)
            return f"answer one {token}"
        return f"answer two {token}"

    ctx.script.fn = fn
    d.send(first)
    assert entered.wait(BOUND_S)
    before = len(_queue_notices(d.chat_texts()))
    sent_at = time.monotonic()
    d.send(second)
    wait_for(
        lambda: len(_queue_notices(d.chat_texts())) > before,
        "a queue notice for the second message",
        timeout=NOTICE_WITHIN_S,
        tick=d.tick,
    )
    assert time.monotonic() - sent_at <= NOTICE_WITHIN_S
    assert prompts == [first]  # it waits
    release.set()
    d.wait_segment(f"answer one {token}", "completed")
    d.wait_segment(f"answer two {token}", "completed")
    assert prompts == [first, second]


def test_interrupt_cancels_exactly_the_running_run_and_the_new_message_runs(
    interrupt_chat: Context, caplog: pytest.LogCaptureFixture
) -> None:
    ctx = interrupt_chat
    d = ctx.driver
    token = new_token()
    first, second, other = f"first {token}", f"second {token}", f"other {token}"
    entered = {first: threading.Event(), other: threading.Event()}
    release_other = threading.Event()
    outcome: dict[str, str] = {}
    prompts: list[str] = []

    def fn(turn: Turn) -> str | None:
        prompts.append(turn.text)
        if turn.text in entered:
            turn.say(f"working {turn.text} ")
            entered[turn.text].set()
            deadline = time.monotonic() + BOUND_S
            while not turn.cancelled and time.monotonic() < deadline:
                if turn.text == other and release_other.is_set():
                    break
                time.sleep(0.01)
            outcome[turn.text] = "cancelled" if turn.cancelled else "went on"
            return None if turn.cancelled else f"answer {turn.text}"
        return f"answer {turn.text}"

    ctx.script.fn = fn
    _send(ctx, other, chat=d.other_chat)  # another conversation's run
    assert entered[other].wait(BOUND_S)
    d.send(first)
    assert entered[first].wait(BOUND_S)
    if d.caps.live_output is None:  # its output shows before the person writes again
        d.wait_segment(f"working {first}", "running")
    with caplog.at_level(logging.INFO, logger="channelkit.core.busy"):
        d.send(second)
        d.wait_segment(f"answer {second}", "completed")
    assert outcome[first] == "cancelled"
    assert other not in outcome  # the other conversation's run goes on
    if d.caps.live_output is None:  # the interrupted output shows stopped
        d.wait_segment(f"working {first}", "cancelled")
    assert any(
        "busy=interrupt" in r.getMessage() and "reason=interrupt" in r.getMessage()
        for r in caplog.records
    ), [r.getMessage() for r in caplog.records]
    release_other.set()
    wait_for(lambda: outcome.get(other), "the other conversation's run to end", tick=d.tick)
    assert outcome[other] == "went on"
    assert prompts.count(second) == 1


def test_collect_sends_one_turn_with_both_texts(collect_chat: Context) -> None:
    ctx = collect_chat
    d = ctx.driver
    token = new_token()
    prompts: list[str] = []
    entered, release = threading.Event(), threading.Event()

    def fn(turn: Turn) -> str | None:
        prompts.append(turn.text)
        if len(prompts) == 1:
            entered.set()
            release.wait(BOUND_S)
        return f"answer {len(prompts)} {token}"

    ctx.script.fn = fn
    busy_chat = d.pg.channel.busy_chat
    d.send(f"one {token}")
    d.send(f"two {token}")
    # both reached the channel (a polling platform fetches them a moment later)
    wait_for(lambda: busy_chat.waiting_messages == 2, "both messages collected")
    assert d.pg.channel.wait_idle(BOUND_S)
    assert prompts == []  # the window is still open (the clock has not moved)
    wait_for(lambda: prompts, "the collected turn", tick=d.tick)  # the window ends
    assert entered.wait(BOUND_S)
    assert prompts == [f"one {token}\n\ntwo {token}"]
    # while that turn runs, the next messages are joined into the next turn
    d.send(f"three {token}")
    d.send(f"four {token}")
    wait_for(lambda: busy_chat.waiting_messages == 2, "the next turn collected")
    assert d.pg.channel.run_stats["queued"] == 1
    release.set()
    d.wait_segment(f"answer 1 {token}", "completed")
    d.wait_segment(f"answer 2 {token}", "completed")
    assert prompts == [f"one {token}\n\ntwo {token}", f"three {token}\n\nfour {token}"]


def test_steer_hands_the_new_text_to_the_running_function_agent_turn(
    steer_chat: Context,
) -> None:
    ctx = steer_chat
    ctx.agent.steerable = True
    d = ctx.driver
    token = new_token()
    first = f"first {token}"
    prompts: list[str] = []
    entered = threading.Event()

    def fn(turn: Turn) -> str | None:
        prompts.append(turn.text)
        entered.set()
        got = turn.wait_steered(BOUND_S)
        return f"steered {token} with {' | '.join(got) or 'nothing'}"

    ctx.script.fn = fn
    d.send(first)
    assert entered.wait(BOUND_S)
    d.send(f"more {token}")
    d.wait_segment(f"steered {token} with more {token}", "completed")
    assert d.pg.channel.wait_idle(BOUND_S)
    assert prompts == [first]  # no second turn

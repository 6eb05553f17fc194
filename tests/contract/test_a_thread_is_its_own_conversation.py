"""Contract: with the per-thread session scope (``session_scope="thread"``), each thread
of a group chat is a conversation of its own, on every chat platform that has threads
(Slack threads, Telegram forum topics, Feishu threads; DingTalk and Weixin declare that
they have none through ``Capabilities.threads``):

* each thread gets its own agent session (the session id the agent sees), and a thread's
  next message goes on in that thread's session;
* a run busy in one thread does not queue a message of another thread: that one starts
  at once, while a second message in the busy thread waits with a queue notice;
* every output of a run (the status card or message, its answer, the queue notice, a
  question's form, a tool permission's approval buttons) lands in the thread that
  started it, never in the chat outside it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from channelkit.agents import Turn
from channelkit.core.queue_notices import MSG_STARTING
from channelkit.core.text import MSG_QUEUED_NEXT, format_queued
from contract_drivers import BOUND_S, DRIVERS, Driver, wait_for
from contract_harness import (
    COLOR,
    Context,
    ask,
    new_token,
    open_platform,
    pending,
)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Every chat platform with a contract driver (read when the tests are collected)."""
    if "threaded" in metafunc.fixturenames:
        metafunc.parametrize("threaded", sorted(DRIVERS), indirect=True, scope="module")


@pytest.fixture(scope="module")
def threaded(request: pytest.FixtureRequest) -> Iterator[Context]:
    """One channel per platform for the module, its sessions scoped per thread."""
    platform = str(request.param)
    reason = DRIVERS[platform].caps.threads
    if reason is not None:
        pytest.skip(f"{platform} has no threads: {reason}")
    with open_platform(platform, session_scope="thread") as context:
        yield context


@pytest.fixture
def chat(threaded: Context) -> Iterator[Context]:
    """The platform's shared per-thread channel, reset after the test."""
    threaded.script.fn = lambda turn: "idle"
    yield threaded
    threaded.driver.reset()


def _queue_notices(texts: list[str]) -> list[str]:
    prefixes = (MSG_QUEUED_NEXT, format_queued(1).split("1", 1)[0], MSG_STARTING)
    return [t for t in texts if t.startswith(prefixes)]


def _in_thread(d: Driver, text: str, thread: str) -> None:
    """The owner writes ``text`` in ``thread`` of the group, mentioning the bot the
    platform's structured way."""
    d.send_as(text, group=True, mentions_bot=True, thread=thread)


def _assert_everything_landed_in_its_thread(
    d: Driver, expected: dict[str, str], allowed: set[str]
) -> None:
    """Every bot output is in one of the ``allowed`` threads (none in the chat outside
    them); an output showing one of the ``expected`` texts is in that text's thread."""
    landed = d.landed()
    assert landed, "the bot showed nothing"
    outside = [(text, thread) for text, thread in landed if thread not in allowed]
    assert outside == [], f"outputs outside the threads {sorted(allowed)}: {landed}"
    for marker, thread in expected.items():
        found = [(text, at) for text, at in landed if marker in text]
        assert found, f"no output with {marker!r}: {landed}"
        assert all(at == thread for _, at in found), (marker, thread, found)


def test_each_thread_has_its_own_session_and_its_answer_lands_in_it(chat: Context) -> None:
    d, token = chat.driver, new_token()
    thread_a, thread_b = d.thread_ids
    sessions: dict[str, str] = {}

    def fn(turn: Turn) -> str:
        sessions[turn.text] = turn.session_id
        return f"answer {turn.text}"

    chat.script.fn = fn
    first_a, first_b, second_a = f"A1 {token}", f"B1 {token}", f"A2 {token}"
    _in_thread(d, first_a, thread_a)
    d.wait_segment(f"answer {first_a}", "completed")
    _in_thread(d, first_b, thread_b)
    d.wait_segment(f"answer {first_b}", "completed")
    _in_thread(d, second_a, thread_a)
    d.wait_segment(f"answer {second_a}", "completed")

    assert sessions[first_a] != sessions[first_b]  # a session per thread
    assert sessions[second_a] == sessions[first_a]  # the thread's conversation goes on
    _assert_everything_landed_in_its_thread(
        d,
        {f"answer {first_a}": thread_a, f"answer {first_b}": thread_b},
        {thread_a, thread_b},
    )
    (answered_in,) = {at for shown, at in d.landed() if f"answer {second_a}" in shown}
    assert answered_in == thread_a


def test_a_busy_thread_does_not_hold_up_another_and_its_queue_notice_stays_in_it(
    chat: Context,
) -> None:
    d, token = chat.driver, new_token()
    thread_a, thread_b = d.thread_ids
    first_a, only_b, second_a = f"A1 {token}", f"B1 {token}", f"A2 {token}"
    entered_a, entered_b, release_a = threading.Event(), threading.Event(), threading.Event()
    prompts: list[str] = []

    def fn(turn: Turn) -> str | None:
        prompts.append(turn.text)
        if turn.text == first_a:
            turn.say(f"working {first_a} ")
            entered_a.set()
            release_a.wait(BOUND_S)
            return f"answer {first_a}"
        if turn.text == only_b:
            entered_b.set()
        return f"answer {turn.text}"

    chat.script.fn = fn
    try:
        _in_thread(d, first_a, thread_a)
        assert entered_a.wait(BOUND_S)

        _in_thread(d, only_b, thread_b)
        assert entered_b.wait(BOUND_S), "thread B's message waited for thread A's run"
        # B's answer shows while A still runs
        wait_for(
            lambda: any(f"answer {only_b}" in text for text, _ in d.landed()),
            lambda: f"thread B's answer: {d.landed()}",
            tick=d.tick,
        )
        assert not release_a.is_set() and prompts == [first_a, only_b]
        assert _queue_notices(d.chat_texts()) == []  # B was never queued

        _in_thread(d, second_a, thread_a)  # the busy thread's own next message waits
        wait_for(
            lambda: _queue_notices(d.chat_texts()),
            lambda: f"a queue notice in thread A: {d.landed()}",
            tick=d.tick,
        )
        assert prompts == [first_a, only_b]
    finally:
        release_a.set()
    d.wait_segment(f"answer {first_a}", "completed")
    d.wait_segment(f"answer {second_a}", "completed")
    assert prompts == [first_a, only_b, second_a]

    notices = [(text, at) for text, at in d.landed() if _queue_notices([text])]
    assert notices and all(at == thread_a for _, at in notices), notices
    _assert_everything_landed_in_its_thread(
        d,
        {
            f"working {first_a}": thread_a,
            f"answer {first_a}": thread_a,
            f"answer {only_b}": thread_b,
            f"answer {second_a}": thread_a,
        },
        {thread_a, thread_b},
    )


def test_a_question_asked_in_a_thread_is_shown_answered_and_settled_in_it(
    chat: Context,
) -> None:
    d, token = chat.driver, new_token()
    thread_a, _ = d.thread_ids
    chat.script.fn = ask(chat.script, COLOR)
    _in_thread(d, f"ask {token}", thread_a)
    prompt = pending(d, "Pick a color?")
    shown = d.landed()
    assert shown and all(at == thread_a for _, at in shown), shown  # the form included
    d.answer(prompt, "Blue")  # the owner answers the form in the thread
    assert chat.script.outcome() == {"0": "Blue"}
    assert d.pg.channel.wait_idle(BOUND_S)
    d.settle()
    _assert_everything_landed_in_its_thread(d, {}, {thread_a})


@pytest.fixture
def own_threaded_short(threaded: Context) -> Iterator[Context]:
    """A per-thread channel of its own whose requests wait 60 s (fake time) at most."""
    with open_platform(
        threaded.driver.platform, session_scope="thread", permission_timeout=60.0
    ) as context:
        yield context


def test_approval_buttons_for_a_threads_run_are_shown_in_the_thread(
    own_threaded_short: Context,
) -> None:
    chat = own_threaded_short
    d, title = chat.driver, f"Run ls {new_token()}"
    d.require("approval_buttons")
    _, thread_b = d.thread_ids

    def asks(turn: Turn) -> str:
        chat.script.outcomes.put(turn.request_permission(title))
        return ""

    chat.script.fn = asks
    _in_thread(d, "permission", thread_b)
    wait_for(lambda: (a := d.approval_buttons(title)) and a["buttons"], "the approval buttons")
    shown = d.landed()
    assert shown and all(at == thread_b for _, at in shown), shown  # the buttons included
    d.clock.advance(61.0)  # unanswered: the request ends (no real waiting)
    assert not chat.script.outcome().allowed
    assert d.pg.channel.wait_idle(BOUND_S)
    d.settle()
    _assert_everything_landed_in_its_thread(d, {}, {thread_b})

"""Contract: with no session scope configured (``session_scope`` None, the default), a
direct message is a conversation of one person, and a group's conversations follow the
platform's threads, on every chat platform:

* where the platform has threads (its registry entry lists ``"threads"``: Slack threads,
  Telegram forum topics, Feishu threads, Discord threads), everybody writing in one
  thread shares one agent session (the session id the agent sees), and two threads have
  two sessions; a group message outside any thread belongs to the conversation its
  answer lands in (the group's main conversation, or on Slack the thread the bot's
  answer starts on the message), and a person writing there shares its session;
* where the platform has no threads (DingTalk; its driver's ``Capabilities.threads``
  says why), each person in a group keeps a session of their own, as in a direct chat;
* a direct message stays one conversation per person, on every platform;
* the channel's session router takes "has threads" from the platform registry.

The shared channel of each platform is opened without ``session_scope``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest
from channelkit.agents import Turn
from channelkit.core import SessionScope
from channelkit.platforms import PLATFORMS
from contract_drivers import BOUND_S, DRIVERS, Driver, wait_for
from contract_harness import Context, new_token, open_platform

_people = itertools.count(72_000_001)


def person() -> str:
    """A person id nobody used before (numeric: Telegram's ids are integers)."""
    return str(next(_people))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Every chat platform with a contract driver (read when the tests are collected)."""
    if "default_ctx" in metafunc.fixturenames:
        metafunc.parametrize("default_ctx", sorted(DRIVERS), indirect=True, scope="module")


@pytest.fixture(scope="module")
def default_ctx(request: pytest.FixtureRequest) -> Iterator[Context]:
    """One channel per platform for the module, its session scope not configured."""
    with open_platform(str(request.param)) as context:
        assert context.driver.pg.channel.config.session_scope is None
        yield context


@pytest.fixture
def chat(default_ctx: Context) -> Iterator[dict[str, str]]:
    """The platform's shared channel; yields the session id each text reached the agent
    with (the agent answers ``answer <text>``). Reset after the test."""
    sessions: dict[str, str] = {}

    def fn(turn: Turn) -> str:
        sessions[turn.text] = turn.session_id
        return f"answer {turn.text}"

    default_ctx.script.fn = fn
    yield sessions
    default_ctx.script.fn = lambda turn: "idle"
    default_ctx.driver.reset()


def _threaded(d: Driver) -> None:
    """Skip (with the driver's reason) unless people write to the bot in groups that
    have threads."""
    d.require("groups")
    d.require("threads")


def _send(
    d: Driver,
    sessions: dict[str, str],
    text: str,
    *,
    user: str,
    group: bool = False,
    thread: str | None = None,
) -> str:
    """``user`` sends ``text`` (in a group: mentioning the bot, in ``thread``); the
    session id it reached the agent with."""
    d.send_as(text, user=user, group=group, mentions_bot=group, thread=thread)
    return str(
        wait_for(lambda: sessions.get(text), lambda: f"{text!r} at the agent: {sorted(sessions)}")
    )


def _answered_in(d: Driver, text: str) -> str | None:
    """The thread the answer to ``text`` landed in (None: the chat outside threads)."""
    answer = f"answer {text}"
    places = wait_for(
        lambda: {at for shown, at in d.landed() if answer in shown},
        lambda: f"the answer {answer!r}: {d.landed()}",
        tick=d.tick,
    )
    assert len(places) == 1, (answer, places)
    return next(iter(places))


def test_the_channel_takes_threads_from_the_platform_registry(default_ctx: Context) -> None:
    d = default_ctx.driver
    router = d.pg.channel.router
    assert router.scope is None
    assert router.threads == ("threads" in PLATFORMS[d.platform].capabilities)
    assert router.threads == (d.caps.threads is None), d.caps.threads


def test_people_in_one_thread_share_its_session_and_two_threads_have_two(
    default_ctx: Context, chat: dict[str, str]
) -> None:
    d, token = default_ctx.driver, new_token()
    _threaded(d)
    thread_a, thread_b = d.thread_ids
    ann, bob = person(), person()

    ann_a = _send(d, chat, f"ann in A {token}", user=ann, group=True, thread=thread_a)
    bob_a = _send(d, chat, f"bob in A {token}", user=bob, group=True, thread=thread_a)
    ann_b = _send(d, chat, f"ann in B {token}", user=ann, group=True, thread=thread_b)
    bob_b = _send(d, chat, f"bob in B {token}", user=bob, group=True, thread=thread_b)

    assert ann_a == bob_a  # two people, one thread: one conversation
    assert ann_b == bob_b
    assert ann_a != ann_b  # two threads: two conversations, even for one person
    assert d.pg.channel.wait_idle(BOUND_S)
    assert _answered_in(d, f"bob in A {token}") == thread_a
    assert _answered_in(d, f"ann in B {token}") == thread_b
    target = d.pg.channel.target_for_session(ann_a)
    assert target is not None and d.pg.channel.router.scope_for(target) is SessionScope.THREAD


def test_a_group_message_outside_threads_is_the_conversation_its_answer_lands_in(
    default_ctx: Context, chat: dict[str, str]
) -> None:
    d, token = default_ctx.driver, new_token()
    _threaded(d)
    thread_a, _ = d.thread_ids
    ann, bob = person(), person()

    opening = f"ann outside threads {token}"
    main = _send(d, chat, opening, user=ann, group=True)
    place = _answered_in(d, opening)  # None, or the thread the answer started (Slack)
    assert place != thread_a
    joined = _send(d, chat, f"bob joins {token}", user=bob, group=True, thread=place)
    in_a = _send(d, chat, f"bob in A {token}", user=bob, group=True, thread=thread_a)

    assert joined == main  # whoever writes where the answer is shares the conversation
    assert in_a != main  # a thread is a conversation apart from it
    assert _answered_in(d, f"bob joins {token}") == place
    assert d.pg.channel.wait_idle(BOUND_S)


def test_without_threads_each_person_in_a_group_has_a_session_of_their_own(
    default_ctx: Context, chat: dict[str, str]
) -> None:
    d, token = default_ctx.driver, new_token()
    d.require("groups")
    if d.caps.threads is None:
        pytest.skip(f"{d.platform} has threads: a thread is a shared conversation there")
    ann, bob = person(), person()

    ann_first = _send(d, chat, f"ann first {token}", user=ann, group=True)
    bob_first = _send(d, chat, f"bob first {token}", user=bob, group=True)
    ann_again = _send(d, chat, f"ann again {token}", user=ann, group=True)

    assert ann_first != bob_first  # one group, two people: two conversations
    assert ann_again == ann_first  # each person's conversation goes on
    assert d.pg.channel.wait_idle(BOUND_S)
    target = d.pg.channel.target_for_session(ann_first)
    assert target is not None and target.is_group
    assert d.pg.channel.router.scope_for(target) is SessionScope.USER


def test_a_direct_message_stays_one_conversation_per_person(
    default_ctx: Context, chat: dict[str, str]
) -> None:
    d, token = default_ctx.driver, new_token()
    ann, bob = person(), person()

    ann_first = _send(d, chat, f"ann dm {token}", user=ann)
    bob_first = _send(d, chat, f"bob dm {token}", user=bob)
    ann_again = _send(d, chat, f"ann dm again {token}", user=ann)

    assert ann_first != bob_first
    assert ann_again == ann_first
    assert d.pg.channel.wait_idle(BOUND_S)
    target = d.pg.channel.target_for_session(ann_first)
    assert target is not None and not target.is_group
    assert d.pg.channel.router.scope_for(target) is SessionScope.USER

"""Contract: the conversation and operator commands on every chat platform through its
emulator (`channelkit.core.operator_commands`):

* ``/new``: the next message of the caller's conversation reaches the agent in a new
  session; while a run of the conversation is going, ``/new`` is refused and the session
  kept;
* ``/status``: the caller's conversation's running run (how long ago, by whom) and its
  queued messages; an admin (``access.admins``) sees the whole chat;
* ``/stop all``: an admin's ends every running run of the chat cancelled (as a Stop press
  does) and drops the queued messages; anybody else's is refused and changes nothing.

The channel runs with ``session_scope="user"`` (one conversation per person and chat), so
the shape of a group's runs is the same on every platform.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator

import pytest
from channelkit.agents import Turn
from channelkit.core.access import AccessConfig
from channelkit.core.text import (
    MSG_ADMIN_ONLY,
    MSG_NEW_BUSY,
    MSG_NEW_SESSION,
    MSG_QUEUE_DROPPED,
    MSG_STATUS,
    MSG_STATUS_CHAT,
    MSG_STATUS_IDLE,
    MSG_STATUS_OWN,
    MSG_STATUS_RUN,
    MSG_STATUS_YOU,
    MSG_STOP_ALL,
)
from contract_drivers import BOUND_S, DRIVERS, Driver, wait_for
from contract_harness import Context, new_token, open_platform

_people = itertools.count(72_000_001)


def person() -> str:
    """A person id nobody used before (numeric: Telegram's ids are integers)."""
    return str(next(_people))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Every chat platform with a contract driver, one channel per platform and module."""
    if "platform" in metafunc.fixturenames:
        metafunc.parametrize("platform", sorted(DRIVERS), scope="module")


@pytest.fixture(scope="module")
def shared(platform: str) -> Iterator[Context]:
    with open_platform(platform, session_scope="user") as context:
        yield context


@pytest.fixture
def ops(shared: Context) -> Iterator[Context]:
    """The platform's channel for one test: default access again and idle after it."""
    shared.script.fn = lambda turn: "idle"
    yield shared
    shared.driver.pg.channel.access.update(AccessConfig())
    shared.driver.reset()


def admins(ctx: Context, *people: str) -> None:
    ctx.driver.pg.channel.access.update(AccessConfig.from_mapping({"admins": list(people)}))


def runs_ended(d: Driver) -> None:
    """Wait until the chat's runs have left the run table. A segment shows its terminal
    state a moment before its run is taken off the table, and ``/new`` and ``/status``
    judge by the table: sent in between, ``/new`` is refused as busy (seen under load)."""
    assert d.pg.channel.wait_idle(BOUND_S), "the runs did not end"


def shows(d: Driver, text: str) -> None:
    wait_for(lambda: text in d.chat_texts(), lambda: f"{text!r} in {d.chat_texts()}", tick=d.tick)


def shows_one_of(d: Driver, texts: set[str]) -> str:
    def found() -> str | None:
        return next((t for t in d.chat_texts() if t in texts), None)

    return wait_for(
        found, lambda: f"one of {sorted(texts)[:2]}... in {d.chat_texts()}", tick=d.tick
    )


def status_texts(scope: str, who: str, running: int = 1, queued: int = 0) -> set[str]:
    """The ``/status`` replies for one running run started 0-59 s ago by ``who``."""
    return {
        MSG_STATUS.format(
            scope=scope,
            running=running,
            details=f" ({MSG_STATUS_RUN.format(seconds=s, who=who)})",
            queued=queued,
        )
        for s in range(60)
    }


class Holding:
    """An agent whose turns with ``hold`` in their text run until cancelled (or released);
    other turns answer at once. Records each turn's text and session id."""

    def __init__(self, token: str) -> None:
        self.token = token
        self.lock = threading.Lock()
        self.turns: list[tuple[str, str]] = []  # (text, session id)
        self.entered: dict[str, threading.Event] = {}
        self.outcomes: dict[str, str] = {}
        self.release = threading.Event()

    def entered_event(self, word: str) -> threading.Event:
        with self.lock:
            return self.entered.setdefault(word, threading.Event())

    def __call__(self, turn: Turn) -> str | None:
        with self.lock:
            self.turns.append((turn.text, turn.session_id))
        word = next((w for w in turn.text.split() if w.endswith("hold")), None)
        if word is None:
            return f"answer {turn.text.split()[-2]} {self.token}"
        turn.say(f"working {word} {self.token} ")
        self.entered_event(word).set()
        deadline = time.monotonic() + BOUND_S
        while not turn.cancelled and not self.release.is_set() and time.monotonic() < deadline:
            time.sleep(0.01)
        with self.lock:
            self.outcomes[word] = "cancelled" if turn.cancelled else "went on"
        return None if turn.cancelled else f"answer {word} {self.token}"

    def texts(self) -> list[str]:
        with self.lock:
            return [text for text, _ in self.turns]

    def session_of(self, word: str) -> str:
        with self.lock:
            return next(sid for text, sid in self.turns if word in text.split())


def holding(ctx: Context) -> Holding:
    agent = Holding(new_token())
    ctx.script.fn = agent
    return agent


# -- /new ----------------------------------------------------------------------------------------


def test_new_makes_the_next_message_start_a_new_agent_session(ops: Context) -> None:
    d, agent = ops.driver, holding(ops)
    token = agent.token
    d.send(f"one {token}")
    d.wait_segment(f"answer one {token}", "completed")
    d.send(f"two {token}")
    d.wait_segment(f"answer two {token}", "completed")
    assert agent.session_of("one") == agent.session_of("two")  # one conversation so far
    runs_ended(d)
    d.send("/new")
    shows(d, MSG_NEW_SESSION)
    d.send(f"three {token}")
    d.wait_segment(f"answer three {token}", "completed")
    assert agent.session_of("three") != agent.session_of("two")
    assert agent.texts() == [f"one {token}", f"two {token}", f"three {token}"]  # /new: no turn


def test_new_while_a_run_is_going_is_refused_and_the_session_is_kept(ops: Context) -> None:
    d, agent = ops.driver, holding(ops)
    token = agent.token
    d.send(f"first-hold {token}")
    assert agent.entered_event("first-hold").wait(BOUND_S)
    d.send("/new")
    shows(d, MSG_NEW_BUSY)
    assert "first-hold" not in agent.outcomes  # nothing was ended
    agent.release.set()
    d.wait_segment(f"answer first-hold {token}", "completed")
    d.send(f"after {token}")
    d.wait_segment(f"answer after {token}", "completed")
    assert agent.session_of("after") == agent.session_of("first-hold")
    assert MSG_NEW_SESSION not in d.chat_texts()


# -- /status -------------------------------------------------------------------------------------


def test_status_reports_the_running_run_and_the_queued_message(ops: Context) -> None:
    d, agent = ops.driver, holding(ops)
    token = agent.token
    table = d.pg.channel.run_table
    d.send(f"first-hold {token}")
    assert agent.entered_event("first-hold").wait(BOUND_S)
    d.send(f"second {token}")
    wait_for(lambda: table.queued_count == 1, "the second message queued", tick=d.tick)
    d.send("/status")
    shows_one_of(d, status_texts(MSG_STATUS_OWN, MSG_STATUS_YOU, running=1, queued=1))
    assert agent.texts() == [f"first-hold {token}"]  # /status is no turn
    agent.release.set()
    d.wait_segment(f"answer first-hold {token}", "completed")
    d.wait_segment(f"answer second {token}", "completed")
    runs_ended(d)
    d.send("/status")
    shows(d, MSG_STATUS_IDLE.format(scope=MSG_STATUS_OWN))


def test_status_shows_an_admin_the_whole_chat_and_others_their_own(ops: Context) -> None:
    d, agent = ops.driver, holding(ops)
    d.require("groups")
    token = agent.token
    admin, member, bystander = person(), person(), person()
    admins(ops, admin)
    d.send_as(f"member-hold {token}", user=member, group=True, mentions_bot=True)
    assert agent.entered_event("member-hold").wait(BOUND_S)
    d.send_as("/status", user=admin, group=True, mentions_bot=True)
    shows_one_of(d, status_texts(MSG_STATUS_CHAT, member))
    d.send_as("/status", user=bystander, group=True, mentions_bot=True)
    shows(d, MSG_STATUS_IDLE.format(scope=MSG_STATUS_OWN))  # nothing of theirs runs
    agent.release.set()
    wait_for(lambda: agent.outcomes.get("member-hold"), "the member's run to end", tick=d.tick)
    assert d.pg.channel.wait_idle(BOUND_S)


# -- /stop all -----------------------------------------------------------------------------------


def test_stop_all_by_a_non_admin_is_refused_and_stops_nothing(ops: Context) -> None:
    d, agent = ops.driver, holding(ops)
    token = agent.token
    member = person()
    admins(ops, person())
    d.send_as(f"mine-hold {token}", user=member)
    assert agent.entered_event("mine-hold").wait(BOUND_S)
    d.send_as("/stop all", user=member)
    shows(d, MSG_ADMIN_ONLY.format(command="stop all"))
    assert "mine-hold" not in agent.outcomes
    agent.release.set()
    d.wait_segment(f"answer mine-hold {token}", "completed")
    assert agent.outcomes["mine-hold"] == "went on"


def test_stop_all_by_an_admin_cancels_the_run_and_drops_the_queue_of_a_direct_chat(
    ops: Context,
) -> None:
    d, agent = ops.driver, holding(ops)
    token = agent.token
    admin = person()
    admins(ops, admin)
    table = d.pg.channel.run_table
    d.send_as(f"admin-hold {token}", user=admin)
    assert agent.entered_event("admin-hold").wait(BOUND_S)
    if d.caps.live_output is None:
        d.wait_segment(f"working admin-hold {token}", "running")
    d.send_as(f"later {token}", user=admin)
    wait_for(lambda: table.queued_count == 1, "the second message queued", tick=d.tick)
    d.send_as("/stop all", user=admin)
    shows(d, MSG_STOP_ALL.format(stopped=1, dropped=1))
    wait_for(lambda: agent.outcomes.get("admin-hold"), "the run to end", tick=d.tick)
    assert agent.outcomes["admin-hold"] == "cancelled"
    if d.caps.live_output is None:  # its output shows stopped, as a Stop press does
        d.wait_segment(f"working admin-hold {token}", "cancelled")
    if d.caps.edited_queue_notice is None:  # the queue notice says it was dropped
        shows(d, MSG_QUEUE_DROPPED)
    assert d.pg.channel.wait_idle(BOUND_S)
    assert agent.texts() == [f"admin-hold {token}"]  # the queued message never ran
    assert table.queued_count == 0


def test_stop_all_by_an_admin_cancels_every_run_of_a_group(ops: Context) -> None:
    d, agent = ops.driver, holding(ops)
    d.require("groups")
    token = agent.token
    admin, alice, bob = person(), person(), person()
    admins(ops, admin)
    table = d.pg.channel.run_table

    def say(user: str, text: str) -> None:
        d.send_as(text, user=user, group=True, mentions_bot=True)

    say(alice, f"alice-hold {token}")
    say(bob, f"bob-hold {token}")
    assert agent.entered_event("alice-hold").wait(BOUND_S)
    assert agent.entered_event("bob-hold").wait(BOUND_S)
    say(alice, f"queued {token}")
    wait_for(lambda: table.queued_count == 1, "alice's second message queued", tick=d.tick)
    say(bob, "/stop all")  # not an admin: nothing changes
    shows(d, MSG_ADMIN_ONLY.format(command="stop all"))
    assert agent.outcomes == {} and table.queued_count == 1
    say(admin, "/stop all")
    shows(d, MSG_STOP_ALL.format(stopped=2, dropped=1))
    wait_for(lambda: len(agent.outcomes) == 2, "both runs to end", tick=d.tick)
    assert agent.outcomes == {"alice-hold": "cancelled", "bob-hold": "cancelled"}
    if d.caps.live_output is None:
        for word in ("alice-hold", "bob-hold"):
            d.wait_segment(f"working {word} {token}", "cancelled")
    assert d.pg.channel.wait_idle(BOUND_S)
    assert not any(f"queued {token}" in text for text in agent.texts())

"""Contract: the channel's access policy (``access``: ``dm``, ``groups``, ``allowUsers``,
``allowChats``, ``admins``, ``requireMention``) on every chat platform through its
emulator. Allowed people start runs; everybody else never reaches the agent, is told once
in a direct chat (nothing in a group), and sees no status card, reaction or typing. In
groups the bot answers only when the platform says it was mentioned; ``@all`` /
``@everyone`` / ``@here`` forms never wake it."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from channelkit.agents import Turn
from channelkit.core.access import AccessConfig
from channelkit.core.text import (
    MSG_ACCESS_DM_CLOSED,
    MSG_ACCESS_NOT_ALLOWED,
    MSG_ADMIN_ONLY,
)
from contract_drivers import BOUND_S, Driver, wait_for
from contract_harness import Context, new_token

pytestmark = pytest.mark.slow  # many seconds of real time: its file starts first

_people = itertools.count(71_000_001)


def person() -> str:
    """A person id nobody used before (numeric: Telegram's ids are integers)."""
    return str(next(_people))


@pytest.fixture
def access(ctx: Context) -> Iterator[Callable[..., None]]:
    """Set the shared channel's access policy for one test (the default again after)."""
    gate = ctx.driver.pg.channel.access

    def apply(**settings: Any) -> None:
        gate.update(AccessConfig.from_mapping(settings))

    yield apply
    gate.update(AccessConfig())


def reached_agent(ctx: Context, token: str) -> list[str]:
    """The texts that reach the agent from now on (each answered ``answer <token>``)."""
    texts: list[str] = []

    def fn(turn: Turn) -> str:
        texts.append(turn.text)
        return f"answer {token}"

    ctx.script.fn = fn
    return texts


def quiet_period(d: Driver) -> None:
    """Long enough for a run, a card, a reaction or typing to show had one started."""
    time.sleep(0.3)
    assert d.pg.channel.wait_idle(BOUND_S)
    d.settle()


def assert_nothing_shown(d: Driver, indicators_before: int, *, except_text: str | None = None):
    texts = [t for t in d.chat_texts() if t != except_text]
    assert texts == [], texts
    assert len(d.indicators()) == indicators_before, d.indicators()


# -- direct messages ---------------------------------------------------------------------------


def test_dm_open_admits_anybody(ctx: Context, access: Callable[..., None]) -> None:
    d, token = ctx.driver, new_token()
    reached = reached_agent(ctx, token)
    d.send_as(f"hello {token}", user=person())
    d.wait_segment(f"answer {token}", "completed")
    assert reached == [f"hello {token}"]


def test_dm_allowlist_admits_listed_people_and_tells_others_once(
    ctx: Context, access: Callable[..., None]
) -> None:
    d, token = ctx.driver, new_token()
    friend, stranger = person(), person()
    access(dm="allowlist", allowUsers=[friend])
    reached = reached_agent(ctx, token)
    before = len(d.indicators())
    d.send_as(f"let me in {token}", user=stranger)
    wait_for(lambda: MSG_ACCESS_NOT_ALLOWED in d.chat_texts(), "the refusal", tick=d.tick)
    d.send_as(f"please {token}", user=stranger)
    quiet_period(d)
    assert reached == []
    assert d.chat_texts().count(MSG_ACCESS_NOT_ALLOWED) == 1  # told once, not twice
    assert_nothing_shown(d, before, except_text=MSG_ACCESS_NOT_ALLOWED)
    d.send_as(f"friend here {token}", user=friend)
    d.wait_segment(f"answer {token}", "completed")
    assert reached == [f"friend here {token}"]


def test_dm_closed_refuses_everybody_and_says_so(ctx: Context, access: Callable[..., None]) -> None:
    d, token = ctx.driver, new_token()
    listed = person()
    access(dm="closed", allowUsers=[listed])
    reached = reached_agent(ctx, token)
    before = len(d.indicators())
    d.send_as(f"hello {token}", user=listed)
    wait_for(lambda: MSG_ACCESS_DM_CLOSED in d.chat_texts(), "the refusal", tick=d.tick)
    quiet_period(d)
    assert reached == []
    assert_nothing_shown(d, before, except_text=MSG_ACCESS_DM_CLOSED)


def test_dm_pairing_gives_a_code_and_an_approved_person_is_answered(
    ctx: Context, access: Callable[..., None]
) -> None:
    d, token = ctx.driver, new_token()
    newcomer = person()
    access(dm="pairing")
    reached = reached_agent(ctx, token)
    before = len(d.indicators())
    d.send_as(f"hi {token}", user=newcomer)
    gate = d.pg.channel.access
    request = wait_for(
        lambda: next((c for c in gate.pairing_codes() if c.user_id == newcomer), None),
        "a pairing code",
    )
    wait_for(lambda: any(request.code in t for t in d.chat_texts()), "the code", tick=d.tick)
    quiet_period(d)
    assert reached == []
    assert len(d.indicators()) == before
    assert gate.approve(request.code) is not None
    d.send_as(f"paired {token}", user=newcomer)
    d.wait_segment(f"answer {token}", "completed")
    assert reached == [f"paired {token}"]


def test_only_admins_use_operator_commands(ctx: Context, access: Callable[..., None]) -> None:
    d, token = ctx.driver, new_token()
    admin, member = person(), person()
    access(admins=[admin])
    reached = reached_agent(ctx, token)
    d.send_as("/stop all", user=member)
    refusal = MSG_ADMIN_ONLY.format(command="stop all")
    wait_for(lambda: refusal in d.chat_texts(), "the admin-only reply", tick=d.tick)
    quiet_period(d)
    assert reached == []


# -- groups --------------------------------------------------------------------------------------


def test_a_group_message_without_a_mention_starts_nothing(
    ctx: Context, access: Callable[..., None]
) -> None:
    d, token = ctx.driver, new_token()
    d.require("groups")
    reached = reached_agent(ctx, token)
    before = len(d.indicators())
    d.send_as(f"just chatting {token}", user=person(), group=True, mentions_bot=False)
    quiet_period(d)
    assert reached == []
    assert_nothing_shown(d, before)


def test_a_group_message_mentioning_the_bot_starts_a_run(
    ctx: Context, access: Callable[..., None]
) -> None:
    d, token = ctx.driver, new_token()
    d.require("groups")
    reached = reached_agent(ctx, token)
    d.send_as(f"question {token}", user=person(), group=True, mentions_bot=True)
    d.wait_segment(f"answer {token}", "completed")  # answered in the group
    assert len(reached) == 1 and reached[0].endswith(f"question {token}"), reached
    assert d.failures() == 0


def test_everybody_mentions_never_wake_the_bot(ctx: Context, access: Callable[..., None]) -> None:
    d, token = ctx.driver, new_token()
    d.require("groups")
    reached = reached_agent(ctx, token)
    before = len(d.indicators())
    for form in d.everyone_forms:
        d.send_as(f"{form} lunch? {token}", user=person(), group=True, mentions_bot=False)
    quiet_period(d)
    assert reached == []
    assert_nothing_shown(d, before)


def test_require_mention_off_answers_every_group_message(
    ctx: Context, access: Callable[..., None]
) -> None:
    d, token = ctx.driver, new_token()
    d.require("groups")
    if d.platform == "slack":
        pytest.skip("slack delivers channel messages to the app only as app_mention events")
    if d.platform == "telegram":
        pytest.skip("telegram's group_policy 'mention' (privacy mode) drops them first")
    access(requireMention=False)
    reached = reached_agent(ctx, token)
    d.send_as(f"anyone? {token}", user=person(), group=True, mentions_bot=False)
    wait_for(lambda: reached, "the run", tick=d.tick)
    assert d.pg.channel.wait_idle(BOUND_S)


def test_groups_closed_ignore_even_a_mention_without_a_reply(
    ctx: Context, access: Callable[..., None]
) -> None:
    d, token = ctx.driver, new_token()
    d.require("groups")
    admin = person()
    access(groups="closed", admins=[admin])
    reached = reached_agent(ctx, token)
    before = len(d.indicators())
    d.send_as(f"hey bot {token}", user=admin, group=True, mentions_bot=True)
    quiet_period(d)
    assert reached == []
    assert_nothing_shown(d, before)


def test_groups_allowlist_answers_listed_chats_and_ignores_the_rest(
    ctx: Context, access: Callable[..., None]
) -> None:
    d, token = ctx.driver, new_token()
    d.require("groups")
    access(groups="allowlist", allowChats=[d.other_group])
    reached = reached_agent(ctx, token)
    before = len(d.indicators())
    d.send_as(f"unlisted {token}", user=person(), group=True, mentions_bot=True)
    quiet_period(d)
    assert reached == []
    assert_nothing_shown(d, before)
    d.send_as(f"listed {token}", user=person(), chat=d.other_group, group=True, mentions_bot=True)
    wait_for(lambda: reached, "the run in the listed group", tick=d.tick)
    assert reached[0].endswith(f"listed {token}"), reached
    assert d.pg.channel.wait_idle(BOUND_S)

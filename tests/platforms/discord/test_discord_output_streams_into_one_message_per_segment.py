"""Discord output: one message per visible segment, edited as text comes (coalesced on
the edit interval), its Stop button removed at the end; a DM always gets an answer, a
guild channel only when the bot is mentioned; a message id is handled once."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
import requests_mock as rm
from channelkit.platforms.discord.output import STOP_PREFIX
from channelkit.testing import ScriptedBridge, boundary, chunk, gate, wait_until

from tests.platforms.discord.discord_env import DM, GUILD_CHANNEL, OWNER, Env


@pytest.fixture
def mocker() -> Iterator[rm.Mocker]:
    with rm.Mocker() as m:
        yield m


def test_a_dm_answer_is_one_message_whose_stop_button_goes_at_the_end(rt, mocker) -> None:  # type: ignore[no-untyped-def]
    release = threading.Event()
    env = Env(rt, mocker, ScriptedBridge([chunk("Hello "), chunk("world"), gate(release)]))
    env.message("hi")
    wait_until(lambda: env.posts(DM), what="the segment's message")
    env.tick(1.0)  # the edit interval: the rest of the text is shown
    wait_until(lambda: env.edits() or "world" in env.posts(DM)[0]["content"], what="the text")
    release.set()
    rt.settle()
    posts = env.posts(DM)
    assert len(posts) == 1
    button = posts[0]["components"][0]["components"][0]
    assert button["custom_id"].startswith(STOP_PREFIX) and button["style"] == 4
    assert OWNER not in button["custom_id"]  # opaque: no person, run or session id
    assert posts[0]["allowed_mentions"] == {"parse": []}
    _, last = env.edits()[-1]
    assert last["content"] == "Hello world" and last["components"] == []
    env.channel.close(2.0)


def test_a_boundary_starts_a_second_message_and_nothing_repeats(rt, mocker) -> None:  # type: ignore[no-untyped-def]
    first, second = threading.Event(), threading.Event()
    script = [chunk("first"), gate(first), boundary(), chunk("second"), gate(second)]
    env = Env(rt, mocker, ScriptedBridge(script))
    env.message("hi")
    wait_until(lambda: len(env.posts(DM)) == 1, what="the first message")
    first.set()
    wait_until(lambda: len(env.posts(DM)) == 2, what="the second message")
    second.set()
    rt.settle()
    assert [p["content"] for p in env.posts(DM)] == ["first", "second"]
    finals = {mid: body["content"] for mid, body in env.edits() if body["components"] == []}
    assert sorted(finals.values()) == ["first", "second"]
    env.channel.close(2.0)


def test_a_guild_message_is_answered_only_when_it_mentions_the_bot(rt, mocker) -> None:  # type: ignore[no-untyped-def]
    bridge = ScriptedBridge([chunk("ok")])
    env = Env(rt, mocker, bridge)
    env.message("just chatting", channel=GUILD_CHANNEL)
    rt.settle()
    assert bridge.prompts == [] and env.posts() == []
    env.message("please help", channel=GUILD_CHANNEL, mention=True)
    rt.settle()
    assert [text for _, text in bridge.prompts] == ["please help"]  # the mention removed
    assert [p["content"] for p in env.posts(GUILD_CHANNEL)] == ["ok"]
    env.channel.close(2.0)


def test_a_reply_to_the_bot_addresses_it_and_group_rules_can_drop_the_mention(rt, mocker) -> None:  # type: ignore[no-untyped-def]
    bridge = ScriptedBridge([chunk("ok")])
    quiet = "3300000000000000009"
    access = {"groupRules": {quiet: {"requireMention": False}}}
    env = Env(rt, mocker, bridge, access=access)
    env.message("about your answer", channel=GUILD_CHANNEL, reply_to_bot=True)
    rt.settle()
    env.message("no mention needed here", channel=quiet)
    rt.settle()
    env.message("but here it is", channel=GUILD_CHANNEL)
    rt.settle()
    assert [text for _, text in bridge.prompts] == [
        "about your answer",
        "no mention needed here",
    ]
    env.channel.close(2.0)


def test_a_repeated_message_id_starts_no_second_run(rt, mocker) -> None:  # type: ignore[no-untyped-def]
    bridge = ScriptedBridge([chunk("ok")])
    env = Env(rt, mocker, bridge)
    message_id = env.message("hi")
    rt.settle()
    env.message("hi", message_id=message_id)
    rt.settle()
    assert len(bridge.prompts) == 1
    env.channel.close(2.0)


def test_text_while_an_edit_waits_is_coalesced_into_the_next_edit(rt, mocker) -> None:  # type: ignore[no-untyped-def]
    release = threading.Event()
    script = [chunk("a")] + [chunk(str(n)) for n in range(200)] + [gate(release)]
    env = Env(rt, mocker, ScriptedBridge(script))
    env.message("go")
    wait_until(lambda: len(env.posts(DM)) == 1, what="the first post")
    # 200 chunks within one edit interval: at most one edit is due after it
    env.tick(1.0)
    edits_after_one_interval = len(env.edits())
    assert edits_after_one_interval <= 1
    release.set()
    rt.settle()
    text = "a" + "".join(str(n) for n in range(200))
    assert env.edits()[-1][1]["content"] == text
    # the post, at most one edit per interval passed (one), the final edit
    assert len(env.edits()) <= 2
    env.channel.close(2.0)

"""Discord typing: `POST /channels/{id}/typing` when a run starts, again every
`typing_interval_s` on the scheduler while it works, none while it waits for the person,
none after it ended."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
import requests_mock as rm
from channelkit.testing import (
    ScriptedBridge,
    ask,
    chunk,
    gate,
    permission_request,
    wait_until,
)

from tests.platforms.discord.discord_env import DM, Env


@pytest.fixture
def mocker() -> Iterator[rm.Mocker]:
    with rm.Mocker() as m:
        yield m


def typings(env: Env) -> int:
    return len(env.calls("POST", rf"/channels/{DM}/typing$"))


def test_typing_is_refreshed_every_interval_until_the_run_ends(rt, mocker) -> None:  # type: ignore[no-untyped-def]
    release = threading.Event()
    env = Env(rt, mocker, ScriptedBridge([chunk("hm"), gate(release)]))
    env.message("go")
    wait_until(lambda: typings(env) == 1, what="the first typing")
    env.tick(7.9)
    assert typings(env) == 1
    env.tick(0.1)
    wait_until(lambda: typings(env) == 2, what="the refresh")
    env.tick(8.0)
    wait_until(lambda: typings(env) == 3, what="the next refresh")
    release.set()
    rt.settle()
    env.tick(16.0)
    assert typings(env) == 3  # the run ended: no more
    env.channel.close(2.0)


def test_typing_pauses_while_the_person_decides_and_resumes_after(rt, mocker) -> None:  # type: ignore[no-untyped-def]
    release = threading.Event()
    steps = [ask(lambda s: permission_request("req-1", s)), chunk("done"), gate(release)]
    env = Env(rt, mocker, ScriptedBridge(steps))
    env.message("go")
    wait_until(lambda: env.channel.typing.is_paused(DM), what="the pause")
    assert env.rt.pool.wait_idle(10.0)  # a typing call begun before the pause has landed
    sent = typings(env)
    env.tick(8.0)
    env.tick(8.0)
    assert typings(env) == sent  # waiting on the person: nothing
    env.message("/approve")
    wait_until(lambda: not env.channel.typing.is_paused(DM), what="the resume")
    wait_until(lambda: typings(env) > sent, what="typing again")
    release.set()
    rt.settle()
    env.channel.close(2.0)

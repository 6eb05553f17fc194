"""Two processes serving one Discord bot both receive every Gateway message: with the
shared state store (`state.redis`, here one `MemoryStore` both use) a message id starts
one run on one of them; without it, each instance still drops its own repeats."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import requests_mock as rm
from channelkit.state.memory import MemoryStore
from channelkit.testing import ScriptedBridge, chunk

from tests.platforms.discord.discord_env import Env


@pytest.fixture
def mocker() -> Iterator[rm.Mocker]:
    with rm.Mocker() as m:
        yield m


def test_a_message_both_instances_receive_runs_once(rt, mocker) -> None:  # type: ignore[no-untyped-def]
    store = MemoryStore(namespace="bot", clock=rt.clock)
    first, second = ScriptedBridge([chunk("a")]), ScriptedBridge([chunk("b")])
    one = Env(rt, mocker, first, store=store)
    two = Env(rt, mocker, second, store=store)
    message_id = one.message("hello")
    two.message("hello", message_id=message_id)
    rt.settle()
    assert len(first.prompts) + len(second.prompts) == 1
    other_id = two.message("again")
    one.message("again", message_id=other_id)
    rt.settle()
    assert len(first.prompts) + len(second.prompts) == 2
    one.channel.close(2.0)
    two.channel.close(2.0)

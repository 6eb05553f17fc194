from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from channelkit.agents.base import AgentBridge
from channelkit.runtime import FakeClock
from channelkit.testing import RecordingChannel, make_channel


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def channel_factory(clock: FakeClock) -> Iterator[Callable[..., RecordingChannel]]:
    made: list[RecordingChannel] = []

    def factory(bridge: AgentBridge, **kwargs: Any) -> RecordingChannel:
        kwargs.setdefault("clock", clock)
        ch = make_channel(bridge, **kwargs)
        made.append(ch)
        return ch

    yield factory
    for ch in made:
        ch.close(timeout=5)

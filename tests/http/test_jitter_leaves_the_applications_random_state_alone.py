"""The SDK's retry and reconnect jitter never uses or moves the `random` module's state.

An application that seeds `random` for reproducible runs (or a property-based test
drawing examples while a channel's connections reconnect in the background) sees the
same sequence whatever the SDK's threads do: the HTTP retry policy, the long
connections' reconnect backoff and the Discord Gateway's heartbeat jitter each draw from
a generator of their own. Before, they drew from the module's shared one, and Hypothesis
warned that the global random state changed while it generated the Discord ingress
examples.
"""

from __future__ import annotations

import random

from channelkit.http.retry import RetryPolicy
from channelkit.platforms.common.connection import Backoff


def test_retry_and_reconnect_delays_leave_the_global_random_state_alone() -> None:
    random.seed(1234)
    before = random.getstate()
    policy, backoff = RetryPolicy(), Backoff(base=0.5, cap=30.0)
    delays = [policy.backoff(attempt) for attempt in range(1, 6)]
    delays += [backoff.next() for _ in range(5)]
    assert random.getstate() == before
    assert len(set(delays)) > 1  # still jittered
    assert all(d > 0 for d in delays)


def test_the_discord_gateways_default_jitter_is_not_the_modules() -> None:
    import inspect

    from channelkit.platforms.discord.gateway import DiscordGateway

    default = inspect.signature(DiscordGateway.__init__).parameters["jitter"].default
    random.seed(99)
    before = random.getstate()
    draws = [default() for _ in range(10)]
    assert random.getstate() == before
    assert all(0.0 <= d < 1.0 for d in draws)

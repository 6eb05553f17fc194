"""Fixtures of the contract suite: one emulator + channel per platform and module, reset
between tests; channels of their own where a test needs other settings.

The platforms are parametrized when the tests are collected (``pytest_generate_tests``),
not when this file is imported, so a driver added to ``DRIVERS`` by a plugin's
``pytest_configure`` runs the suite too (see test_a_platform_defined_in_the_tests_...).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

import pytest
from contract_drivers import DRIVERS
from contract_harness import Context, open_platform

#: fixture -> its scope: each runs once per contract driver registered at collection time
PER_PLATFORM: dict[str, Literal["module", "function"]] = {
    "platform_ctx": "module",
    "own_ctx": "function",
    "one_slot": "function",
    "one_worker": "function",
}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize the per-platform fixtures a test uses over `DRIVERS` as it is now."""
    for name, scope in PER_PLATFORM.items():
        if name in metafunc.fixturenames:
            metafunc.parametrize(name, sorted(DRIVERS), indirect=True, scope=scope)


@pytest.fixture(scope="module")
def platform_ctx(request: pytest.FixtureRequest) -> Iterator[Context]:
    """One emulator + channel per platform for the module's tests."""
    with open_platform(request.param) as context:
        yield context


@pytest.fixture
def ctx(platform_ctx: Context) -> Iterator[Context]:
    """The platform's shared channel, reset after the test."""
    platform_ctx.script.fn = lambda turn: "idle"
    while not platform_ctx.script.outcomes.empty():
        platform_ctx.script.outcomes.get_nowait()
    yield platform_ctx
    if platform_ctx.driver.pg.channel.pending_request_ids():
        platform_ctx.driver.send("/cancel")
    platform_ctx.driver.reset()


@pytest.fixture
def own_ctx(request: pytest.FixtureRequest) -> Iterator[Context]:
    """A channel of its own, for a test that moves the clock far (signed callbacks carry
    the real time, so a clock minutes ahead would refuse the next test's callbacks)."""
    with open_platform(request.param) as context:
        yield context


@pytest.fixture
def one_slot(request: pytest.FixtureRequest) -> Iterator[Context]:
    """A channel of its own that runs one agent run at a time (admission limit)."""
    with open_platform(request.param, max_concurrent_runs=1) as context:
        yield context


@pytest.fixture
def one_worker(request: pytest.FixtureRequest) -> Iterator[Context]:
    """A channel of its own whose hook pool (hooks, card writes, timers) has one worker."""
    with open_platform(request.param, max_workers=1) as context:
        yield context

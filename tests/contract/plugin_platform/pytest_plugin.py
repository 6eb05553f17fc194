"""A pytest plugin (``-p plugin_platform.pytest_plugin``) that plugs Tinychat in.

``pytest_configure`` registers the platform (`register_platform`) and its contract driver
(one entry in `contract_drivers.DRIVERS`); ``pytest_unconfigure`` takes both out again.
The contract suite then runs on Tinychat as on every built-in platform, with no file of
the package or the suite changed.
"""

from __future__ import annotations

from typing import Any

import pytest
from channelkit.platforms import register_platform

_undo: list[Any] = []


def pytest_configure(config: pytest.Config) -> None:
    from contract_drivers import DRIVERS

    from plugin_platform import SPEC
    from plugin_platform.driver import TinychatDriver

    registration = register_platform(SPEC)
    DRIVERS[TinychatDriver.platform] = TinychatDriver
    _undo.append(lambda: (DRIVERS.pop(TinychatDriver.platform, None), registration.undo()))


def pytest_unconfigure(config: pytest.Config) -> None:
    while _undo:
        _undo.pop()()

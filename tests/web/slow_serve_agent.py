"""A slow in-process agent for ``channelkit serve`` subprocess tests (configured as
``{"type": "function", "function": "slow_serve_agent:agent"}`` with this directory on
PYTHONPATH): it streams a first chunk, then works until its run is cancelled."""

from __future__ import annotations

import time

from channelkit.agents.function import Turn


def agent(turn: Turn) -> str:
    turn.say("Working on it. ")
    deadline = time.monotonic() + 120.0
    while not turn.cancelled and time.monotonic() < deadline:
        time.sleep(0.02)  # the agent's own work loop; the test never waits on it
    return "" if turn.cancelled else "Done."

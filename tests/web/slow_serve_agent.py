"""A slow in-process agent for ``channelkit serve`` subprocess tests (configured as
``{"type": "function", "function": "slow_serve_agent:agent"}`` with this directory on
PYTHONPATH): it streams a first chunk, then works until its run is cancelled."""

from __future__ import annotations

import os
import time
from pathlib import Path

from channelkit.agents.function import Turn


def agent(turn: Turn) -> str:
    turn.say("Working on it. ")
    said = os.environ.get("CHANNELKIT_TEST_SAID")
    if said:  # tests of platforms that show nothing while a run writes wait for this
        Path(said).write_text("said", encoding="utf-8")
    deadline = time.monotonic() + 120.0
    while not turn.cancelled and time.monotonic() < deadline:
        time.sleep(0.02)  # the agent's own work loop; the test never waits on it
    return "" if turn.cancelled else "Done."

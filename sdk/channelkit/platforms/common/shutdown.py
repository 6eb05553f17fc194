"""What a closing channel lets its cancelled runs finish before dropping their state.

``ChannelBase.close`` cancels the live runs first: each run's segment end and terminal
event are posted on the run's lane (``("run", run_id)``), then ``on_close`` is called at
once. An adapter whose segment end shows the person the text written so far (with its
stopped marker) must let those posted hooks run before it forgets the runs' output
state: `flush_run_lanes()` waits for them, running them in the closing thread when
no pool worker is free, within one bounded deadline.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

from channelkit.runtime.serial import KeyedSerialQueue

__all__ = ["SHUTDOWN_FLUSH_S", "flush_run_lanes"]

logger = logging.getLogger(__name__)

#: Seconds a closing channel waits for its cancelled runs' last hooks (all runs together).
SHUTDOWN_FLUSH_S = 3.0


def _nothing() -> None:
    """A no-op queued behind a lane's work (waiting for it to run)."""


def flush_run_lanes(
    lanes: KeyedSerialQueue, run_ids: Iterable[str], name: str, timeout: float = SHUTDOWN_FLUSH_S
) -> bool:
    """Run what is queued on each run's lane (``("run", run_id)``, where the core posts
    a run's hooks) within ``timeout`` seconds in all; False when the deadline passed or a
    lane failed (logged under the channel's ``name``)."""
    deadline = time.monotonic() + timeout
    done = True
    for run_id in run_ids:
        left = deadline - time.monotonic()
        if left <= 0:
            logger.warning("[%s] shutdown: the stopped runs' last output not all sent", name)
            return False
        try:
            lanes.call(("run", run_id), _nothing, left)
        except Exception as exc:
            logger.warning("[%s] shutdown flush of run %s: %s", name, run_id, exc)
            done = False
    return done

"""Structural types the shared presentation machinery is written against.

They match ``channelkit.runtime`` (``Clock``, ``Scheduler``, per-key serial queues) by
shape, so adapters pass the runtime objects directly and tests pass fakes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from channelkit.runtime.clock import Clock

__all__ = ["Clock", "Scheduler", "SerialSubmit", "TimerHandle"]


class TimerHandle(Protocol):
    """What ``Scheduler.call_later`` returns."""

    def cancel(self) -> Any: ...


class Scheduler(Protocol):
    """The single runtime scheduler: runs ``fn`` (on the pool) after ``delay_seconds``."""

    def call_later(self, delay_seconds: float, fn: Callable[[], Any]) -> TimerHandle: ...


#: Submits a job to one serial queue (for example ``lambda fn: serial.submit(run_id, fn)``).
#: Jobs submitted to the same queue run one at a time in submission order.
SerialSubmit = Callable[[Callable[[], Any]], Any]

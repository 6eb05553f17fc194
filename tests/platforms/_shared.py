"""Test runtime shared by the Feishu, Telegram and Weixin adapter tests.

Each of their conftests imports the ``rt`` fixture from here. Agents in adapter tests
are :class:`channelkit.testing.ScriptedBridge` scripts or
:class:`channelkit.agents.FunctionAgent` functions; there is no per-platform copy.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from channelkit.core import LifecycleEvent
from channelkit.runtime import FakeClock, KeyedSerialQueue, Scheduler, WorkerPool
from channelkit.testing import WAIT, wait_until


class Runtime:
    """A fake clock, a hook pool, a run pool, the one scheduler on that clock, and a
    keyed serial queue."""

    def __init__(self) -> None:
        self.clock = FakeClock()
        self.pool = WorkerPool(8, name="platform-test")
        self.run_pool = WorkerPool(32, name="platform-test-run")
        self.scheduler = Scheduler(self.pool, clock=self.clock)
        self.serial = KeyedSerialQueue(self.pool)

    def settle(self) -> None:
        """Wait until both pools are idle (every run ended, every queued callback ran)."""
        settle_pools(self.run_pool, self.pool)

    def wait_for(self, condition: Callable[[], object], timeout: float = WAIT) -> None:
        """Wait (bounded) until worker threads make ``condition()`` true; timers run on
        the fake clock (:meth:`advance`), never by waiting. See
        :func:`channelkit.testing.wait_until`."""
        wait_until(condition, timeout)

    def advance(self, seconds: float) -> None:
        """Move fake time (firing due timers), then let their callbacks finish."""
        self.clock.advance(seconds)
        self.settle()

    def close(self) -> None:
        self.scheduler.stop(1.0)
        self.run_pool.shutdown(wait=True, timeout=2.0)
        self.pool.shutdown(wait=True, timeout=2.0)


def settle_pools(*pools: WorkerPool, timeout: float = WAIT) -> None:
    """Wait until every pool is idle at the same time (a run ending queues hooks, a hook
    may start a run)."""
    wait_until(
        lambda: all(p.wait_idle(timeout) for p in pools) and not any(p.unfinished for p in pools),
        timeout,
        what="every pool idle",
    )


@pytest.fixture
def rt() -> Iterator[Runtime]:
    """A fresh :class:`Runtime`, closed after the test."""
    runtime = Runtime()
    yield runtime
    runtime.close()


def question(header: str, labels: list[str], multi: bool = False) -> dict[str, Any]:
    """One question in the agent's wire shape (for ``channelkit.testing.question_request``)."""
    return {
        "header": header,
        "question": f"{header}?",
        "options": [{"label": label, "description": f"about {label}"} for label in labels],
        "multiSelect": multi,
    }


class LifecycleLog:
    """Mixin recording every lifecycle event in ``events`` before the adapter's own hook:
    ``class RecordingTelegram(LifecycleLog, TelegramChannel): pass``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.events: list[LifecycleEvent] = []
        super().__init__(*args, **kwargs)

    def on_task_lifecycle(self, event: LifecycleEvent) -> None:
        self.events.append(event)
        super().on_task_lifecycle(event)  # type: ignore[misc]


def handed_to_pool(pool: Any, fn: Callable[[], Any]) -> tuple[Any, list[Any]]:
    """Call ``fn()``; return its result and every task handed to ``pool`` meanwhile.

    Proves that a web handler handed nothing to the pool before returning its ACK (the
    pool's serial queues and limiters post through the same ``pool`` object).
    """
    handed: list[Any] = []
    post, submit = pool.post, pool.submit

    def record_post(task: Any, *args: Any) -> Any:
        handed.append(task)
        return post(task, *args)

    def record_submit(task: Any, *args: Any) -> Any:
        handed.append(task)
        return submit(task, *args)

    pool.post, pool.submit = record_post, record_submit
    try:
        result = fn()
    finally:
        del pool.post, pool.submit
    return result, handed


class RecordingContext:
    """A request context handed to a platform's question presenter that records every
    ``respond()`` result (the answer-race tests count the winners)."""

    def __init__(self, ctx: Any, results: list[bool], lock: threading.Lock) -> None:
        self._ctx = ctx
        self._results = results
        self._lock = lock

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ctx, name)

    def respond(self, response: Any) -> bool:
        ok = bool(self._ctx.respond(response))
        with self._lock:
            self._results.append(ok)
        return ok

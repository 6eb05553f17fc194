"""Contract: a final answer whose send the platform refuses is retried or told, never
silently gone; on every chat platform through its emulator.

* A send refused for a while (a 5xx, or a 429 that says how long to wait) is tried
  again on the channel's scheduler after its wait, never before it, and the person sees
  the answer exactly once; the channel counts it delivered after a retry.
* A send every path refuses for good (a 400 on each): one structured error record
  (the chat, the run and the owner, never the answer's text), counted failed, and the
  person is told once that the run failed.

The refusal is injected into the channel's delivery chain: the answer's sends raise what
the platform's client raises for such an answer (how each platform's HTTP answers map to
those errors, its alternate paths and idempotency keys are the platform suites').
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable

import pytest
from channelkit.errors import ApiError, RateLimited, ServerError
from contract_drivers import BOUND_S, Driver, wait_for
from contract_harness import Context, run_to_a_final_send

DELIVERY_LOGGER = "channelkit.platforms.common.delivery"

#: fault -> (the error a refused send raises, the clock seconds before a retry may go)
FAULTS: dict[str, tuple[Callable[[], Exception], float]] = {
    "503": (lambda: ServerError("service unavailable", status=503), 0.0),
    "429 retry after 7 s": (
        lambda: RateLimited("too many requests", status=429, retry_after=7.0),
        7.0,
    ),
}


class Refusals:
    """The sends of one final answer: the first path of its first part refuses its first
    attempt (``every_path=False``), or every attempt of every path refuses."""

    def __init__(self, error: Callable[[], Exception], *, every_path: bool) -> None:
        self.error = error
        self.every_path = every_path
        self.refused = 0
        self.sent = 0
        self._lock = threading.Lock()

    def wrap(
        self, part: int, path: int, first: bool, send: Callable[[], object]
    ) -> Callable[[], object]:
        def attempt() -> object:
            with self._lock:
                if self.every_path or (first and self.refused == 0):
                    self.refused += 1
                    raise self.error()
                self.sent += 1
            return send()

        return attempt


def _count(d: Driver, text: str) -> int:
    return sum(1 for t in d.chat_texts() if text in t)


@pytest.mark.parametrize("fault", list(FAULTS))
def test_a_send_refused_once_goes_again_after_its_wait_and_shows_once(
    ctx: Context, fault: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=DELIVERY_LOGGER)
    d = ctx.driver
    error, wait_s = FAULTS[fault]
    before = d.pg.channel.delivery_health.snapshot()
    refusals = Refusals(error, every_path=False)
    _, token = run_to_a_final_send(ctx, refusals.wrap)
    assert refusals.refused == 1 and refusals.sent == 0  # nothing went yet: a retry waits
    if wait_s:
        d.clock.advance(wait_s - 0.5)  # the platform's wait is honoured to its end
        assert d.pg.channel.wait_idle(BOUND_S)
        assert refusals.sent == 0, "the retry went before the platform's wait was over"
    wait_for(lambda: refusals.sent, "the retry", tick=d.tick)
    wait_for(lambda: _count(d, token), "the answer", tick=d.tick)
    assert d.pg.channel.wait_idle(BOUND_S)
    d.settle()
    assert _count(d, token) == 1, d.chat_texts()
    after = d.pg.channel.delivery_health.snapshot()
    assert after["delivered"] - before["delivered"] == 1
    assert after["retried"] - before["retried"] == 1
    assert after["failed"] == before["failed"]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_a_send_every_path_refuses_is_logged_once_counted_and_told(
    ctx: Context, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=DELIVERY_LOGGER)
    d = ctx.driver
    before = d.pg.channel.delivery_health.snapshot()
    told_before = d.failures()
    refusals = Refusals(
        lambda: ApiError("bad request", status=400, code="refused"), every_path=True
    )
    _, token = run_to_a_final_send(ctx, refusals.wrap)
    wait_for(
        lambda: d.failures() > told_before,
        lambda: f"the person told the run failed; the chat: {d.chat_texts()[-4:]}",
        tick=d.tick,
    )
    assert d.pg.channel.wait_idle(BOUND_S)
    d.settle()
    assert refusals.sent == 0 and _count(d, token) == 0
    assert d.failures() == told_before + 1  # told once
    after = d.pg.channel.delivery_health.snapshot()
    assert after["failed"] - before["failed"] == 1
    assert after["delivered"] == before["delivered"]
    records = [
        r for r in caplog.records if r.name == DELIVERY_LOGGER and r.levelno == logging.ERROR
    ]
    assert len(records) == 1, [r.getMessage() for r in records]
    fields = records[0].delivery  # type: ignore[attr-defined]
    assert fields["run_id"] and fields["owner_id"] and fields["chat_id"]
    assert token not in records[0].getMessage() and token not in json.dumps(fields)

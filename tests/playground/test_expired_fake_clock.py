"""The Expired question state, reached by advancing an injected FakeClock (no real waits).

The channel runs on a :class:`FakeClock` whose wall time starts at the real time (so the
platforms' signature timestamp checks pass); the question lifetime (270 s) passes when
the test advances the clock, and the card / messages show Expired while the demo agent
continues without answers.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from channelkit.playground import Playground
from channelkit.runtime import FakeClock
from playground_helpers import new_view, send, view, views, wait

LIFETIME = 270.0


@pytest.fixture()
def clock() -> FakeClock:
    return FakeClock(start=time.monotonic(), wall_start=time.time())


@contextmanager
def _run(platform: str, clock: FakeClock) -> Iterator[tuple[Playground, Callable[[], None]]]:
    with Playground(platform=platform, demo_delay=0, clock=clock) as pg:
        # card flushes are >= 500 ms apart on the channel's clock: step it while waiting
        yield pg, lambda: clock.advance(0.25)


def test_dingtalk_question_card_expires_on_the_fake_clock(clock: FakeClock) -> None:
    started = time.monotonic()
    with _run("dingtalk", clock) as (pg, tick):
        start = send(pg, "hello")
        question = new_view(pg, start, "question", "pending", tick=tick)
        clock.advance(LIFETIME - 5)
        time.sleep(0.05)
        assert view(pg, question["id"])["state"] == "pending"  # not before its lifetime
        clock.advance(6)
        expired = new_view(pg, start, "question", "expired")
        assert expired["id"] == question["id"] and expired["actions"] == []
        after = new_view(pg, start + 2, "status", "completed", tick=tick)
        assert "No answers" in after["content"]
        updates = [
            c["body"]["cardData"]["cardParamMap"]
            for c in pg.emulator.calls("/v1.0/card/instances", "PUT")
            if c["body"]["outTrackId"] == question["id"]
        ]
        assert any(u.get("card_status") == "expired" for u in updates)
    assert time.monotonic() - started < 5


def test_feishu_form_expires_on_the_fake_clock(clock: FakeClock) -> None:
    with _run("feishu", clock) as (pg, tick):
        start = send(pg, "hello")
        question = new_view(pg, start, "question", "pending", tick=tick)
        clock.advance(LIFETIME + 1)
        expired = new_view(pg, start, "question", "expired")
        assert expired["id"] == question["id"] and expired["statusLine"] == "Expired"
        after = new_view(pg, start + 2, "status", "completed", tick=tick)
        assert "No answers" in after["content"]


def test_telegram_questions_expire_on_the_fake_clock(clock: FakeClock) -> None:
    with _run("telegram", clock) as (pg, tick):
        start = send(pg, "hello")

        def pending() -> list[dict[str, Any]] | None:
            found = [v for v in views(pg)[start:] if v["state"] == "pending"]
            return found if len(found) == 2 else None

        questions = wait(pending, "the question messages", tick=tick)
        clock.advance(LIFETIME + 1)
        for question in questions:
            wait(
                lambda q=question: view(pg, q["id"])["text"].endswith("⌛ Expired"),
                "the message edited to Expired",
            )
            assert view(pg, question["id"])["keyboard"] == []
        wait(
            lambda: any("No answers" in v["text"] for v in views(pg)[start:]),
            "the continuation message",
            tick=tick,
        )

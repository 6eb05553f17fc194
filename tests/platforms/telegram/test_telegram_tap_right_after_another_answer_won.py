"""A tap that claims the keyboard in the instant after another answer settled the
request (between the settlement's look at the keyboard and its projection) still ends
the keyboard in the winner's state at once, with one already-answered notice; it never
waits for the question's deadline."""

from __future__ import annotations

from typing import Any

import requests_mock as rm
from channelkit.platforms.telegram.questions import LABEL_EXPIRED, TEXT_ALREADY_ANSWERED
from channelkit.testing import wait_until

from tests.platforms.telegram.test_telegram_answer_races import _direct, question_round


def test_a_tap_claiming_just_after_the_winner_settled_ends_in_the_winners_state(
    rt: Any, mock: rm.Mocker
) -> None:
    r = question_round(rt, mock)
    try:
        questions = r.ch.questions
        finalize = questions._finalize
        tapped: list[bool] = []

        def tap_first(record: Any, terminal: str, **kw: Any) -> bool:
            # the settlement saw the keyboard pending; a tap claims it right now
            if not kw.get("from_claim") and not tapped:
                tapped.append(True)
                r.tap(2)
            return bool(finalize(record, terminal, **kw))

        questions._finalize = tap_first  # type: ignore[method-assign]
        ctx = r.contexts[0]
        assert ctx.respond(_direct(ctx, "elsewhere")) is True  # another surface wins
        assert tapped == [True]
        terminal = r.terminal_edit()  # no clock advance: it must not wait for the deadline
        assert LABEL_EXPIRED in terminal  # answered elsewhere: the keyboard is closed
        assert r.outcome == [{"0": "elsewhere"}] and len(r.agent_calls) == 1
        # the notice goes out on its own after the race, not before the terminal edit
        wait_until(lambda: TEXT_ALREADY_ANSWERED in r.texts(), what="the already-answered notice")
        assert r.texts().count(TEXT_ALREADY_ANSWERED) == 1
    finally:
        r.close()

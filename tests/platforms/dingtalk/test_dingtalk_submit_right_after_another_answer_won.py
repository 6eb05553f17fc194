"""A card submit that claims the question card in the instant after another answer
settled the request (between the settlement's look at the card and its projection) still
ends the card in the winner's state at once, with one already-answered notice; it never
waits for the card's deadline."""

from __future__ import annotations

from typing import Any

from channelkit.platforms.dingtalk.questions import ALREADY_ANSWERED_TEXT
from channelkit.testing import wait_until
from test_dingtalk_answer_races import direct_answer, start_question


def test_a_submit_claiming_just_after_the_winner_settled_ends_in_the_winners_state() -> None:
    r = start_question()
    try:
        questions = r.h.channel.presenter.questions
        finalize = questions._finalize
        submitted: list[bool] = []

        def submit_first(record: Any, state: str, allowed: Any, *args: Any, **kw: Any) -> bool:
            # the settlement saw the card pending; a submit claims it right now
            if tuple(allowed) == ("reserved", "pending") and not submitted:
                submitted.append(True)
                r.card({"0": "Beijing", "1": ["Logs"]})
            return bool(finalize(record, state, allowed, *args, **kw))

        questions._finalize = submit_first  # type: ignore[method-assign]
        ctx = r.contexts[0]
        assert ctx.respond(direct_answer("elsewhere")) is True  # another surface wins
        assert submitted == [True] and r.kinds == ["accepted"]  # the submit claimed it
        terminal = r.question_terminal()  # no clock advance: it must not wait for the deadline
        assert terminal["card_status"] == "expired"
        assert terminal["question_desc"] == "Resolved outside this card."
        assert len(r.h.bridge.responses) == 1
        # the notice goes out on its own after the race, not before the terminal card
        wait_until(
            lambda: ALREADY_ANSWERED_TEXT in r.h.api.texts(), what="the already-answered notice"
        )
        assert r.h.api.texts().count(ALREADY_ANSWERED_TEXT) == 1
    finally:
        r.close()

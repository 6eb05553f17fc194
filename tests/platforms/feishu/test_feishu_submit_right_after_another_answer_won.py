"""A form submit that claims the card in the instant after another answer settled the
request (between the settlement's look at the card and its projection) still ends the
card in the winner's state at once, with one already-answered notice; it never waits
for the question's deadline."""

from __future__ import annotations

from typing import Any

from channelkit.platforms.common.claims import StateCell
from channelkit.platforms.feishu.api import FeishuApi
from channelkit.testing import wait_until
from feishu_helpers import FakeFeishu
from test_feishu_answer_races import ALREADY_ANSWERED, LABELS, _direct, question_round


class _ClaimedInTheGap(StateCell[str]):
    """A card state whose first "pending -> terminal" (the settlement's projection) finds
    a submit claiming the card just before it."""

    def __init__(self, state: str, submit: Any) -> None:
        super().__init__(state)
        self._submit: Any = submit

    def compare_and_set(self, expected: Any, new: str) -> bool:
        submit, self._submit = self._submit, None
        if submit is not None and expected == "pending" and new == "terminal":
            submit()
        else:
            self._submit = submit
        return super().compare_and_set(expected, new)


def test_a_submit_claiming_just_after_the_winner_settled_ends_in_the_winners_state(
    rt: Any, api: FeishuApi, fake: FakeFeishu
) -> None:
    r = question_round(rt, api, fake)
    try:
        ctx = r.contexts[0]
        record = r.ch.questions.get(ctx.request_id)
        assert record is not None
        toasts: list[str] = []
        record.cell = _ClaimedInTheGap(
            record.cell.state, lambda: toasts.append(r.form({"0": "0", "1": ["0"]}))
        )
        assert ctx.respond(_direct(ctx, "elsewhere")) is True  # another surface wins
        assert toasts == ["success"]  # the submit claimed the card in the gap
        terminal = r.form_terminal()  # no clock advance: it must not wait for the deadline
        assert LABELS["expired"] in terminal and LABELS["submitted"] not in terminal
        assert len(r.agent_calls) == 1
        # the notice goes out on its own after the race, not before the terminal card
        wait_until(lambda: ALREADY_ANSWERED in r.texts(), what="the already-answered notice")
        assert r.texts().count(ALREADY_ANSWERED) == 1
    finally:
        r.close()

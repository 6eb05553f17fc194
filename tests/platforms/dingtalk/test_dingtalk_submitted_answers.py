"""A submitted question card shows what was submitted: the answers, escaped and bounded."""

from __future__ import annotations

import json

from channelkit.platforms.dingtalk import QUESTION_CARD_TEMPLATE_ID
from channelkit.platforms.dingtalk.ingress import CardCallback
from channelkit.platforms.dingtalk.questions import (
    MAX_SHOWN_ANSWER_CHARS,
    MAX_SHOWN_ANSWERS_CHARS,
    OTHER_OPTION_VALUE,
)

HOSTILE = "**bold** <script>alert(1)</script> [click](http://evil.test) `x` # h1 |t| _i_ \\"


def lines_of(shown):
    return shown.split("\n")


def present_and_submit(h, form):
    h.run()
    ctx = h.ctx()
    assert h.presenter.present_input(ctx) == "presented"
    track = next(
        c[1]["out_track_id"]
        for c in h.api.ops("create")
        if c[1]["template_id"] == QUESTION_CARD_TEMPLATE_ID
    )
    result = h.presenter.route_callback(CardCallback(track, "submit", "owner-1", form, True))
    assert result.outcome == "accepted"
    result.run_after()
    (terminal,) = [c[1]["params"] for c in h.api.ops("update") if "card_status" in c[1]["params"]]
    return ctx, terminal


def test_submitted_card_shows_the_chosen_answers(harness):
    h = harness()
    ctx, terminal = present_and_submit(h, {"0": "Shanghai", "1": ["Logs", "Metrics"]})
    assert ctx.responses[0]["answers"] == {"0": "Shanghai", "1": "Logs, Metrics"}
    assert terminal["card_status"] == "submitted"
    assert "Which region?: Shanghai" in terminal["question_desc"]
    assert "Which signals?: Logs, Metrics" in terminal["question_desc"]
    assert terminal["selected_text"] == "- Which region?: Shanghai\n- Which signals?: Logs, Metrics"
    assert json.loads(terminal["selected_values"]) == ["Shanghai", "Logs, Metrics"]


def test_a_hostile_answer_is_escaped_and_bounded_on_the_card(harness):
    h = harness()
    custom = HOSTILE + "\n\n- not a list item\n" + "y" * 5_000
    ctx, terminal = present_and_submit(
        h, {"0": OTHER_OPTION_VALUE, "0_other": custom, "1": ["Logs"]}
    )
    # the agent receives the answer exactly as typed (trimmed); only the card escapes it
    assert ctx.responses[0]["answers"]["0"] == custom.strip()
    shown = terminal["selected_text"]
    assert terminal["question_desc"].endswith(shown)
    assert "<" not in shown and ">" not in shown and "\n\n" not in shown
    assert "&lt;script&gt;" in shown and "\\*\\*bold\\*\\*" in shown
    assert "\\[click\\]\\(http://evil\\.test\\)" in shown
    assert "\\`x\\` \\# h1 \\|t\\| \\_i\\_ \\\\ \\- not a list item" in shown
    # every Markdown character of the answer is escaped (preceded by a backslash)
    answer = lines_of(shown)[0].split(": ", 1)[1]
    for index, char in enumerate(answer):
        if char in "*_[]()`#|-!.~+{}":
            assert answer[index - 1] == "\\", (index, answer)
    # bounded: one answer's line is cut (with an ellipsis), the whole summary too
    lines = shown.split("\n")
    assert len(lines) == 2 and lines[1] == "- Which signals?: Logs"
    assert "…" in lines[0] and "y" * MAX_SHOWN_ANSWER_CHARS not in shown
    assert len(shown) < 2 * (MAX_SHOWN_ANSWER_CHARS * 2 + 64)
    value = json.loads(terminal["selected_values"])[0]
    assert len(value) == MAX_SHOWN_ANSWER_CHARS and value.endswith("…")


def test_many_long_answers_are_bounded_as_a_whole(harness):
    from dingtalk_helpers import Option, Question

    questions = tuple(
        Question(str(i), f"H{i}", f"Question {i}?", (Option("a"), Option("b"))) for i in range(4)
    )
    h = harness()
    h.run()
    ctx = h.ctx(questions=questions)
    assert h.presenter.present_input(ctx) == "presented"
    track = h.api.ops("create")[-1][1]["out_track_id"]
    form = {}
    for i in range(4):
        form[str(i)] = OTHER_OPTION_VALUE
        form[f"{i}_other"] = "z" * 400
    h.presenter.route_callback(CardCallback(track, "submit", "owner-1", form, True)).run_after()
    (terminal,) = [c[1]["params"] for c in h.api.ops("update") if "card_status" in c[1]["params"]]
    shown = terminal["selected_text"]
    unescaped = shown.replace("- ", "", 4).replace("\n", "")
    assert len(unescaped) <= MAX_SHOWN_ANSWERS_CHARS
    assert shown.count("\n") == 3  # every question still listed

"""The DingTalk status card shows the agent's Markdown in DingTalk's subset: while it
streams (an open bold span closed, so the card never shows a raw ``**``) and in its final
content; a table follows the table policy (an aligned monospace block when it fits, else
"column: value" lines); strikethrough, which DingTalk lacks, is its text."""

from __future__ import annotations

FIRST = "## Result\n\n| step | time |\n|---|--:|\n| test | 3 s |\n\nThe build is **green and"
REST = " passing** ~~maybe~~."


def test_the_card_streams_and_ends_with_dingtalk_markdown(harness):  # type: ignore[no-untyped-def]
    h = harness()
    h.run()
    seg = h.segment()
    h.presenter.append_output(seg, FIRST)
    h.advance(0.5)
    streamed = h.api.ops("stream")[-1][1]["content"]
    assert streamed == (
        "## Result\n\n```\nstep | time\n-----+-----\ntest |  3 s\n```\n\nThe build is **green and**"
    )
    h.presenter.append_output(seg, REST)
    h.presenter.terminalize_run("run-1", "completed", None)
    final = h.api.ops("update")[-1][1]["params"]["content"]
    assert final.endswith("The build is **green and passing** maybe.")
    assert "~~" not in final


def test_a_wide_table_becomes_column_value_lines(harness):  # type: ignore[no-untyped-def]
    h = harness()
    h.run()
    seg = h.segment()
    head = "| service | region | status | notes |\n|---|---|---|---|\n"
    row = "| api-gateway | eu-west-1 | healthy | canary at ten percent of traffic |"
    h.presenter.append_output(seg, head + row)
    h.advance(0.5)
    assert h.api.ops("stream")[-1][1]["content"] == (
        "**service**: api-gateway\n**region**: eu-west-1\n**status**: healthy\n"
        "**notes**: canary at ten percent of traffic"
    )

"""Continuation after a question: each status card holds only its own segment's text.

ChannelBase hands ``on_response_complete`` the text of the whole run (everything
streamed, including the text from before the question). The card of the segment after
the question must not repeat the pre-question text.
"""

from __future__ import annotations

import json

from channelkit.agents import FunctionAgent, Question
from channelkit.errors import ServerError
from dingtalk_helpers import submit_payload


def region_agent(turn):
    turn.say("Before.")
    answers = turn.ask([Question("Which region?", ["Beijing", "Shanghai"], header="Region")])
    assert answers == {"0": "Beijing"}
    turn.say("After.")
    return ""


def final_params(h, track):
    """The terminal write of card ``track`` (its final update, or its creation already
    finished when its segment ended before the card went out)."""
    finals = [c[1]["params"] for c in h.api.finals() if c[1]["out_track_id"] == track]
    assert len(finals) == 1, finals
    return finals[0]


def assert_card_holds(params, text):
    assert params["content"] == text
    assert params["copy_content"] == text
    assert json.loads(params["blockList"]) == [{"type": 0, "markdown": text}]


def run_region_question(h):
    h.send("deploy")
    assert h.wait_for(lambda: len(h.question_tracks()) == 1)
    assert (
        h.card_request(submit_payload(h.question_tracks()[0], form={"0": "Beijing"})).status == 200
    )
    assert h.wait_for(lambda: h.channel.map_sizes()["runs"] == 0)
    h.idle()


def test_each_segment_card_holds_only_its_own_text(adapter):
    h = adapter(bridge=FunctionAgent(region_agent))
    run_region_question(h)
    first, second = h.status_tracks()
    assert_card_holds(final_params(h, first), "Before.")
    assert_card_holds(final_params(h, second), "After.")
    assert h.api.texts() == []  # nothing was sent as Markdown on top of the cards


def test_markdown_fallback_sends_the_segment_text_only(adapter):
    h = adapter(bridge=FunctionAgent(region_agent))
    # every status card fails to finalize (its final update, or its creation already
    # finished): each segment falls back to Markdown
    for op in ("update", "create"):
        h.api.fail[op] = lambda kw: (
            ServerError("busy", status=500) if kw["params"].get("flowStatus") == 3 else None
        )
    run_region_question(h)
    assert h.api.texts() == ["Before.", "After."]


def test_no_continuation_text_sends_no_repeat(adapter):
    def agent(turn):
        turn.say("Only before.")
        turn.ask([Question("Which region?", ["Beijing", "Shanghai"], header="Region")])
        return ""

    h = adapter(bridge=FunctionAgent(agent))
    run_region_question(h)
    # the run's final text is only the pre-question text, already on the first card
    assert len(h.status_tracks()) == 1
    assert_card_holds(final_params(h, h.status_tracks()[0]), "Only before.")
    assert h.api.texts() == []

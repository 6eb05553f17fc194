"""A DingTalk run that fails is never silent: a Failed card or a Markdown notice."""

from __future__ import annotations

from channelkit.platforms.dingtalk.adapter import FAILED_TEXT


def _cannot_start(bridge, sid, text, sink):
    raise FileNotFoundError("no-such-agent")


def _dies_mid_run(bridge, sid, text, sink):
    sink.text_chunk(sid, "Working on it")
    raise RuntimeError("agent process exited")


def _status_lines(h):
    return [c[1]["params"].get("statusLine", "") for c in h.api.ops("update")]


def test_an_agent_that_cannot_start_shows_failed_markdown(adapter):
    h = adapter(_cannot_start)
    h.send("hi")
    h.idle()
    assert h.api.texts() == [FAILED_TEXT]
    assert h.status_tracks() == []


def test_a_failure_before_output_with_cards_off_shows_failed_markdown(adapter):
    h = adapter(_cannot_start, cards={"enabled": False})
    h.send("hi")
    h.idle()
    assert h.api.texts() == [FAILED_TEXT]


def test_an_agent_dying_mid_run_finalizes_the_card_as_failed(adapter):
    h = adapter(_dies_mid_run)
    h.send("hi")
    h.idle()
    assert len(h.status_tracks()) == 1
    assert _status_lines(h)[-1].startswith("Failed")
    assert h.api.texts() == []  # the Failed card says it; no second notice


def test_an_agent_dying_mid_run_with_cards_off_shows_failed_markdown(adapter):
    h = adapter(_dies_mid_run, cards={"statusCard": {"enabled": False}})
    h.send("hi")
    h.idle()
    assert h.api.texts() == [FAILED_TEXT]

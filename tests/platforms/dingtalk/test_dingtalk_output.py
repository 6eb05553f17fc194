from __future__ import annotations

import json
import math

from channelkit.errors import BadRequest, ServerError
from channelkit.platforms.common import MAX_VISIBLE_CHARS, TRUNCATION_MARKER
from channelkit.platforms.dingtalk.api import STATUS_CARD_TEMPLATE_ID
from channelkit.platforms.dingtalk.ingress import CardCallback
from channelkit.platforms.dingtalk.output import status_line


def stop(h, track, actor="owner-1"):
    return h.presenter.route_callback(CardCallback(track, "btn_stop", actor))


def test_status_line_text():
    assert status_line("Running", "qwen3.7-max", 12.9) == "Running · qwen3.7-max · 12s"
    assert status_line("Completed", None, 0) == "Completed · 0s"
    assert status_line("Stopped", "  ", 18) == "Stopped · 18s"


def test_no_card_on_started_created_on_first_text(harness):
    h = harness(model="qwen3.7-max")
    h.run()
    assert h.api.calls == []
    seg = h.segment()
    assert h.presenter.append_output(seg, "first")
    create = h.api.ops("create")[0][1]
    assert create["template_id"] == STATUS_CARD_TEMPLATE_ID
    assert create["out_track_id"].startswith("ck-status-")
    assert create["params"] == {
        "content": "",
        "flowStatus": 2,
        "statusLine": "Running · qwen3.7-max · 0s",
        "hasAction": "true",
        "stop_action": "true",
        "stop_text": "Stop",  # the Stop button's label, in the owner's language
    }
    assert create["target"].chat_id == "cid-1" and create["target"].is_group
    # open streaming with an empty full update
    open_call = h.api.ops("stream")[0][1]
    assert open_call["content"] == "" and open_call["finalize"] is False
    assert open_call["is_error"] is False


def test_coalesces_snapshots_one_write_per_interval(harness):
    h = harness()
    h.run()
    seg = h.segment()
    h.presenter.append_output(seg, "a")
    h.presenter.append_output(seg, "b")
    h.advance(0.499)
    assert len(h.api.ops("stream")) == 1  # only the open
    h.advance(0.001)
    streams = h.api.ops("stream")
    assert [c[1]["content"] for c in streams] == ["", "ab"]
    h.presenter.append_output(seg, "c")
    h.advance(0.2)
    assert len(h.api.ops("stream")) == 2
    h.advance(0.3)
    assert h.api.ops("stream")[-1][1]["content"] == "abc"


def test_status_line_refreshed_at_most_once_per_second_only_on_flush(harness):
    h = harness(model="m")
    h.run()
    seg = h.segment()
    h.presenter.append_output(seg, "x")
    h.advance(0.5)  # the flush at 0.5 s
    h.advance(4.5)  # idle: no timer-driven refresh
    updates = [c[1]["params"] for c in h.api.ops("update")]
    assert updates == []  # the displayed second at 0.5 s is still 0
    h.presenter.append_output(seg, "y")
    h.advance(0.5)
    updates = [c[1]["params"] for c in h.api.ops("update")]
    assert updates == [{"statusLine": "Running · m · 5s"}]
    for _ in range(4):  # two flushes within the same second: one refresh
        h.presenter.append_output(seg, "z")
        h.advance(0.25)
    lines = [c[1]["params"]["statusLine"] for c in h.api.ops("update")]
    assert lines == sorted(set(lines), key=lines.index)
    assert len(lines) <= 1 + 1


def test_final_content_in_blocklist_content_and_copy_content(harness):
    h = harness()
    h.run()
    seg = h.segment()
    h.presenter.append_output(seg, "ans")
    h.presenter.append_output(seg, "wer")
    # the final response is the whole run's text; the card keeps its segment's own text
    assert h.presenter.close_output(seg, "earlier segment. answer", "completed") is True
    final_stream = h.api.ops("stream")[-1][1]
    assert final_stream["finalize"] is True and final_stream["content"] == ""
    params = h.api.ops("update")[-1][1]["params"]
    assert params == {
        "blockList": json.dumps([{"type": 0, "markdown": "answer"}], separators=(",", ":")),
        "content": "answer",
        "copy_content": "answer",
        "flowStatus": 3,
        "statusLine": "Completed · 0s",
        "hasAction": "false",
        "stop_action": "false",
    }
    assert h.fallbacks == []
    # late snapshots are rejected
    n = len(h.api.calls)
    assert h.presenter.append_output(seg, "late") is False
    h.advance(5)
    assert len(h.api.calls) == n


def test_completion_without_body_keeps_streamed_content(harness):
    h = harness()
    h.run()
    seg = h.segment()
    h.presenter.append_output(seg, "streamed")
    h.presenter.close_output(seg, "", "completed")
    assert h.api.ops("update")[-1][1]["params"]["content"] == "streamed"


def test_final_response_without_chunks_creates_one_completed_card(harness):
    h = harness()
    h.run()
    seg = h.segment()
    assert h.presenter.close_output(seg, "only final", "completed")
    # created once, already completed: no running card streamed to and closed first
    (create,) = h.api.ops("create")
    params = create[1]["params"]
    assert params["content"] == "only final" and params["flowStatus"] == 3
    assert params["statusLine"].startswith("Completed")
    assert params["stop_action"] == "false" and params["hasAction"] == "false"
    assert h.api.names() == ["create"]


def test_a_chunkless_final_whose_card_cannot_be_created_is_sent_as_markdown_once(harness):
    h = harness()
    h.run()
    seg = h.segment()
    h.api.fail["create"] = ServerError("down", status=500)
    assert h.presenter.close_output(seg, "only final", "completed")
    assert h.api.names() == ["create"]  # tried once, already completed
    assert [text for _, text, _ in h.fallbacks] == ["only final"]


def test_a_chunkless_card_that_ends_failed_still_shows_the_failure(harness):
    # a final response's card is created at its end; should the run fail in between,
    # the card shows the failure as a streamed one does (stream closed with the error
    # flag, then the Failed status line)
    h = harness()
    binding = h.presenter.run(h.run())
    seg = h.segment()
    assert h.presenter.status.append(seg, binding, "partial", final=True) is not None
    assert h.api.calls == []  # nothing goes out before the segment's end
    h.presenter.terminalize_run("run-1", "failed")
    assert h.api.names() == ["create", "stream", "stream", "update"]
    assert h.api.ops("stream")[-1][1]["is_error"] is True
    final = h.api.ops("update")[-1][1]["params"]
    assert final["statusLine"] == "Failed · 0s" and final["content"] == "partial"


def test_exact_elapsed_on_stop_and_stopped_label(harness):
    h = harness(model="qwen3.7-max")
    h.run()
    seg = h.segment()
    h.presenter.append_output(seg, "working")
    h.clock.advance(12.4)
    h.presenter.terminalize_run("run-1", "cancelled", "cancel_command")
    params = h.api.ops("update")[-1][1]["params"]
    assert params["statusLine"] == "Stopped · qwen3.7-max · 12s"
    assert params["content"] == "working" and params["flowStatus"] == 3


def test_cancelled_and_failed_labels(harness):
    h = harness()
    h.run()
    seg = h.segment()
    h.presenter.append_output(seg, "x")
    h.presenter.terminalize_run("run-1", "cancelled", "steer")
    assert h.api.ops("update")[-1][1]["params"]["statusLine"] == "Cancelled · 0s"
    h2 = harness()
    h2.run()
    seg2 = h2.segment()
    h2.presenter.append_output(seg2, "partial")
    assert h2.presenter.close_output(seg2, "", "failed")
    assert h2.api.ops("stream")[-1][1]["is_error"] is True
    assert h2.api.ops("update")[-1][1]["params"]["statusLine"] == "Failed · 0s"


def test_content_bounded_with_marker(harness):
    h = harness()
    h.run()
    seg = h.segment()
    h.presenter.append_output(seg, "a" * 25_000)
    h.presenter.append_output(seg, "b" * 2_000)
    h.advance(0.5)
    snap = h.api.ops("stream")[-1][1]["content"]
    assert (
        len(snap) <= MAX_VISIBLE_CHARS and TRUNCATION_MARKER in snap and snap.endswith("b" * 2000)
    )


def test_two_segments_of_a_run_are_independent_and_stop_cancels_exact_run(harness):
    h = harness()
    h.run("run-1")
    h.run("run-2", session="session-2")
    s1 = h.segment("run-1")
    s2 = h.segment("run-1")
    s3 = h.segment("run-2", session="session-2")
    for s in (s1, s2, s3):
        h.presenter.append_output(s, "text")
    tracks = [c[1]["out_track_id"] for c in h.api.ops("create")]
    assert len(set(tracks)) == 3
    result = stop(h, tracks[0])
    assert result.outcome == "accepted"
    result.run_after()
    assert h.cancel_calls == [("session-1", "run-1")]
    finalized = {
        c[1]["out_track_id"] for c in h.api.ops("update") if c[1]["params"].get("flowStatus") == 3
    }
    assert finalized == {tracks[0], tracks[1]}
    assert h.presenter.close_output(s3, "done", "completed")


def test_stop_owner_only_and_claimed_once(harness):
    h = harness()
    h.run()
    seg = h.segment()
    h.presenter.append_output(seg, "x")
    track = h.status_track()
    notices: list = []
    h.presenter.notify_forbidden = lambda target, actor: notices.append((target.chat_id, actor))
    first = stop(h, track, "other")
    assert first.outcome == "forbidden" and notices == []  # nothing before the ACK
    first.run_after()
    assert notices == [("cid-1", "other")]
    assert stop(h, track, "other").outcome == "ignored"  # one notice per actor per card
    accepted = stop(h, track)
    assert accepted.outcome == "accepted"
    assert stop(h, track).outcome == "ignored"  # duplicate while claimed
    assert h.cancel_calls == []  # nothing before execute


def test_stop_false_releases_claim_card_stays_live(harness):
    h = harness()
    h.run()
    seg = h.segment()
    h.presenter.append_output(seg, "x")
    track = h.status_track()
    h.cancel_result = False
    res = stop(h, track)
    res.run_after()
    assert not [c for c in h.api.ops("update") if c[1]["params"].get("flowStatus") == 3]
    h.cancel_result = True
    retry = stop(h, track)
    assert retry.outcome == "accepted"
    retry.run_after()
    assert h.api.ops("update")[-1][1]["params"]["statusLine"].startswith("Stopped")


def test_historical_card_cannot_stop_later_run(harness):
    h = harness()
    h.run("run-1")
    seg = h.segment("run-1")
    h.presenter.append_output(seg, "x")
    old = h.status_track()
    h.presenter.close_output(seg, "x", "completed")
    h.presenter.terminalize_run("run-1", "completed")
    h.run("run-2")
    h.presenter.append_output(h.segment("run-2"), "y")
    assert stop(h, old).outcome == "ignored"
    assert h.cancel_calls == []


def test_creation_failure_falls_back_to_markdown(harness):
    h = harness()
    h.api.fail["create"] = ServerError("busy", status=500)
    h.run()
    seg = h.segment()
    h.presenter.append_output(seg, "hello ")
    h.presenter.append_output(seg, "world")
    assert h.presenter.close_output(seg, "hello world", "completed")
    assert h.fallbacks == [("cid-1", "hello world", "session-1")]
    assert h.api.ops("stream") == []
    # a transient failure keeps cards on for the next segment
    h.api.fail.clear()
    assert h.presenter.append_output(h.segment(), "next")


def test_template_rejection_disables_status_cards(harness, caplog):
    h = harness()
    h.api.fail["create"] = BadRequest("x", status=400, code="param.templateNotExist")
    h.run()
    seg = h.segment()
    with caplog.at_level("ERROR"):
        h.presenter.append_output(seg, "hello")
    assert any(
        STATUS_CARD_TEMPLATE_ID in r.getMessage() and "param.templateNotExist" in r.getMessage()
        for r in caplog.records
    )
    assert h.presenter.close_output(seg, "hello", "completed")
    assert h.fallbacks[-1][1] == "hello"
    assert h.presenter.append_output(h.segment(), "more") is False  # Markdown from now on


def test_finalize_failure_falls_back_and_stream_close_failure_still_updates(harness):
    h = harness()
    h.run()
    seg = h.segment()
    h.presenter.append_output(seg, "final")
    h.api.fail["stream"] = ServerError("busy", status=500)
    assert h.presenter.close_output(seg, "final", "completed")
    assert h.api.ops("update")[-1][1]["params"]["content"] == "final"
    assert h.fallbacks == []
    h.api.fail.clear()
    seg2 = h.segment()
    h.presenter.append_output(seg2, "final2")
    h.api.fail["update"] = ServerError("busy", status=503)
    assert h.presenter.close_output(seg2, "finalfinal2", "completed")
    assert h.fallbacks == [("cid-1", "final2", "session-1")]  # the segment's own text


def test_stream_failure_latches_and_final_text_kept(harness):
    h = harness()
    h.run()
    seg = h.segment()
    h.presenter.append_output(seg, "a")
    h.api.fail["stream"] = ServerError("busy", status=500)
    h.advance(0.5)
    n = len(h.api.ops("stream"))
    h.presenter.append_output(seg, "b")
    h.advance(5)
    assert len(h.api.ops("stream")) == n  # no more streaming writes
    h.api.fail.clear()
    h.presenter.close_output(seg, "", "completed")
    assert h.api.ops("update")[-1][1]["params"]["content"] == "ab"


def test_direct_chat_card_goes_to_user(harness):
    h = harness()
    h.run(chat="cid-dm", group=False, owner="staff-1")
    seg = h.segment(chat="cid-dm", group=False, owner="staff-1")
    h.presenter.append_output(seg, "x")
    target = h.api.ops("create")[0][1]["target"]
    assert target.chat_id == "staff-1" and target.is_group is False


def test_image_markers_sanitized(harness):
    h = harness()
    h.run()
    seg = h.segment()
    h.presenter.append_output(seg, "before [IMAGE: /Users/ben/private.png] after")
    h.advance(0.5)
    assert h.api.ops("stream")[-1][1]["content"] == "before [Image pending] after"
    h.presenter.terminalize_run("run-1", "cancelled", "cancel_command")
    assert "/Users" not in json.dumps(h.api.ops("update")[-1][1]["params"])


def test_flood_1000_chunks_in_3s(harness):
    h = harness()
    h.run()
    seg = h.segment()
    text = []
    for i in range(1_000):
        chunk = f"chunk-{i:04d} " * 3
        text.append(chunk)
        h.presenter.append_output(seg, chunk)
        h.advance(0.003)
    assert h.presenter.close_output(seg, "", "completed")
    streams = h.api.ops("stream")
    assert len(streams) <= math.ceil(3 / 0.5) + 3
    final = h.api.ops("update")[-1][1]["params"]["content"]
    full = "".join(text)
    assert len(full) > MAX_VISIBLE_CHARS and len(final) <= MAX_VISIBLE_CHARS
    assert final.startswith(TRUNCATION_MARKER)
    assert full.endswith(final[len(TRUNCATION_MARKER) :])


def test_ineligible_segments_create_no_card(harness):
    h = harness()
    assert h.presenter.append_output(h.segment("unknown-run"), "x") is False
    h.run()
    assert h.presenter.append_output(h.segment(owner="intruder"), "x") is False
    assert h.presenter.append_output(h.segment(chat="other-chat"), "x") is False
    assert h.api.calls == []


def test_final_response_without_chunks_shows_only_what_no_card_took(harness):
    h = harness()
    h.run()
    first = h.segment()
    h.presenter.append_output(first, "Before.")
    h.presenter.close_output(first, "", "input_requested")
    # the run's final text repeats "Before.": a chunkless final segment shows the rest
    tail = h.segment()
    assert h.presenter.close_output(tail, "Before.After.", "completed")
    contents = [c[1]["params"]["content"] for c in h.api.finals()]
    assert contents == ["Before.", "After."]
    # nothing left: no card at all
    empty = h.segment()
    assert h.presenter.close_output(empty, "Before.After.", "completed")
    assert len(h.api.ops("create")) == 2
    # a final text that does not start with the streamed text is shown whole
    other = h.segment()
    assert h.presenter.close_output(other, "Different.", "completed")
    assert h.api.finals()[-1][1]["params"]["content"] == "Different."
    taken = "Before.After.Different."  # every text a card of the run took, in order
    assert h.presenter.undelivered_text("run-1", taken + "More") == "More"
    assert h.presenter.undelivered_text("run-1", "Before.More") == "Before.More"
    assert h.presenter.undelivered_text("unknown-run", "Before.") == "Before."

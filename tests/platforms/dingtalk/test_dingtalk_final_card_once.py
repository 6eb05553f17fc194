"""The last segment's status card is finalized exactly once.

ChannelBase delivers the final response (``on_response_complete``) and then closes the
delivered segment through ``on_output_segment_end`` with reason ``completed``; the card
must be committed by the first and left alone by the second.
"""

from __future__ import annotations

from channelkit.core import SegmentEndReason


def record_segment_ends(h):
    ends = []
    original = h.channel.on_output_segment_end

    def recording(chat_id, session_id, segment, reason):
        ends.append((segment.segment_id, reason))
        return original(chat_id, session_id, segment, reason)

    h.channel.on_output_segment_end = recording
    return ends


def terminal_writes(h, track):
    """(stream closes, terminal writes) of one status card: a card shown running closes
    its stream and gets a final update; a card whose segment ended before it went out
    is created once, finished (no stream to close)."""
    closes = [c for c in h.api.ops("stream") if c[1]["out_track_id"] == track and c[1]["finalize"]]
    finals = [c for c in h.api.finals() if c[1]["out_track_id"] == track]
    return closes, finals


def went_out_running(h, track):
    (create,) = [c for c in h.api.ops("create") if c[1]["out_track_id"] == track]
    return create[1]["params"]["flowStatus"] == 2


def streamed(bridge, sid, text, sink):
    sink.text_chunk(sid, "Hello ")
    sink.text_chunk(sid, "world")
    return "Hello world"


def never_streamed(bridge, sid, text, sink):
    return "Only a final answer"


def test_streamed_last_segment_card_is_finalized_once(adapter):
    h = adapter(streamed)
    ends = record_segment_ends(h)
    h.send("go")
    assert h.wait_for(lambda: any(r == SegmentEndReason.COMPLETED for _, r in ends))
    h.idle()
    (track,) = h.status_tracks()
    closes, finals = terminal_writes(h, track)
    assert len(finals) == 1
    assert len(closes) == (1 if went_out_running(h, track) else 0)
    assert finals[0][1]["params"]["content"] == "Hello world"
    assert [r for _, r in ends] == [SegmentEndReason.COMPLETED]
    assert "Hello world" not in h.api.texts()  # never also sent as Markdown


def test_final_response_without_chunks_gets_one_completed_card(adapter):
    h = adapter(never_streamed)
    ends = record_segment_ends(h)
    h.send("go")
    assert h.wait_for(lambda: any(r == SegmentEndReason.COMPLETED for _, r in ends))
    h.idle()
    (track,) = h.status_tracks()
    # one call: the card is created already completed, with the answer and no Stop
    # button (no running card that is streamed to, closed and updated right after)
    card_calls = [c for c in h.api.ops() if c[1].get("out_track_id") == track]
    assert [c[0] for c in card_calls] == ["create"]
    params = card_calls[0][1]["params"]
    assert params["content"] == "Only a final answer"
    assert params["flowStatus"] == 3 and params["statusLine"].startswith("Completed")
    assert params["stop_action"] == "false" and params["hasAction"] == "false"
    assert [r for _, r in ends] == [SegmentEndReason.COMPLETED]
    assert "Only a final answer" not in h.api.texts()

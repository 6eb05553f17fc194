"""Post-and-edit streaming in groups: at most one edit per second per chat (two segments
of one chat share the limit), a 429's ``retry_after`` holds the next edit, the final text
replaces the streamed message by one last edit, a cancelled segment keeps its partial
text with the marker, and a failed draft or edit degrades to the final send without a
duplicate. Time is the fake clock; the Bot API is requests-mock.
"""

from __future__ import annotations

import itertools

from channelkit.platforms.telegram.output import CANCELLED_MARKER

from tests.platforms.telegram.tg_stream import GROUP, channel, complete, segment, stream

STEP = 0.05


def _run(env, segs, seconds: float) -> dict[str, str]:  # type: ignore[no-untyped-def]
    """Stream into every segment for ``seconds`` of fake time; returns each one's text."""
    texts = {s.segment_id: "" for s in segs}
    for step in range(round(seconds / STEP)):
        for seg in segs:
            chunk = f"{seg.run_id}:{step} "
            stream(env, seg, [chunk])
            texts[seg.segment_id] += chunk
        env.rt.clock.advance(STEP)
        env.settle()  # nothing runs while the clock moves: a call's time is its slot
    return texts


def _edit_times(bot) -> list[float]:  # type: ignore[no-untyped-def]
    return [at for at, body in bot.calls("editMessageText") if int(body["chat_id"]) == GROUP]


def test_two_segments_of_one_group_share_one_edit_per_second(rt, mock) -> None:  # type: ignore[no-untyped-def]
    env, bot = channel(rt, mock)
    one, two = segment("r1", group=True), segment("r2", group=True)
    texts = _run(env, [one, two], 6.0)
    times = _edit_times(bot)
    assert len(times) >= 4
    assert all(b - a >= 1.0 - 1e-9 for a, b in itertools.pairwise(times))
    edited = {body["message_id"] for _, body in bot.calls("editMessageText")}
    assert len(edited) == 2  # both segments' messages were edited, in turns
    assert bot.calls("sendMessageDraft") == []  # no drafts in groups
    assert len(bot.calls("sendMessage")) == 2  # one streamed message per segment

    complete(env, one, texts[one.segment_id])
    env.settle()  # the closing work has arranged its last edit before time moves
    # The final edit waits on the scheduler for the chat's next slot; the other
    # segment's pending edit may have asked for that slot first, so allow two slots.
    for _ in range(2):
        rt.advance(1.0)
    final = [b for _, b in bot.calls("editMessageText") if b["text"] == texts[one.segment_id]]
    assert len(final) == 1  # the final text replaced the streamed message, once
    assert len(bot.calls("sendMessage")) == 2  # ... and was not sent again
    assert all(b - a >= 1.0 - 1e-9 for a, b in itertools.pairwise(_edit_times(bot)))
    env.channel.close()


def test_retry_after_holds_the_next_edit(rt, mock) -> None:  # type: ignore[no-untyped-def]
    env, bot = channel(rt, mock)
    seg = segment("r1", group=True)
    bot.fail_next("editMessageText", 429, "Too Many Requests: retry after 5", retry_after=5)
    texts = _run(env, [seg], 9.0)
    calls = bot.calls("editMessageText")
    refused_at = calls[0][0]
    assert len(calls) >= 3
    assert calls[1][0] >= refused_at + 5.0 - 1e-9  # waited the whole retry_after
    complete(env, seg, texts[seg.segment_id])
    env.settle()  # the closing work has arranged its last edit before time moves
    rt.advance(1.0)
    assert bot.calls("editMessageText")[-1][1]["text"] == texts[seg.segment_id]
    assert len(bot.calls("sendMessage")) == 1
    env.channel.close()


def test_a_cancelled_group_segment_keeps_its_text_with_the_marker(rt, mock) -> None:  # type: ignore[no-untyped-def]
    env, bot = channel(rt, mock)
    seg = segment("r1", group=True)
    texts = _run(env, [seg], 2.0)
    env.channel.on_output_segment_end(seg.target.chat_id, seg.session_id, seg, "cancelled")
    env.settle()  # the closing work has arranged its last edit before time moves
    rt.advance(1.0)
    last = bot.calls("editMessageText")[-1][1]["text"]
    assert last == f"{texts[seg.segment_id].rstrip()}\n\n{CANCELLED_MARKER}"
    assert len(bot.calls("sendMessage")) == 1  # the streamed message, edited in place
    env.channel.close()


def test_a_cancelled_private_segment_keeps_its_text_with_the_marker(rt, mock) -> None:  # type: ignore[no-untyped-def]
    env, bot = channel(rt, mock)
    seg = segment("r1")
    texts = _run(env, [seg], 2.0)
    assert len(bot.calls("sendMessageDraft")) >= 2
    env.channel.on_output_segment_end(seg.target.chat_id, seg.session_id, seg, "cancelled")
    env.settle()
    assert bot.texts("sendMessage") == [f"{texts[seg.segment_id].rstrip()}\n\n{CANCELLED_MARKER}"]
    env.channel.close()


def test_a_failing_draft_degrades_to_the_final_send(rt, mock) -> None:  # type: ignore[no-untyped-def]
    env, bot = channel(rt, mock)
    for _ in range(3):
        bot.fail_next("sendMessageDraft", 500, "Internal Server Error")
    seg = segment("r1")
    texts = _run(env, [seg], 3.0)
    assert len(bot.calls("sendMessageDraft")) == 1  # the failure stopped the drafts
    complete(env, seg, texts[seg.segment_id])
    env.settle()
    assert bot.texts("sendMessage") == [texts[seg.segment_id]]  # once, in full
    assert bot.calls("editMessageText") == []
    env.channel.close()


def test_a_rejected_draft_switches_the_chat_to_post_and_edit(rt, mock) -> None:  # type: ignore[no-untyped-def]
    env, bot = channel(rt, mock)
    bot.fail_next("sendMessageDraft", 400, "Bad Request: method is not available")
    seg = segment("r1")
    texts = _run(env, [seg], 3.0)
    assert len(bot.calls("sendMessageDraft")) == 1
    assert len(bot.calls("sendMessage")) == 1 and bot.calls("editMessageText")
    complete(env, seg, texts[seg.segment_id])
    env.settle()  # the closing work has arranged its last edit before time moves
    rt.advance(1.0)
    sent = bot.texts("sendMessage") + [b["text"] for _, b in bot.calls("editMessageText")[-1:]]
    assert sent.count(texts[seg.segment_id]) == 1  # the full text shown once
    assert len(bot.calls("sendMessage")) == 1
    later = segment("r2")  # the chat's next segment goes straight to post-and-edit
    _run(env, [later], 0.5)
    assert len(bot.calls("sendMessageDraft")) == 1
    env.channel.close()


def test_a_failed_edit_falls_back_to_one_final_send(rt, mock) -> None:  # type: ignore[no-untyped-def]
    env, bot = channel(rt, mock)
    seg = segment("r1", group=True)
    for _ in range(2):  # the streaming edit, then the final edit: the message is gone
        bot.fail_next("editMessageText", 400, "Bad Request: message to edit not found")
    texts = _run(env, [seg], 3.0)
    assert len(bot.calls("editMessageText")) == 1  # the failure stopped the edits
    complete(env, seg, texts[seg.segment_id])
    env.settle()  # the closing work has arranged its last edit before time moves
    rt.advance(1.0)
    messages = bot.texts("sendMessage")
    assert len(messages) == 2 and messages[1] == texts[seg.segment_id]
    assert messages[0] != texts[seg.segment_id]  # the first was the streamed beginning
    env.channel.close()

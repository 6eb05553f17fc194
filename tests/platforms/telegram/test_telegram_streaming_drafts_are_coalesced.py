"""A private chat's live segment streams as coalesced ``sendMessageDraft`` calls and ends
with exactly one ``sendMessage`` of its full text (the draft is only a preview).

A real TelegramChannel on the Bot API mock, fed 1,000 chunks per second of fake time
through its ``on_response_chunk`` hook; the scheduler runs on the fake clock.
"""

from __future__ import annotations

import itertools
import math

import pytest
from channelkit.errors import ConfigurationError
from channelkit.platforms.telegram import TelegramConfig

from tests.platforms.telegram.tg_env import TOKEN
from tests.platforms.telegram.tg_stream import channel, complete, segment, stream

STEP = 0.01  # fake seconds per step: 10 chunks each (1,000 chunks/s)


def _stream_for(env, seg, seconds: float) -> str:  # type: ignore[no-untyped-def]
    letters = itertools.cycle("abcdefghij")
    text = []
    for step in range(round(seconds / STEP)):
        chunks = [next(letters) for _ in range(10)]
        stream(env, seg, chunks)
        text.extend(chunks)
        env.rt.clock.advance(STEP)
        if step % 5 == 4:
            env.settle()  # let due flushes run before time moves on
    env.settle()
    return "".join(text)


@pytest.mark.parametrize("seconds", [1.0, 3.0])
def test_drafts_are_coalesced_and_one_message_carries_the_text(rt, mock, seconds) -> None:  # type: ignore[no-untyped-def]
    env, bot = channel(rt, mock)
    seg = segment("r1")
    full = _stream_for(env, seg, seconds)
    complete(env, seg, full)
    env.settle()

    drafts = [body for _, body in bot.calls("sendMessageDraft")]
    assert 3 <= len(drafts) <= math.ceil(seconds / 0.5) + 3
    assert drafts[0]["text"] == ""  # the thinking placeholder, when the segment opened
    assert all(full.startswith(d["text"]) for d in drafts)  # snapshots of the text so far
    ids = {d["draft_id"] for d in drafts}
    assert len(ids) == 1 and 0 not in ids  # one non-zero draft id for the segment
    assert all(d["chat_id"] in (1001, "1001") for d in drafts)
    assert bot.texts("sendMessage") == [full]  # exactly one message: the full text
    assert not bot.calls("editMessageText")
    env.channel.close()


def test_a_configured_interval_spaces_the_drafts(rt, mock) -> None:  # type: ignore[no-untyped-def]
    env, bot = channel(rt, mock, stream_interval_s=1.0)
    seg = segment("r1")
    full = _stream_for(env, seg, 4.0)
    complete(env, seg, full)
    env.settle()
    times = [at for at, _ in bot.calls("sendMessageDraft")][1:]  # after the placeholder
    assert len(times) <= math.ceil(4.0 / 1.0) + 2
    assert all(b - a >= 1.0 - 1e-9 for a, b in itertools.pairwise(times))
    assert bot.texts("sendMessage") == [full]
    env.channel.close()


def test_streaming_off_sends_only_the_final_message(rt, mock) -> None:  # type: ignore[no-untyped-def]
    env, bot = channel(rt, mock, streaming="off")
    seg = segment("r1")
    full = _stream_for(env, seg, 1.0)
    complete(env, seg, full)
    env.settle()
    assert bot.calls("sendMessageDraft") == [] and bot.texts("sendMessage") == [full]
    env.channel.close()


@pytest.mark.parametrize("value", ["stream", "", None, True])
def test_a_bad_streaming_mode_names_the_field(value) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ConfigurationError, match="telegram.streaming"):
        TelegramConfig(bot_token=TOKEN, streaming=value)


def test_a_bad_stream_interval_names_the_field() -> None:
    with pytest.raises(ConfigurationError, match="telegram.stream_interval_s"):
        TelegramConfig(bot_token=TOKEN, stream_interval_s=0)
    config = TelegramConfig.from_dict({"botToken": TOKEN, "streaming": "edit"})
    assert config.streaming == "edit" and config.stream_interval_s == 0.5

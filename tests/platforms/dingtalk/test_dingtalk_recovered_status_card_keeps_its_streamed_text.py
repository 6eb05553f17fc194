"""A status card finalized by a survivor keeps the text the store knew.

Two instances of one bot share a MemoryStore (the same rule as with Redis: the card
record is the only thing a survivor sees). Instance A streams text into a status card
and dies; the survivor finalizes the card "Failed" with the text A's card last showed,
then the interrupted line, never the interrupted line alone. The stored text is bounded
by the 20,000-character segment bound.
"""

from __future__ import annotations

import pytest
from channelkit.platforms.common.text import MAX_VISIBLE_CHARS, TRUNCATION_MARKER
from channelkit.platforms.dingtalk.cluster import INTERRUPTED_TEXT
from cluster_helpers import Bot
from dingtalk_helpers import ScriptBridge

SHOWN = "Here is the plan: first the schema, then the migration."


def _streaming(text: str):  # type: ignore[no-untyped-def]
    def script(bridge, sid, _prompt, sink):  # type: ignore[no-untyped-def]
        sink.text_chunk(sid, text)
        bridge.wait_cancel(sid, timeout=10)
        return text

    return script


@pytest.fixture
def bot():  # type: ignore[no-untyped-def]
    made = []

    def make(**kw):  # type: ignore[no-untyped-def]
        b = Bot(ScriptBridge, **kw)
        made.append(b)
        return b

    yield make
    for b in made:
        b.close()


def _recovered(bot, text: str) -> tuple[str, dict[str, str]]:  # type: ignore[no-untyped-def]
    b = bot()
    a, survivor = b.instance(_streaming(text)), b.instance()
    a.send("hello")
    track = a.wait_for(lambda: a.status_tracks())[0]
    a.wait_for(lambda: any(track in key for key in b.memory.scan("dingtalk:card:")))
    b.advance(0.5)  # the first flush interval: the card shows the text
    a.wait_for(
        lambda: any(
            op == "stream" and kw["out_track_id"] == track and kw["content"]
            for op, kw in b.api.ops()
        )
    )
    a.settle()
    a.crash()
    b.advance(5.0)  # the lease (3 s) expires: the survivor finalizes A's card
    survivor.wait_for(lambda: INTERRUPTED_TEXT in b.api.texts())
    updates = {kw["out_track_id"]: kw["params"] for _, kw in b.api.ops("update")}
    return track, updates[track]


def test_the_survivor_finalizes_the_card_with_its_streamed_text_and_the_interrupted_line(
    bot,  # type: ignore[no-untyped-def]
) -> None:
    _, final = _recovered(bot, SHOWN)
    assert final["statusLine"].startswith("Failed")
    assert final["content"] == f"{SHOWN}\n\n{INTERRUPTED_TEXT}"


def test_the_stored_text_is_bounded_by_the_segment_bound(bot) -> None:  # type: ignore[no-untyped-def]
    long = "".join(f"line {n:06d} of a long answer\n" for n in range(2_000))  # ~56,000 chars
    _, final = _recovered(bot, long)
    content = final["content"]
    assert len(content) <= MAX_VISIBLE_CHARS
    assert content.startswith(TRUNCATION_MARKER)
    assert content.endswith(f"line 001999 of a long answer\n\n{INTERRUPTED_TEXT}")

"""A queue notice card is shared through the store like the other cards (issue 23, item
10): while a person's run waits for a slot its queue card is recorded; the record goes
when the run starts or ends; when the instance dies with the run still queued, the
survivor ends the card with the interrupted text and tells the person once. Two
instances of one bot share one MemoryStore (the store seam)."""

from __future__ import annotations

import pytest
from channelkit.platforms.dingtalk.cluster import INTERRUPTED_TEXT
from cluster_helpers import Bot
from dingtalk_helpers import ScriptBridge


def streaming_script(bridge, sid, text, sink):
    """Streams and runs until cancelled (holds the instance's only slot)."""
    sink.text_chunk(sid, "working")
    bridge.wait_cancel(sid, timeout=10)
    return "working"


@pytest.fixture
def bot():
    made = Bot(ScriptBridge)
    yield made
    made.close()


def queue_records(b: Bot) -> list[dict]:
    found = [b.memory.get(key) for key in b.memory.scan("dingtalk:card:ck-queue-")]
    return [record for record in found if record is not None]


def queue_tracks(b: Bot) -> list[str]:
    return [
        c[1]["out_track_id"] for c in b.api.ops("create") if "ck-queue-" in c[1]["out_track_id"]
    ]


def test_the_survivor_ends_a_dead_instances_queue_card_and_tells_the_person(bot) -> None:
    b = bot
    a, survivor = b.instance(streaming_script, max_runs=1), b.instance()
    a.send("first", sender="staff-1", chat="cid-first")
    a.wait_for(lambda: a.status_tracks())
    a.send("second", sender="staff-2", chat="cid-second")
    (track,) = a.wait_for(lambda: queue_tracks(b))
    a.wait_for(lambda: queue_records(b))
    (record,) = queue_records(b)
    assert record["kind"] == "queue" and record["owner"] == "staff-2"
    a.crash()
    b.advance(5.0)  # the lease (3 s) expires: the survivor sweeps
    survivor.wait_for(lambda: b.api.texts().count(INTERRUPTED_TEXT) >= 2)
    ended = [c[1]["params"] for c in b.api.ops("update") if c[1]["out_track_id"] == track]
    assert ended[-1]["content"] == INTERRUPTED_TEXT and ended[-1]["flowStatus"] == 3, ended
    assert ended[-1]["statusLine"] == "Interrupted", ended
    assert queue_records(b) == []
    b.advance(5.0)
    # the running person and the queued person, each told once
    assert b.api.texts().count(INTERRUPTED_TEXT) == 2, b.api.texts()


def test_a_queue_card_record_goes_when_its_run_starts(bot) -> None:
    b = bot
    a = b.instance(streaming_script, max_runs=1)
    a.send("first", sender="staff-1", chat="cid-first")
    a.wait_for(lambda: a.status_tracks())
    a.send("second", sender="staff-2", chat="cid-second")
    a.wait_for(lambda: queue_records(b))
    a.send("/cancel", sender="staff-1", chat="cid-first")  # the slot frees, "second" starts
    a.wait_for(lambda: not queue_records(b))
    (track,) = queue_tracks(b)
    ended = [c[1]["params"] for c in b.api.ops("update") if c[1]["out_track_id"] == track]
    assert ended[-1]["statusLine"] == "Starting now", ended

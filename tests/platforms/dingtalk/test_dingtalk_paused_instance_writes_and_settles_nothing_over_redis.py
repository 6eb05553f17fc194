"""Fencing over a real Redis (127.0.0.1): an instance paused past its lease, whose status
card and question card a survivor finalized, writes nothing to either card when it
resumes, settles no answer (on itself or forwarded from the other instance), stops its
run and logs that once; the survivor's fence mark sits on its lease key, so its token
is refused inside Redis.

The pause: its lease renewals stop (as in a SIGSTOPped process) and its run blocks; the
lease's expiry in Redis is its key going away (deleted here, as the TTL would), and the
shared FakeClock moves past the instance's own trust in its lease.
"""

from __future__ import annotations

import logging
import threading
import uuid

import pytest
from channelkit.platforms.dingtalk.cluster import INTERRUPTED_TEXT
from cluster_helpers import Bot
from dingtalk_helpers import ScriptBridge, submit_payload

pytest.importorskip("redis", reason="redis-py is not installed (the redis extra)")

from channelkit.state import RedisStore  # noqa: E402


@pytest.fixture
def bot(redis_server):
    made = []

    def make():
        b = Bot(ScriptBridge)
        ns = f"fence-{uuid.uuid4().hex[:8]}"
        b.store = RedisStore(redis_server.url, namespace=ns, clock=b.clock)
        made.append(b)
        return b

    yield make
    for b in made:
        b.close()
        b.store.close()


def card_ops(b, track):
    return [op for op in b.api.ops() if op[1].get("out_track_id") == track]


def test_a_resumed_instance_whose_token_was_fenced_writes_no_card_and_settles_nothing(
    bot, caplog
) -> None:
    resume = threading.Event()

    def paused_script(bridge, sid, text, sink):
        sink.text_chunk(sid, "working")
        bridge.ask(sink, sid, "req-1", wait=False)
        sink.text_chunk(sid, "still working")
        resume.wait(10)  # the process is paused here
        sink.text_chunk(sid, " and more after the pause")
        bridge.wait_cancel(sid, timeout=10)
        return "working"

    b = bot()
    # leases that outlive a slow machine's set-up in real time (Redis keeps their TTL)
    lease = {"leaseExpiryS": 120.0}
    a, survivor = b.instance(paused_script, options=lease), b.instance(options=lease)
    a.send("hello")
    status = a.wait_for(lambda: a.status_tracks()[1:])[0]  # the segment after the question
    question = a.wait_for(lambda: a.question_tracks())[0]
    a.wait_for(lambda: b.store.get(f"dingtalk:card:{status}"))
    a.wait_for(lambda: b.store.get(f"dingtalk:card:{question}"))
    b.advance(1.0)  # the pending flush is written before the pause
    a.wait_for(lambda: "still working" in str(b.store.get(f"dingtalk:card:{status}")))
    lease = f"dingtalk:lease:{a.instance_id}"
    assert "token" in b.store.get(lease)

    a.crash()  # paused: no renewals
    b.store.delete(lease)  # ... past its lease: Redis expired the key
    b.advance(121.0, step=5.0)  # past a's own trust in its lease; the survivor sweeps
    survivor.wait_for(lambda: INTERRUPTED_TEXT in b.api.texts())
    assert b.store.get(lease)["fencedBy"] == survivor.instance_id  # fenced in Redis
    survivor.wait_for(
        lambda: {op[1]["out_track_id"]: op[1]["params"] for op in b.api.ops("update")}.get(
            question, {}
        ).get("card_status")
        == "expired"
    )
    survivor.settle()
    updates = {op[1]["out_track_id"]: op[1]["params"] for op in b.api.ops("update")}
    assert updates[status]["content"].endswith(INTERRUPTED_TEXT)
    finalized = {track: len(card_ops(b, track)) for track in (status, question)}

    caplog.set_level(logging.ERROR, logger="channelkit.platforms.common.cluster")
    resume.set()  # resumed: the run streams on
    a.wait_for(lambda: a.bridge.cancelled)  # its run is stopped
    # the person answers the question: on the paused instance, then on the survivor
    assert a.card_request(submit_payload(question)).status == 200
    assert survivor.card_request(submit_payload(question)).status == 200
    b.advance(2.0)
    a.settle()
    survivor.settle()
    for track in (status, question):
        assert card_ops(b, track)[finalized[track] :] == []  # nothing written to either card
    assert a.bridge.responses == [] and survivor.bridge.responses == []  # nothing settled
    assert a.channel.cluster.cluster.fenced is True
    assert b.store.get(f"dingtalk:claim:{question}") is None  # no claim was accepted
    lost = [r for r in caplog.records if "lost its lease" in r.getMessage()]
    assert len(lost) == 1

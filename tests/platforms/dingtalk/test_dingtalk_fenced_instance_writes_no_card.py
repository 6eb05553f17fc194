"""Fencing: an instance paused past its lease (its renewals stopped, its run held) whose
cards a survivor finalized writes nothing to those cards when it resumes, settles no
card action, stops its run and says so once in its log."""

from __future__ import annotations

import logging
import threading

import pytest
from channelkit.platforms.dingtalk.cluster import INTERRUPTED_TEXT
from cluster_helpers import Bot
from dingtalk_helpers import ScriptBridge, stop_payload


@pytest.fixture
def bot():
    made = []

    def make(**kw):
        b = Bot(ScriptBridge, **kw)
        made.append(b)
        return b

    yield make
    for b in made:
        b.close()


def test_a_resumed_instance_whose_lease_was_taken_over_writes_no_card(bot, caplog) -> None:
    resume = threading.Event()

    def paused_script(bridge, sid, text, sink):
        sink.text_chunk(sid, "working")
        resume.wait(10)  # the process is paused here (SIGSTOP)
        sink.text_chunk(sid, " and more after the pause")
        bridge.wait_cancel(sid, timeout=10)
        return "working and more after the pause"

    b = bot()
    a, survivor = b.instance(paused_script), b.instance()
    a.send("hello")
    track = a.wait_for(lambda: a.status_tracks())[0]
    a.wait_for(lambda: any(track in k for k in b.memory.scan("dingtalk:card:")))
    a.crash()  # no renewals: the lease (3 s) lapses
    b.advance(6.0)
    survivor.wait_for(lambda: INTERRUPTED_TEXT in b.api.texts())
    assert "fencedBy" in b.memory.get(f"dingtalk:lease:{a.instance_id}")  # taken over
    finalized = len([op for op in b.api.ops() if op[1].get("out_track_id") == track])

    caplog.set_level(logging.ERROR, logger="channelkit.platforms.common.cluster")
    resume.set()  # SIGCONT: the run streams on, the scheduler fires its late timers
    b.advance(3.0)
    a.wait_for(lambda: a.bridge.cancelled)  # its run is stopped
    a.settle()
    late = [op for op in b.api.ops() if op[1].get("out_track_id") == track][finalized:]
    assert late == []  # nothing written to the card the survivor finalized
    assert a.channel.cluster.cluster.fenced is True
    lost = [r for r in caplog.records if "lost its lease" in r.getMessage()]
    assert len(lost) == 1
    # a Stop reaching the fenced instance is acknowledged and changes nothing
    assert a.card_request(stop_payload(track)).status == 200
    a.settle()
    assert [op for op in b.api.ops() if op[1].get("out_track_id") == track][finalized:] == []


def test_a_live_instance_is_never_fenced(bot) -> None:
    b = bot()
    a, other = b.instance(), b.instance()
    a.send("hello")
    a.idle()
    b.advance(10.0)  # renewals keep both leases
    assert not a.channel.cluster.cluster.fenced and not other.channel.cluster.cluster.fenced
    assert all("token" in b.memory.get(k) for k in b.memory.scan("dingtalk:lease:"))


def test_while_the_store_is_down_the_lease_is_trusted_without_a_store_call_per_write(bot) -> None:
    b = bot(flaky=True)
    a = b.instance()
    cluster = a.channel.cluster.cluster
    a.crash()  # no timer renewals: only holds_lease() renews
    b.store.down = True
    b.clock.advance(10.0)  # past the lease's local deadline
    before = cluster.outages
    assert cluster.holds_lease() is True  # nobody can take over without the store
    assert cluster.outages == before + 1  # one renewal was tried
    assert cluster.holds_lease() is True
    assert cluster.outages == before + 1  # and not again before the next renewal's time
    assert cluster.fenced is False

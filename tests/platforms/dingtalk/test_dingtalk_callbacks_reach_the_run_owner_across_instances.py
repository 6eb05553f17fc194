"""Two instances of one bot share one store: every card callback reaches the instance
that does NOT own the run, and the run's owner applies it (question submit, Stop,
foreign user refused, duplicates, first responder wins); a dead instance's cards are
finalized by the survivor; a restarted instance recovers its previous incarnation; a
lost store refuses claims without losing the run's answer."""

from __future__ import annotations

import logging
import threading

import pytest
from channelkit.platforms.dingtalk.adapter import FORBIDDEN_GROUP_TEXT
from channelkit.platforms.dingtalk.cluster import INTERRUPTED_TEXT
from cluster_helpers import Bot
from dingtalk_helpers import ScriptBridge, stop_payload, submit_payload

OWNER = "staff-1"


def ask_script(bridge, sid, text, sink):
    sink.text_chunk(sid, "before question")
    bridge.ask(sink, sid, "req-1")
    sink.text_chunk(sid, "final answer")
    return "before questionfinal answer"


def streaming_script(bridge, sid, text, sink):
    """Streams and runs until Stop cancels it."""
    sink.text_chunk(sid, "working")
    bridge.wait_cancel(sid, timeout=10)
    return "working"


def held_script(bridge, sid, text, sink):
    """Streams, asks, streams on (a live status card beside the pending question) and
    holds the run until it is cancelled."""
    sink.text_chunk(sid, "working")
    bridge.ask(sink, sid, "req-1", wait=False)
    sink.text_chunk(sid, "still working")
    bridge.wait_cancel(sid, timeout=10)
    return "working"


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


def question_card(owner_instance):
    return owner_instance.wait_for(lambda: owner_instance.question_tracks())[0]


def store_has_card(b, track):
    return any(track in key for key in b.memory.scan("dingtalk:card:"))


def test_a_submit_on_the_other_instance_answers_the_question_once(bot):
    b = bot()
    a, other = b.instance(ask_script), b.instance()
    a.send("hello")
    track = question_card(a)
    a.wait_for(lambda: store_has_card(b, track))
    response = other.card_request(submit_payload(track))
    assert response.status == 200 and response.body == b"{}"
    a.wait_for(lambda: a.bridge.responses)
    a.wait_for(lambda: "final answer" in " ".join(str(c) for c in b.api.ops()))
    assert len(a.bridge.responses) == 1
    assert a.bridge.responses[0][1]["answers"] == {"0": "Beijing", "1": "Logs, Metrics"}
    assert other.bridge.responses == []
    updates = [c[1]["params"] for c in b.api.ops("update") if c[1]["out_track_id"] == track]
    assert updates[-1]["card_status"] == "submitted"


def test_stop_on_the_other_instance_cancels_exactly_the_owners_run(bot):
    b = bot()
    a, other = b.instance(streaming_script), b.instance()
    a.send("hello")
    track = a.wait_for(lambda: a.status_tracks())[0]
    a.wait_for(lambda: store_has_card(b, track))
    assert other.card_request(stop_payload(track)).status == 200
    assert a.bridge.wait_cancel(next(iter(a.bridge.cancel_events)), timeout=5)
    assert len(a.bridge.cancelled) == 1 and other.bridge.cancelled == []
    a.wait_for(
        lambda: any(
            c[1]["out_track_id"] == track and "Stopped" in str(c[1]["params"].get("statusLine"))
            for c in b.api.ops("update")
        )
    )


def test_a_foreign_user_is_refused_on_every_instance_with_one_notice(bot):
    b = bot()
    a, other = b.instance(ask_script), b.instance()
    a.send("hello")
    track = question_card(a)
    a.wait_for(lambda: store_has_card(b, track))
    for instance in (other, other, a):
        assert instance.card_request(submit_payload(track, actor="staff-2")).status == 200
    a.settle()
    other.settle()
    notices = [t for t in b.api.texts() if t == FORBIDDEN_GROUP_TEXT]
    assert len(notices) == 1
    assert a.bridge.responses == []
    other.card_request(submit_payload(track))  # the owner still can
    a.wait_for(lambda: a.bridge.responses)


def test_duplicate_submits_on_both_instances_call_the_responder_once(bot):
    b = bot()
    a, other = b.instance(ask_script), b.instance()
    a.send("hello")
    track = question_card(a)
    a.wait_for(lambda: store_has_card(b, track))
    barrier = threading.Barrier(16)
    forms = [{"0": "Beijing" if i % 2 else "Shanghai", "1": ["Logs"]} for i in range(16)]

    def click(i):
        barrier.wait(5)
        target = other if i % 2 else a
        target.card_request(submit_payload(track, form=forms[i]))

    threads = [threading.Thread(target=click, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    a.wait_for(lambda: a.bridge.responses)
    a.wait_for(lambda: "final answer" in " ".join(str(c) for c in b.api.ops()))
    a.settle()
    other.settle()
    assert len(a.bridge.responses) == 1  # first responder wins, once
    shown = [c[1]["params"] for c in b.api.ops("update") if c[1]["out_track_id"] == track]
    assert shown[-1]["card_status"] == "submitted"
    assert a.bridge.responses[0][1]["answers"]["0"] in shown[-1]["question_desc"]


def test_the_survivor_finalizes_a_dead_instances_cards_and_tells_the_owner_once(bot):
    b = bot()
    a, survivor = b.instance(held_script), b.instance()
    a.send("hello")
    question = question_card(a)
    status = a.wait_for(lambda: a.status_tracks()[1:])[0]  # the card after the question
    a.wait_for(lambda: store_has_card(b, status) and store_has_card(b, question))
    a.crash()
    b.advance(2.0)
    assert INTERRUPTED_TEXT not in b.api.texts()  # the lease (3 s) has not expired yet
    b.advance(3.0)
    survivor.wait_for(lambda: INTERRUPTED_TEXT in b.api.texts())
    updates = {c[1]["out_track_id"]: c[1]["params"] for c in b.api.ops("update")}
    assert updates[status]["statusLine"].startswith("Failed")
    assert updates[status]["content"] == f"still working\n\n{INTERRUPTED_TEXT}"  # text kept
    assert updates[question]["card_status"] == "expired"
    assert b.memory.get(f"dingtalk:tomb:{status}") is not None
    assert not store_has_card(b, status) and not store_has_card(b, question)
    b.advance(5.0)
    assert b.api.texts().count(INTERRUPTED_TEXT) == 1
    # a late click on the finalized card changes nothing
    survivor.card_request(submit_payload(question))
    survivor.settle()
    assert a.bridge.responses == []


def test_a_restarted_instance_recovers_its_previous_incarnations_cards_at_once(bot):
    b = bot()
    first = b.instance(streaming_script, name="bot-1")
    first.send("hello")
    status = first.wait_for(lambda: first.status_tracks())[0]
    first.wait_for(lambda: store_has_card(b, status))
    first.crash()
    again = b.instance(name="bot-1")  # same instanceName, new process; no lease expiry
    again.wait_for(lambda: INTERRUPTED_TEXT in b.api.texts())
    updates = {c[1]["out_track_id"]: c[1]["params"] for c in b.api.ops("update")}
    assert updates[status]["statusLine"].startswith("Failed")


def test_a_lost_store_refuses_claims_then_work_resumes_without_a_restart(bot, caplog):
    b = bot(flaky=True)
    a, other = b.instance(ask_script), b.instance()
    a.send("hello")
    track = question_card(a)
    a.wait_for(lambda: store_has_card(b, track))
    caplog.set_level(logging.ERROR, logger="channelkit.platforms.common.cluster")
    b.store.down = True
    for instance in (other, a, other):
        assert instance.card_request(submit_payload(track)).status == 200
    a.settle()
    other.settle()
    assert a.bridge.responses == []
    errors = [r for r in caplog.records if "unavailable" in r.getMessage()]
    assert len(errors) == 2  # one per instance and outage, not one per callback
    b.store.down = False
    other.card_request(submit_payload(track))
    a.wait_for(lambda: a.bridge.responses)
    a.wait_for(lambda: "final answer" in " ".join(str(c) for c in b.api.ops()))
    assert len(a.bridge.responses) == 1

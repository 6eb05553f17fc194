"""Redis flushed mid-run (FLUSHALL on a real redis-server, 127.0.0.1): every claim, card
record, lease and dedup marker is gone. The instance owning the runs takes its lease
again at its next renewal and writes its live runs and cards again, so a Stop clicked on
the other instance still reaches the owner and cancels exactly that run (the other run
goes on); a message sent before the flush and redelivered afterwards does not run a
second time, while a new message runs."""

from __future__ import annotations

import threading
import uuid

import pytest
from cluster_helpers import Bot
from dingtalk_helpers import ScriptBridge, stop_payload

redis = pytest.importorskip("redis", reason="redis-py is not installed (the redis extra)")

from channelkit.state import RedisStore  # noqa: E402


@pytest.fixture
def bot(redis_server):
    made = []

    def make():
        b = Bot(ScriptBridge)
        ns = f"flush-{uuid.uuid4().hex[:8]}"
        b.store = RedisStore(redis_server.url, namespace=ns, clock=b.clock)
        made.append(b)
        return b

    yield make
    for b in made:
        b.close()
        b.store.close()


def payload(instance, text, *, chat, sender, msg_id):
    body = instance.robot_payload(text, chat=chat, sender=sender, msg_id=msg_id)
    body["createAt"] = int(instance.clock.time() * 1000)  # the platform's send time
    return body


def test_after_a_flush_stop_on_the_other_instance_cancels_exactly_its_run_and_no_message_runs_twice(
    bot, redis_server
):
    sessions: dict[str, str] = {}
    prompts: list[str] = []
    lock = threading.Lock()

    def script(bridge, sid, text, sink):
        with lock:
            sessions[text] = sid
            prompts.append(text)
        if text.startswith("hold"):
            sink.text_chunk(sid, "working")
            bridge.wait_cancel(sid, timeout=10)
        return f"done: {text}"

    b = bot()
    # leases that outlive a slow machine's set-up in real time (Redis keeps their TTL)
    lease = {"leaseExpiryS": 120.0}
    owner, other = b.instance(script, options=lease), b.instance(script, options=lease)
    first = payload(owner, "hold one", chat="cid-1", sender="staff-1", msg_id="msg-one")
    owner.robot_request(first)
    owner.robot_request(payload(owner, "hold two", chat="cid-2", sender="staff-2", msg_id="m2"))
    tracks = owner.wait_for(lambda: owner.status_tracks()[1:] and owner.status_tracks())
    for track in tracks:
        owner.wait_for(lambda track=track: b.store.get(f"dingtalk:card:{track}"))
    owner.wait_for(lambda: len(sessions) == 2)
    chat_of = {op[1]["out_track_id"]: op[1]["target"] for op in b.api.ops("create")}
    one = next(t for t in tracks if "cid-1" in str(chat_of[t]))
    lease = f"dingtalk:lease:{owner.instance_id}"
    token = b.store.get(lease)["token"]

    raw = redis.Redis.from_url(redis_server.url)
    try:
        raw.flushall()  # mid-run: every key of every instance is gone
    finally:
        raw.close()
    assert b.store.get(f"dingtalk:card:{one}") is None

    b.advance(1.0)  # the next lease renewal finds the lease gone and takes it again
    owner.wait_for(lambda: (b.store.get(lease) or {}).get("token", 0) > token)
    owner.wait_for(lambda: b.store.get(f"dingtalk:card:{one}"))  # registered again
    assert b.store.get(f"dingtalk:card:{one}")["instance"] == owner.instance_id
    assert owner.channel.cluster.cluster.reacquired == 1
    assert owner.channel.cluster.cluster.fenced is False

    assert other.card_request(stop_payload(one, actor="staff-1")).status == 200
    owner.wait_for(lambda: owner.bridge.cancelled)
    owner.settle()
    assert owner.bridge.cancelled == [sessions["hold one"]]  # exactly that run

    # the platform redelivers the message sent before the flush, to the other instance
    b.clock.advance(1.0)
    assert not other.robot_request(first).after
    fresh = payload(other, "after", chat="cid-3", sender="staff-3", msg_id="msg-after")
    assert other.robot_request(fresh).after  # new work runs
    other.wait_for(lambda: "after" in prompts)
    other.settle()
    assert sorted(prompts) == ["after", "hold one", "hold two"]  # nothing ran twice
    owner.bridge.cancel_session(sessions["hold two"])

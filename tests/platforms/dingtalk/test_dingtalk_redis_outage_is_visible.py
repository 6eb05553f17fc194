"""A Redis outage is visible and a Redis that comes back empty runs nothing twice.

Two DingTalk instances of one bot share a real redis-server (127.0.0.1). While it is
down: ``/healthz`` is 503 naming the store and the error class; each person whose
message or Stop cannot be handled is told ``MSG_STORE_UNAVAILABLE`` once (not once per
message). Once it is back (restarted empty): ``/healthz`` is ok without a restart, a
redelivered message (sent before the wipe) does not run again on the other instance,
and a new message runs.
"""

from __future__ import annotations

import threading
import uuid

import pytest
from channelkit.core.text import MSG_STORE_UNAVAILABLE
from channelkit.platforms.common.store_watch import EPOCH_KEY, StoreWatch
from channelkit.runtime import FakeClock
from channelkit.testing import wait_until
from channelkit.web.health import health_report
from cluster_helpers import Bot
from dingtalk_helpers import ScriptBridge, stop_payload

pytest.importorskip("redis", reason="redis-py is not installed (the redis extra)")

from channelkit.state import RedisStore  # noqa: E402


@pytest.fixture
def server(redis_server):
    try:
        yield redis_server
    finally:
        redis_server.start()  # the server is shared by the session


@pytest.fixture
def bot(server):
    made = []

    def make():
        b = Bot(ScriptBridge)
        b.store = RedisStore(server.url, namespace=f"outage-{uuid.uuid4().hex[:8]}", clock=b.clock)
        made.append(b)
        return b

    yield make
    for b in made:
        b.close()
        b.store.close()


def payload(instance, text, *, sender, msg_id):
    body = instance.robot_payload(text, sender=sender, msg_id=msg_id)
    body["createAt"] = int(instance.clock.time() * 1000)
    return body


def notices(b):
    return [t for t in b.api.texts() if t == MSG_STORE_UNAVAILABLE]


def test_an_outage_is_503_and_told_once_per_person_then_a_wiped_store_runs_nothing_twice(
    bot, server
):
    prompts: list[str] = []
    lock = threading.Lock()

    def script(bridge, sid, text, sink):
        with lock:
            prompts.append(text)
        if text == "hold":
            sink.text_chunk(sid, "working")
            bridge.wait_cancel(sid, timeout=10)
        return f"done: {text}"

    b = bot()
    one, two = b.instance(script), b.instance(script)
    channels = [one.channel, two.channel]
    first = payload(one, "hello", sender="staff-1", msg_id="msg-before")
    assert one.robot_request(first).after
    one.idle()
    assert prompts == ["hello"]
    assert health_report(channels)["ok"] is True
    assert b.store.get(EPOCH_KEY) is not None  # written by the first claim

    held = payload(one, "hold", sender="staff-3", msg_id="msg-held")
    one.robot_request(held)
    track = one.wait_for(lambda: one.status_tracks()[1:])[0]  # the held run's card
    one.wait_for(lambda: any(track in k for k in b.store.scan("dingtalk:card:")))
    b.clock.advance(1.0)

    server.stop()
    try:
        report = health_report(channels)
        assert report["ok"] is False
        state = report["state"]["dingtalk"]
        assert state["ok"] is False and state["store"] == "redis"
        assert state["error"].startswith("StateStoreUnavailable (")  # the class, not the URL
        assert state["url"] == server.url
        for n in range(3):  # staff-1 three times, staff-2 once: two notices
            r = one.robot_request(payload(one, f"q{n}", sender="staff-1", msg_id=f"msg-o{n}"))
            assert r.status == 200
        two.robot_request(payload(two, "q", sender="staff-2", msg_id="msg-o-2"))
        one.settle()
        two.settle()
        assert len(notices(b)) == 2
        # Stop during the outage, twice: the person is told once (a direct message)
        assert two.card_request(stop_payload(track, actor="staff-3")).status == 200
        assert two.card_request(stop_payload(track, actor="staff-3")).status == 200
        two.settle()
        direct = [c[1] for c in b.api.ops("direct") if c[1]["text"] == MSG_STORE_UNAVAILABLE]
        assert [d["user_ids"] for d in direct] == [["staff-3"]]
        assert prompts == ["hello", "hold"]  # nothing ran during the outage
    finally:
        server.start()  # back, empty (no persistence)

    assert health_report(channels)["ok"] is True  # no restart needed
    # the platform redelivers the message sent before the wipe, to the other instance
    assert not two.robot_request(first).after
    b.clock.advance(1.0)
    fresh = payload(two, "after", sender="staff-1", msg_id="msg-after")
    assert two.robot_request(fresh).after  # new work resumes
    two.settle()
    # settle() waits for the hook pool; the run reaches its agent on the run pool
    wait_until(lambda: prompts == ["hello", "hold", "after"], what="the new message's run")
    # an outage later is a new outage: the person is told again
    server.stop()
    try:
        one.robot_request(payload(one, "again", sender="staff-1", msg_id="msg-again"))
        one.settle()
        assert len(notices(b)) == 4  # 2 messages, 1 Stop, and this one
    finally:
        server.start()
    one.bridge.cancel_session(next(iter(one.bridge.cancel_events)))


def test_health_never_shows_the_urls_password():
    store = RedisStore("redis://:hunter2@127.0.0.1:1/0", socket_timeout_s=0.5)
    try:
        entry = StoreWatch(store, FakeClock().time).health()
    finally:
        store.close()
    assert entry["ok"] is False
    assert "hunter2" not in repr(entry)
    assert entry["url"] == "redis://:***@127.0.0.1:1/0"


def test_the_fail_closed_window_ends():
    class Store:
        namespace, instance_id = "t", "i"

        def __init__(self):
            self.data = {}

        def get(self, key):
            return self.data.get(key)

        def add(self, key, value, *, ttl_s=None):
            return self.data.setdefault(key, dict(value)) == value

    clock = FakeClock()
    store = Store()
    watch = StoreWatch(store, clock.time)
    watch.check_epoch()
    assert watch.reset_at is None
    store.data.clear()  # flushed
    clock.advance(1)
    watch.check_epoch()  # not due yet: the check is rate-limited
    assert watch.reset_at is None
    watch.check_epoch(force=True)
    assert watch.reset_at == clock.time()
    assert watch.fail_closed(clock.time() - 1, window_s=60) is True
    assert watch.fail_closed(clock.time(), window_s=60) is False  # sent after the wipe
    clock.advance(61)
    assert watch.fail_closed(clock.time() - 100, window_s=60) is False

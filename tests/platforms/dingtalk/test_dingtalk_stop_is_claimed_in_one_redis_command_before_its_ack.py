"""A Stop of a status card is correlated, authorized and claimed in one Redis command
before its ACK, on the instance that owns the run and on the other one (a real
redis-server on 127.0.0.1, the script already known to it); the claim carries the
instance's fencing token and the run is cancelled once."""

from __future__ import annotations

import threading
import uuid

import pytest
from cluster_helpers import Bot
from dingtalk_helpers import ScriptBridge, stop_payload

pytest.importorskip("redis", reason="redis-py is not installed (the redis extra)")

from channelkit.state import RedisStore  # noqa: E402
from redis.connection import Connection  # noqa: E402


@pytest.fixture
def bot(redis_server):
    b = Bot(ScriptBridge)
    b.store = RedisStore(redis_server.url, namespace=f"ack-{uuid.uuid4().hex[:8]}", clock=b.clock)
    try:
        yield b
    finally:
        b.close()
        b.store.close()


class Commands:
    """Counts the Redis commands the calling thread sends while it is active."""

    def __init__(self, monkeypatch):
        self.thread: threading.Thread | None = None
        self.sent = 0
        original = Connection.send_packed_command

        def counting(connection, command, check_health=True):
            if threading.current_thread() is self.thread:
                self.sent += 1
            return original(connection, command, check_health)

        monkeypatch.setattr(Connection, "send_packed_command", counting)

    def during(self, fn):
        self.thread, self.sent = threading.current_thread(), 0
        try:
            return fn()
        finally:
            self.thread = None


def hold(bridge, sid, text, sink):
    sink.text_chunk(sid, "working")
    bridge.wait_cancel(sid, timeout=10)
    return "working"


def test_a_stop_costs_one_redis_command_before_its_ack_on_either_instance(bot, monkeypatch):
    # a lease that outlives a slow machine's set-up in real time (Redis keeps the TTL)
    lease = {"leaseExpiryS": 120.0}
    owner, other = bot.instance(hold, options=lease), bot.instance(hold, options=lease)
    owner.send("one", chat="cid-1")
    owner.send("two", chat="cid-2")
    tracks = owner.wait_for(lambda: owner.status_tracks()[1:] and owner.status_tracks())
    for track in tracks:
        owner.wait_for(lambda track=track: bot.store.get(f"dingtalk:card:{track}"))
    # warm: Redis learns the script on its first use (SCRIPT LOAD, then EVALSHA again)
    warm = {"guard": "none", "field": "token", "expected": 0}
    assert bot.store.claim_matching("none", {}, "none", {}, **warm) == (None, "mismatch")
    counter = Commands(monkeypatch)
    for instance, track in ((owner, tracks[0]), (other, tracks[1])):
        response = counter.during(
            lambda i=instance, t=track: i.card_request(stop_payload(t), after=False)
        )
        assert response.status == 200
        assert counter.sent == 1  # the record's read, match and claim: one script
        claim = bot.store.get(f"dingtalk:claim:{track}")
        assert claim == {"by": instance.instance_id}
        response.run_after()
    owner.wait_for(lambda: len(owner.bridge.cancelled) == 2)
    owner.settle()
    assert len(set(owner.bridge.cancelled)) == 2 and other.bridge.cancelled == []

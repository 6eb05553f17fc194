"""A card callback with the Redis store is acknowledged before any Redis command: the
web thread sends none and takes no claim (DingTalk's card ACK is ``{}`` whatever the
outcome). After the ACK, on the pool, a Stop of a status card is correlated, authorized
and claimed in one Redis command on either instance (a real redis-server on 127.0.0.1),
the claim carrying the instance's fencing token. Stops pressed at once on both
instances cancel the run once; a foreign user's Stop cancels nothing on either."""

from __future__ import annotations

import threading
import uuid

import pytest
from channelkit.platforms.dingtalk.adapter import FORBIDDEN_GROUP_TEXT
from cluster_helpers import Bot
from dingtalk_helpers import ScriptBridge, stop_payload

pytest.importorskip("redis", reason="redis-py is not installed (the redis extra)")

from channelkit.state import RedisStore  # noqa: E402
from redis.connection import Connection  # noqa: E402

#: a lease that outlives a slow machine's set-up in real time (Redis keeps the TTL)
LEASE = {"leaseExpiryS": 120.0}


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
    """Counts the Redis commands a thread sends inside `during()` (each thread its own
    count), a new connection's handshake (``HELLO``, ``CLIENT SETINFO``, ...) aside:
    the pool opens connections on demand, on whichever thread needs one."""

    def __init__(self, monkeypatch):
        self._local = threading.local()
        send = Connection.send_packed_command
        # redis-py 6+ runs the handshake in on_connect_check_health, older in on_connect
        hook = "on_connect_check_health"
        if not hasattr(Connection, hook):
            hook = "on_connect"
        connect = getattr(Connection, hook)

        def counting(connection, command, check_health=True):
            local = self._local
            if getattr(local, "sent", None) is not None and not getattr(local, "handshake", 0):
                local.sent += 1
            return send(connection, command, check_health)

        def handshake(connection, *args, **kwargs):
            self._local.handshake = getattr(self._local, "handshake", 0) + 1
            try:
                return connect(connection, *args, **kwargs)
            finally:
                self._local.handshake -= 1

        monkeypatch.setattr(Connection, "send_packed_command", counting)
        monkeypatch.setattr(Connection, hook, handshake)

    def during(self, fn, *args):
        """``(fn(*args), the commands this thread sent meanwhile)``."""
        self._local.sent = 0
        try:
            result = fn(*args)
            return result, self._local.sent
        finally:
            self._local.sent = None


def hold(bridge, sid, text, sink):
    sink.text_chunk(sid, "working")
    bridge.wait_cancel(sid, timeout=10)
    return "working"


def live_cards(bot, owner, count):
    for i in range(count):
        owner.send(f"run {i}", chat=f"cid-{i}")
    tracks = owner.wait_for(lambda: len(owner.status_tracks()) >= count and owner.status_tracks())
    for track in tracks:
        owner.wait_for(lambda track=track: bot.store.get(f"dingtalk:card:{track}"))
    return tracks


def test_no_redis_command_before_a_stops_ack_and_one_after_it_on_either_instance(bot, monkeypatch):
    owner, other = bot.instance(hold, options=LEASE), bot.instance(hold, options=LEASE)
    tracks = live_cards(bot, owner, 2)
    # warm: Redis learns the script on its first use (SCRIPT LOAD, then EVALSHA again)
    warm = {"guard": "none", "field": "token", "expected": 0}
    assert bot.store.claim_matching("none", {}, "none", {}, **warm) == (None, "mismatch")
    counter = Commands(monkeypatch)
    decided: list[int] = []
    for instance in (owner, other):
        router = instance.channel.cluster
        decide = router.decide

        def counted(callback, decide=decide):
            result, sent = counter.during(decide, callback)
            decided.append(sent)
            return result

        monkeypatch.setattr(router, "decide", counted)
    for instance, track in ((owner, tracks[0]), (other, tracks[1])):
        response, sent = counter.during(
            lambda i=instance, t=track: i.card_request(stop_payload(t), after=False)
        )
        assert response.status == 200 and response.body == b"{}"
        assert sent == 0  # the ACK waited on no Redis command
        assert bot.store.get(f"dingtalk:claim:{track}") is None  # nor claimed before it
        response.run_after()
        owner.wait_for(lambda t=track: bot.store.get(f"dingtalk:claim:{t}"))
        assert bot.store.get(f"dingtalk:claim:{track}") == {"by": instance.instance_id}
    owner.wait_for(lambda: len(owner.bridge.cancelled) == 2 and len(decided) == 2)
    owner.settle()
    other.settle()
    assert decided == [1, 1]  # the record's read, match and claim: one script each
    assert len(set(owner.bridge.cancelled)) == 2 and other.bridge.cancelled == []


def test_stops_pressed_at_once_on_both_instances_cancel_the_run_once(bot):
    owner, other = bot.instance(hold, options=LEASE), bot.instance(hold, options=LEASE)
    (track,) = live_cards(bot, owner, 1)
    presses = 8
    barrier = threading.Barrier(presses)
    responses = []
    lock = threading.Lock()

    def press(instance):
        barrier.wait(10)
        response = instance.card_request(stop_payload(track), after=False)
        with lock:
            responses.append(response)

    threads = [
        threading.Thread(target=press, args=(owner if i % 2 else other,)) for i in range(presses)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(responses) == presses and all(r.status == 200 for r in responses)
    for response in responses:
        response.run_after()
    owner.wait_for(lambda: owner.bridge.cancelled)
    owner.wait_for(lambda: bot.store.get(f"dingtalk:tomb:{track}"))  # the card ended
    owner.settle()
    other.settle()
    assert len(owner.bridge.cancelled) == 1 and other.bridge.cancelled == []
    claim = bot.store.get(f"dingtalk:claim:{track}")
    assert claim is not None and claim["by"] in (owner.instance_id, other.instance_id)


def test_a_foreign_users_stop_on_either_instance_cancels_nothing(bot):
    owner, other = bot.instance(hold, options=LEASE), bot.instance(hold, options=LEASE)
    (track,) = live_cards(bot, owner, 1)
    for instance in (other, owner, other):
        response = instance.card_request(stop_payload(track, actor="staff-2"))
        assert response.status == 200
    owner.wait_for(lambda: FORBIDDEN_GROUP_TEXT in bot.api.texts())
    owner.settle()
    other.settle()
    assert owner.bridge.cancelled == []
    assert bot.store.get(f"dingtalk:claim:{track}") is None
    assert [t for t in bot.api.texts() if t == FORBIDDEN_GROUP_TEXT] == [FORBIDDEN_GROUP_TEXT]
    other.card_request(stop_payload(track))  # the owner still can
    owner.wait_for(lambda: owner.bridge.cancelled)
    owner.settle()
    assert len(owner.bridge.cancelled) == 1

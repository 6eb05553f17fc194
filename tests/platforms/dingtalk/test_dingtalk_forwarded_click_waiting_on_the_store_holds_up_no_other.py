"""A click forwarded to the run's owner (it reached the other instance) is settled on
the owner's pool, not on its inbox consumer: while the store is slow to settle one
forwarded Stop, the consumer goes on popping, and the next forwarded Stop cancels its
run; the first one's run is cancelled once the store answers."""

from __future__ import annotations

import threading

import pytest
from cluster_helpers import Bot
from dingtalk_helpers import ScriptBridge, stop_payload


class GatedStore:
    """The shared store, with the settlement of one card's forwarded action held until
    ``release`` is set (a slow store, bounded)."""

    def __init__(self, inner):
        self.inner = inner
        self.namespace = inner.namespace
        self.instance_id = inner.instance_id
        self.gated: str | None = None
        self.waiting = threading.Event()
        self.release = threading.Event()

    def write_if(self, guard, field, expected, key, *args, **kwargs):
        if self.gated is not None and key == f"dingtalk:settled:{self.gated}":
            self.waiting.set()
            self.release.wait(10)
        return self.inner.write_if(guard, field, expected, key, *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def hold(bridge, sid, text, sink):
    sink.text_chunk(sid, "working")
    bridge.wait_cancel(sid, timeout=10)
    return "working"


@pytest.fixture
def bot():
    b = Bot(ScriptBridge)
    b.store = GatedStore(b.memory)
    try:
        yield b
    finally:
        b.store.release.set()
        b.close()


def test_a_forwarded_stop_waiting_on_the_store_holds_up_no_other(bot):
    owner, other = bot.instance(hold), bot.instance(hold)
    for chat in ("cid-slow", "cid-next"):
        owner.send("hello", chat=chat)
    slow, following = owner.wait_for(
        lambda: len(owner.status_tracks()) == 2 and owner.status_tracks()
    )
    for track in (slow, following):
        owner.wait_for(lambda t=track: bot.memory.get(f"dingtalk:card:{t}"))
    sessions = owner.wait_for(
        lambda: len(owner.bridge.cancel_events) == 2 and owner.bridge.cancel_events
    )
    bot.store.gated = slow
    assert other.card_request(stop_payload(slow)).status == 200
    assert bot.store.waiting.wait(5)  # the owner is settling it: the store holds it there
    assert other.card_request(stop_payload(following)).status == 200
    owner.wait_for(lambda: len(owner.bridge.cancelled) == 1)  # the next one went through
    assert not bot.store.release.is_set()
    bot.store.release.set()
    owner.wait_for(lambda: len(owner.bridge.cancelled) == 2)
    owner.settle()
    assert sorted(owner.bridge.cancelled) == sorted(sessions)
    assert other.bridge.cancelled == []

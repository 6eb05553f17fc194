"""``handle_inbound(defer=...)`` and the pending request's deadline (``expires_at``)."""

from __future__ import annotations

import threading

import pytest
from channelkit.agents import FunctionAgent
from channelkit.core import ChannelBusy, ChannelClosed, UserInputPresentationResult
from channelkit.core.text import MSG_CANCELLED
from channelkit.testing import ScriptedBridge, ask, final, gate, inbound, question_request


def test_deferred_run_starts_only_when_its_work_runs(channel_factory):
    bridge = ScriptedBridge([final("done")])
    ch = channel_factory(bridge)
    after: list = []
    handle = ch.handle_inbound(inbound("hi"), defer=after)
    assert len(after) == 1
    assert ch.wait_idle(5)
    assert bridge.prompts == [] and ch.events == [] and not handle.done()
    after[0]()
    assert handle.result(5).status == "completed"
    assert [t for _c, t, _th in ch.sent] == ["done"]
    assert len(bridge.prompts) == 1


def test_deferred_run_keeps_the_queue_bound_and_close(channel_factory):
    ch = channel_factory(ScriptedBridge([final("x")]))
    after: list = []
    handle = ch.handle_inbound(inbound("hi"), defer=after)
    ch.close(timeout=5)
    after[0]()  # the channel closed before the ACK was written: the run never starts
    assert handle.result(1).status == "cancelled"
    with pytest.raises(ChannelClosed):
        ch.handle_inbound(inbound("again"), defer=[])


def test_deferred_run_reserves_its_slot_at_once(channel_factory):
    ch = channel_factory(ScriptedBridge([final("x")]), max_queued_runs=1)
    after: list = []
    first = ch.handle_inbound(inbound("one"), defer=after)
    later: list = []
    second = ch.handle_inbound(inbound("two", sender_id="bob"), defer=later)
    # the queue is full: bob is refused at once, told so after the ACK, nothing starts
    result = second.result(1)
    assert result.status == "rejected" and isinstance(result.error, ChannelBusy)
    assert ch.sent == []
    for fn in later:
        fn()
    ch.wait_for_sent("Busy right now")
    for fn in after:
        fn()
    assert first.result(5).status == "completed"


@pytest.mark.parametrize("text", ["/deny", "/approve"])
def test_deferred_permission_command_answers_after_the_ack(channel_factory, text):
    release = threading.Event()
    bridge = ScriptedBridge([ask(lambda sid: question_request("req-1", sid)), gate(release)])
    ch = channel_factory(bridge)
    run = ch.handle_inbound(inbound("hi"))
    assert bridge.wait_prompt(1)
    ch.wait_for_sent("Permission required")
    after: list = []
    handle = ch.handle_inbound(inbound(text), defer=after)
    assert handle.reply is None and len(after) == 1
    assert ch.pending_request_ids() == ["req-1"] and bridge.responses == []
    after[0]()
    result = handle.result(5)
    assert result.delivered
    assert len(bridge.responses) == 1
    release.set()
    run.result(5)


def test_deferred_cancel_command_runs_after_the_ack(channel_factory):
    release = threading.Event()
    bridge = ScriptedBridge([gate(release), final("late")])
    ch = channel_factory(bridge)
    run = ch.handle_inbound(inbound("hi"))
    assert bridge.wait_prompt(1)
    after: list = []
    handle = ch.handle_inbound(inbound("/cancel"), defer=after)
    assert len(after) == 1 and ch.active_run_id(run.session_id) == run.run_id
    assert bridge.cancels == []
    after[0]()
    assert handle.result(5).reply == MSG_CANCELLED
    release.set()
    assert run.result(5).status == "cancelled"


def test_context_carries_cores_deadline(channel_factory, clock):
    contexts = []

    def presenter(ctx):
        contexts.append(ctx)
        return UserInputPresentationResult.PRESENTED

    bridge = ScriptedBridge([ask(lambda sid: question_request("req-1", sid))])
    ch = channel_factory(bridge, presenter=presenter, permission_timeout=60.0)
    start = clock.now()
    handle = ch.handle_inbound(inbound("hi"))
    ctx = ch.wait_for_presentation()
    assert ctx.expires_at == start + 60.0
    clock.advance(59.9)
    assert ch.pending_request_ids() == ["req-1"]
    clock.advance(0.1)  # core answers cancelled exactly at expires_at
    assert handle.result(5).status == "completed"
    assert bridge.responses == [("req-1", {"outcome": {"outcome": "cancelled"}})]
    assert contexts == [ctx]


def test_permission_lifetime_takes_the_bridges_smaller_timeout(channel_factory, clock):
    agent = FunctionAgent(lambda turn: "x", question_timeout=20.0)
    assert agent.permission_timeout == 20.0
    ch = channel_factory(agent, permission_timeout=60.0)
    assert ch.permission_lifetime() == 20.0
    ch.set_bridge(FunctionAgent(lambda turn: "x", question_timeout=600.0))
    assert ch.permission_lifetime() == 60.0

    bridge = ScriptedBridge([ask(lambda sid: question_request("req-1", sid))])
    bridge.permission_timeout = 10.0  # type: ignore[attr-defined]
    ch2 = channel_factory(bridge, presenter=lambda ctx: UserInputPresentationResult.PRESENTED)
    start = clock.now()
    handle = ch2.handle_inbound(inbound("hi"))
    assert ch2.wait_for_presentation().expires_at == start + 10.0
    clock.advance(10.0)
    assert handle.result(5).status == "completed"
    assert bridge.responses == [("req-1", {"outcome": {"outcome": "cancelled"}})]

from __future__ import annotations

import threading

import pytest
from channelkit.core import LifecycleType, SegmentEndReason
from channelkit.testing import ScriptContext, ScriptedBridge, chunk, fail, gate, inbound


class BlockingCancelBridge(ScriptedBridge):
    """cancel_session blocks until ``release`` is set."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.release = threading.Event()
        self.entered = threading.Event()

    def cancel_session(self, session_id: str) -> bool:
        self.entered.set()
        self.release.wait(5)
        return super().cancel_session(session_id)


def mark(event: threading.Event):
    def step(_ctx: ScriptContext) -> None:
        event.set()

    return step


def test_exact_run_cancellation_only_for_the_current_id(channel_factory):
    hold = threading.Event()
    bridge = ScriptedBridge([chunk("working"), gate(hold)])
    ch = channel_factory(bridge)
    handle = ch.handle_inbound(inbound("go"))
    ch.wait_for(lambda c: len(c.chunks) == 1)
    sid, rid = handle.session_id, handle.run_id
    assert ch.active_run_id(sid) == rid
    assert ch.cancel_run(sid, "") is False  # missing
    assert ch.cancel_run(sid, "not-the-run") is False  # mismatched
    assert ch.cancel_run("other-session", rid) is False  # wrong session
    assert bridge.cancels == []  # never fell back to a session cancel
    assert ch.cancel_run(sid, rid) is True
    result = handle.result()
    assert result.status == "cancelled"
    cancelled = [e for e in ch.events if e.type is LifecycleType.CANCELLED]
    assert len(cancelled) == 1 and cancelled[0].reason == "cancel_command"
    assert cancelled[0].run_id == rid
    assert [e[3] for e in ch.segment_ends] == [SegmentEndReason.CANCELLED]
    assert ch.boundaries == []
    assert not any(e.type is LifecycleType.COMPLETED for e in ch.events)
    assert bridge.cancels == [sid]
    # stale id: the run is over
    assert ch.cancel_run(sid, rid) is False
    assert bridge.cancels == [sid]


def test_stale_id_cannot_cancel_a_newer_run(channel_factory):
    hold = threading.Event()

    def script(_sid, text):
        return [] if text == "first" else [gate(hold)]

    bridge = ScriptedBridge(script)
    ch = channel_factory(bridge)
    old = ch.handle_inbound(inbound("first")).result()
    new = ch.handle_inbound(inbound("second"))
    ch.wait_for(lambda c: any(e.run_id == new.run_id for e in c.events))
    assert ch.cancel_run(old.session_id, old.run_id) is False
    assert bridge.cancels == []
    hold.set()
    assert new.result().status == "completed"


def test_cancel_command_replies_and_emits_once(channel_factory):
    hold = threading.Event()
    bridge = ScriptedBridge([gate(hold)])
    ch = channel_factory(bridge)
    nothing = ch.handle_inbound(inbound("/cancel"))
    assert nothing.reply == "No request is currently running."
    assert nothing.result().delivered
    handle = ch.handle_inbound(inbound("work", message_id="m-cancel"))
    assert bridge.wait_prompt()
    first = ch.handle_inbound(inbound("/cancel"))
    assert first.result().reply == "Cancelled current request."
    again = ch.cancel_run(handle.session_id, handle.run_id)
    assert again is False or again is True  # either way: no second event
    assert handle.result().status == "cancelled"
    cancelled = [e for e in ch.events if e.type is LifecycleType.CANCELLED]
    assert len(cancelled) == 1
    assert cancelled[0].message_id == "m-cancel"
    assert [str(e.type) for e in ch.events] == ["started", "cancelled"]
    assert len(bridge.cancels) == 1


def test_repeated_concurrent_cancels_share_one_rpc(channel_factory):
    hold = threading.Event()
    bridge = BlockingCancelBridge([gate(hold)])
    ch = channel_factory(bridge)
    handle = ch.handle_inbound(inbound("work"))
    assert bridge.wait_prompt()
    results: list[bool] = []
    threads = [
        threading.Thread(
            target=lambda: results.append(ch.cancel_run(handle.session_id, handle.run_id))
        )
        for _ in range(4)
    ]
    for t in threads:
        t.start()
    assert bridge.entered.wait(5)
    bridge.release.set()
    for t in threads:
        t.join(5)
    assert results == [True] * 4
    assert len(bridge.cancels) == 1
    handle.result()
    assert sum(1 for e in ch.events if e.type is LifecycleType.CANCELLED) == 1


@pytest.mark.parametrize("cancel_ok", [True, False])
def test_chunks_are_held_while_cancel_is_pending(channel_factory, cancel_ok):
    g1, g2, emitted = threading.Event(), threading.Event(), threading.Event()
    bridge = BlockingCancelBridge(
        [chunk("before"), gate(g1), chunk("during"), mark(emitted), gate(g2)],
        cancel_result=cancel_ok,
    )
    ch = channel_factory(bridge)
    handle = ch.handle_inbound(inbound("go"))
    ch.wait_for(lambda c: len(c.chunks) == 1)
    outcome: list[bool] = []
    canceller = threading.Thread(
        target=lambda: outcome.append(ch.cancel_run(handle.session_id, handle.run_id))
    )
    canceller.start()
    assert bridge.entered.wait(5)
    g1.set()
    assert emitted.wait(5)
    ch.lanes.submit(("run", handle.run_id), lambda: None).result(5)  # lane flushed
    assert [c[1] for c in ch.chunks] == ["before"]  # "during" is held
    bridge.release.set()
    canceller.join(5)
    assert outcome == [cancel_ok]
    if not cancel_ok:
        g2.set()
    result = handle.result()
    texts = [e.chunk for e in ch.events if e.type is LifecycleType.TEXT_CHUNK]
    if cancel_ok:
        assert result.status == "cancelled"
        assert texts == ["before"]  # discarded
    else:
        assert result.status == "completed"
        assert texts == ["before", "during"]  # replayed after the failed cancel
        assert ch.sent_texts == ["beforeduring"]


def test_boundary_during_pending_cancel_is_ignored(channel_factory):
    from channelkit.testing import boundary

    g1, done = threading.Event(), threading.Event()
    bridge = BlockingCancelBridge(
        [chunk("a"), gate(g1), boundary(), mark(done)], cancel_result=False
    )
    ch = channel_factory(bridge)
    handle = ch.handle_inbound(inbound("go"))
    ch.wait_for(lambda c: len(c.chunks) == 1)
    t = threading.Thread(target=ch.cancel_run, args=(handle.session_id, handle.run_id))
    t.start()
    assert bridge.entered.wait(5)
    g1.set()
    assert done.wait(5)
    bridge.release.set()
    t.join(5)
    handle.result()
    assert ch.boundaries == []
    # the ignored boundary closed nothing: the only end is the delivered segment's
    assert [e[3] for e in ch.segment_ends] == [SegmentEndReason.COMPLETED]


def test_cancel_fails_once_delivery_started(channel_factory):
    in_delivery, release = threading.Event(), threading.Event()
    from channelkit.testing import final

    bridge = ScriptedBridge([final("answer")])
    ch = channel_factory(bridge)
    original = ch.send_message

    def slow_send(chat_id, text, *, thread_id=None):
        in_delivery.set()
        release.wait(5)
        original(chat_id, text, thread_id=thread_id)

    ch.send_message = slow_send  # type: ignore[method-assign]
    handle = ch.handle_inbound(inbound("go"))
    assert in_delivery.wait(5)
    assert ch.cancel_run(handle.session_id, handle.run_id) is False
    reply = ch.handle_inbound(inbound("/cancel"))
    release.set()
    assert reply.result().reply == "Failed to cancel current request."
    assert handle.result().status == "completed"
    assert bridge.cancels == []


def test_error_after_cancellation_is_swallowed(channel_factory, caplog):
    hold = threading.Event()
    bridge = ScriptedBridge(
        [gate(hold), fail(RuntimeError("bridge crashed"))],
    )
    ch = channel_factory(bridge)
    handle = ch.handle_inbound(inbound("go", message_id="m-9"))
    assert bridge.wait_prompt()
    assert ch.cancel_run(handle.session_id, handle.run_id)
    result = handle.result()
    assert result.status == "cancelled"
    assert [str(e.type) for e in ch.events] == ["started", "cancelled"]
    assert "turn m-9 threw after cancellation" in caplog.text


def test_shared_session_cancel_requires_authorization(channel_factory):
    hold = threading.Event()
    bridge = ScriptedBridge([gate(hold)])
    ch = channel_factory(bridge, session_scope="chat", authorized_senders={"owner-1"})
    handle = ch.handle_inbound(inbound("go"))
    assert bridge.wait_prompt()
    denied = ch.handle_inbound(inbound("/cancel", sender_id="rando"))
    assert denied.reply == "Only authorized members can cancel requests in this shared session."
    hold.set()
    assert handle.result().status == "completed"

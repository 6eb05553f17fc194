from __future__ import annotations

import logging
import threading

import pytest
from channelkit.core import (
    ChannelConfig,
    ChannelPromptOwner,
    LifecycleEvent,
    LifecycleType,
    SegmentEndReason,
    SessionTarget,
)
from channelkit.errors import ConfigurationError
from channelkit.testing import (
    WAIT,
    RecordingChannel,
    ScriptedBridge,
    boundary,
    chunk,
    fail,
    final,
    gate,
    inbound,
    tool,
)


def types(events: list[LifecycleEvent]) -> list[str]:
    return [str(e.type) for e in events]


def test_every_run_gets_a_unique_run_id_carried_by_all_its_events(channel_factory):
    bridge = ScriptedBridge(
        [chunk("part"), tool("tool-1", kind="shell", title="Run ls", status="completed")]
    )
    ch = channel_factory(bridge)
    first = ch.handle_inbound(inbound("hello", message_id="m-1")).result()
    second = ch.handle_inbound(inbound("again", message_id="m-2")).result()
    assert first.status == second.status == "completed"
    assert first.session_id == second.session_id
    assert first.run_id != second.run_id
    by_run: dict[str, list[LifecycleEvent]] = {}
    for event in ch.events:
        by_run.setdefault(event.run_id, []).append(event)
    assert set(by_run) == {first.run_id, second.run_id}
    for run_id, msg_id in ((first.run_id, "m-1"), (second.run_id, "m-2")):
        events = by_run[run_id]
        assert types(events) == ["started", "text_chunk", "tool_call", "completed"]
        assert all(e.owner == ChannelPromptOwner("owner-1") for e in events)
        assert all(e.message_id == msg_id and e.session_id == first.session_id for e in events)
        assert events[1].chunk == "part"
        assert events[2].tool_call is not None and events[2].tool_call.tool_call_id == "tool-1"
    assert ch.sent_texts == ["part", "part"]


def test_started_never_allocates_and_segments_rotate_at_boundaries(channel_factory):
    bridge = ScriptedBridge(
        [chunk("a"), chunk("b"), boundary(), boundary(), chunk("second"), final("second")]
    )
    ch = channel_factory(bridge)
    result = ch.handle_inbound(inbound("hi")).result()
    events = ch.events
    assert events[0].type is LifecycleType.STARTED
    # nothing segment-related happened before the first chunk
    first_chunk_index = next(i for i, r in enumerate(ch.records) if r[0] == "on_response_chunk")
    assert all(r[0] in ("on_task_lifecycle",) for r in ch.records[:first_chunk_index]), ch.records[
        :first_chunk_index
    ]
    segs = [c[3] for c in ch.chunks]
    assert segs[0] is not None and segs[0] == segs[1]
    assert segs[2] is not None and segs[2].segment_id != segs[0].segment_id
    assert {s.run_id for s in segs} == {result.run_id}
    assert {s.session_id for s in segs} == {result.session_id}
    # the boundary closed segment 1 exactly once; the second boundary was a no-op
    # then final delivery gets the open segment, which ends (completed) after it
    assert [(e[2].segment_id, e[3]) for e in ch.segment_ends] == [
        (segs[0].segment_id, SegmentEndReason.RESPONSE_BOUNDARY),
        (segs[2].segment_id, SegmentEndReason.COMPLETED),
    ]
    assert ch.boundaries == [("chat1", result.session_id)]
    assert ch.completes == [("chat1", "second", result.session_id, segs[2])]
    names = [r[0] for r in ch.records]
    assert names.index("on_response_complete") < len(names) - 1 - names[::-1].index(
        "on_output_segment_end"
    )
    assert types(events)[-1] == "completed"


def test_final_response_without_chunks_allocates_one_segment(channel_factory):
    ch = channel_factory(ScriptedBridge([final("only final")]))
    result = ch.handle_inbound(inbound("hi")).result()
    assert len(ch.completes) == 1
    segment = ch.completes[0][3]
    assert segment is not None and segment.run_id == result.run_id
    assert segment.owner.id == "owner-1"
    assert segment.target == SessionTarget("test", "owner-1", "chat1")
    # the delivered segment ends through the hook exactly once, after delivery
    assert [(e[2], e[3]) for e in ch.segment_ends] == [(segment, SegmentEndReason.COMPLETED)]
    assert types(ch.events) == ["started", "completed"]
    assert ch.sent_texts == ["only final"]


def test_streamed_output_with_empty_response_closes_as_completed(channel_factory):
    ch = channel_factory(ScriptedBridge([chunk("streamed"), final("")]))
    ch.handle_inbound(inbound("hi")).result()
    assert [e[3] for e in ch.segment_ends] == [SegmentEndReason.COMPLETED]
    assert ch.boundaries == []
    assert ch.completes == []
    assert ch.sent_texts == []


def test_empty_response_sends_nothing(channel_factory):
    ch = channel_factory(ScriptedBridge([]))
    assert ch.handle_inbound(inbound("hi")).result().status == "completed"
    assert ch.sent == [] and types(ch.events) == ["started", "completed"]


def test_agent_failure_emits_failed_with_sanitized_error(channel_factory):
    bridge = ScriptedBridge([chunk("x"), fail(RuntimeError("agent boom\nsecret second line"))])
    ch = channel_factory(bridge)
    result = ch.handle_inbound(inbound("hi")).result()
    assert result.status == "failed" and isinstance(result.error, RuntimeError)
    failed = ch.events[-1]
    assert failed.type is LifecycleType.FAILED
    assert failed.error == "agent boom\\nsecret second line"
    assert failed.phase == "agent" and failed.run_id == result.run_id
    assert [e[3] for e in ch.segment_ends] == [SegmentEndReason.FAILED]
    assert ch.boundaries == []


def test_delivery_failure_is_phase_delivery(channel_factory):
    ch = channel_factory(ScriptedBridge([final("answer")]))
    ch.send_error = OSError("network down")
    result = ch.handle_inbound(inbound("hi")).result()
    assert result.status == "failed"
    assert ch.events[-1].type is LifecycleType.FAILED and ch.events[-1].phase == "delivery"


class ThrowingChannel(RecordingChannel):
    def on_task_lifecycle(self, event: LifecycleEvent) -> None:
        super().on_task_lifecycle(event)
        if event.type is LifecycleType.STARTED:
            raise RuntimeError("hook boom")

    def on_response_chunk(self, chat_id, chunk, session_id, segment=None):
        super().on_response_chunk(chat_id, chunk, session_id, segment)
        raise ValueError("chunk hook boom")


def test_hook_exceptions_are_logged_with_ids_and_never_break_the_run(caplog):
    from channelkit.runtime import FakeClock

    ch = ThrowingChannel(
        ChannelConfig(name="test"), ScriptedBridge([chunk("a"), chunk("b")]), clock=FakeClock()
    )
    try:
        with caplog.at_level(logging.ERROR):
            result = ch.handle_inbound(inbound("hi")).result()
        assert result.status == "completed"
        assert types(ch.events) == ["started", "text_chunk", "text_chunk", "completed"]
        assert ch.sent_texts == ["ab"]
        assert "on_task_lifecycle threw for started" in caplog.text
        assert result.session_id in caplog.text and result.run_id in caplog.text
        assert "on_response_chunk threw" in caplog.text
    finally:
        ch.close()


def test_slow_hook_never_blocks_the_model(channel_factory):
    release = threading.Event()
    produced = threading.Event()

    class Slow(RecordingChannel):
        def on_response_chunk(self, chat_id, chunk, session_id, segment=None):
            release.wait(5)
            super().on_response_chunk(chat_id, chunk, session_id, segment)

    from channelkit.runtime import FakeClock

    def script(_sid, _text):
        def mark(_ctx):
            produced.set()

        return [chunk("1"), chunk("2"), chunk("3"), mark]

    ch = Slow(ChannelConfig(name="test"), ScriptedBridge(script), clock=FakeClock())
    try:
        handle = ch.handle_inbound(inbound("hi"))
        assert produced.wait(5)  # the agent produced everything while the hook was stuck
        assert ch.chunks == []
        release.set()
        assert handle.result().status == "completed"
        assert [c[1] for c in ch.chunks] == ["1", "2", "3"]
    finally:
        release.set()
        ch.close()


@pytest.mark.parametrize("kind", ["loop", "webhook"])
def test_loop_and_webhook_runs_have_no_owner_and_no_segments(channel_factory, kind):
    ch = channel_factory(ScriptedBridge([chunk("tick"), boundary(), chunk("tock")]))
    target = SessionTarget("test", "system", "chat-loop")
    if kind == "loop":
        handle = ch.run_loop_prompt(target, "do the job", job_id="job-1")
    else:
        handle = ch.run_webhook_task(target, "hook", task_id="job-1")
    result = handle.result()
    assert types(ch.events) == ["started", "text_chunk", "text_chunk", "completed"]
    assert all(e.owner is None and e.run_id == result.run_id for e in ch.events)
    assert all(e.message_id == "job-1" and e.chat_id == "chat-loop" for e in ch.events)
    assert [c[3] for c in ch.chunks] == [None, None]
    assert ch.segment_ends == [] and ch.boundaries == []
    # text across a response boundary is a new paragraph, never glued to the last words
    assert ch.completes == [("chat-loop", "tick\n\ntock", result.session_id, None)]
    assert ch.sent == [("chat-loop", "tick\n\ntock", None)]


def test_session_scopes(channel_factory):
    user = channel_factory(ScriptedBridge([]))
    a = user.handle_inbound(inbound("x", sender_id="alice", chat_id="g")).result()
    a2 = user.handle_inbound(inbound("y", sender_id="alice", chat_id="g")).result()
    b = user.handle_inbound(inbound("x", sender_id="bob", chat_id="g")).result()
    assert a.session_id == a2.session_id != b.session_id
    chat = channel_factory(ScriptedBridge([]), session_scope="chat")
    c1 = chat.handle_inbound(inbound("x", sender_id="alice", chat_id="g")).result()
    c2 = chat.handle_inbound(inbound("x", sender_id="bob", chat_id="g")).result()
    assert c1.session_id == c2.session_id
    thread = channel_factory(ScriptedBridge([]), session_scope="thread")
    t1 = thread.handle_inbound(inbound("x", chat_id="g", thread_id="t1")).result()
    t2 = thread.handle_inbound(inbound("x", sender_id="bob", chat_id="g", thread_id="t1")).result()
    t3 = thread.handle_inbound(inbound("x", chat_id="g", thread_id="t2")).result()
    assert t1.session_id == t2.session_id != t3.session_id


def test_runs_of_one_session_are_serialized(channel_factory):
    release, first_called = threading.Event(), threading.Event()
    calls: list[str] = []

    def script(_sid, text):
        calls.append(text)
        first_called.set()
        return [gate(release)] if text == "first" else [final("second done")]

    ch = channel_factory(ScriptedBridge(script))
    h1 = ch.handle_inbound(inbound("first"))
    h2 = ch.handle_inbound(inbound("second"))
    assert ch.wait_for(lambda c: len(c.events) >= 1)
    # the first run is inside its bridge (its first event can show before the bridge is
    # called); the second waits for it
    assert first_called.wait(WAIT)
    assert not h2.done() and calls == ["first"]
    release.set()
    assert h1.result().status == "completed"
    assert h2.result().status == "completed"
    assert calls == ["first", "second"]


def test_inbound_validation_names_the_field(channel_factory):
    ch = channel_factory(ScriptedBridge([]))
    with pytest.raises(ConfigurationError, match="msg.chat_id"):
        ch.handle_inbound(inbound("x", chat_id=""))
    with pytest.raises(ConfigurationError, match="msg.channel_name"):
        ch.handle_inbound(inbound("x", channel_name="other"))


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"name": " "}, "name"),
        ({"name": "x", "session_scope": "galaxy"}, "session_scope"),
        ({"name": "x", "permission_timeout": 0}, "permission_timeout"),
        ({"name": "x", "cancel_timeout": -1}, "cancel_timeout"),
        ({"name": "x", "max_workers": 0}, "max_workers"),
        ({"name": "x", "max_concurrent_runs": 0}, "max_concurrent_runs"),
        ({"name": "x", "max_queued_runs": 0}, "max_queued_runs"),
        ({"name": "x", "max_queued_per_owner": True}, "max_queued_per_owner"),
        ({"name": "x", "max_queued_per_chat": "9"}, "max_queued_per_chat"),
        ({"name": "x", "model": ""}, "model"),
        ({"name": "x", "authorized_senders": "alice"}, "authorized_senders"),
        ({"name": "x", "max_pending_permissions": 0}, "max_pending_permissions"),
        # non-finite bounds: NaN passes "<= 0" and breaks timers/waits later
        ({"name": "x", "permission_timeout": float("nan")}, "permission_timeout"),
        ({"name": "x", "permission_timeout": float("inf")}, "permission_timeout"),
        ({"name": "x", "cancel_timeout": float("nan")}, "cancel_timeout"),
        ({"name": "x", "delivery_timeout": float("inf")}, "delivery_timeout"),
        ({"name": "x", "respond_timeout": float("nan")}, "respond_timeout"),
    ],
)
def test_config_validation_names_the_field(kwargs, field):
    with pytest.raises(ConfigurationError) as info:
        ChannelConfig(**kwargs)
    assert info.value.path == field


def test_config_defaults():
    cfg = ChannelConfig(name="dt", model="qwen3.7-max", authorized_senders=["a", "b"])
    # no scope configured: picked per message (a DM per person, a group per thread
    # where the platform has threads, see test_the_default_session_scope_...)
    assert cfg.session_scope is None and cfg.scope is None and not cfg.shared_sessions
    # runs have their own pool: the default concurrency does not depend on max_workers
    assert cfg.max_concurrent_runs == 64 and cfg.max_workers == 16
    assert (cfg.max_queued_runs, cfg.max_queued_per_owner, cfg.max_queued_per_chat) == (
        1000,
        5,
        100,
    )
    assert cfg.authorized_senders == frozenset({"a", "b"})

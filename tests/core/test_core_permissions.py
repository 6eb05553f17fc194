from __future__ import annotations

import threading
from typing import Any

import pytest
from channelkit.agents.base import PermissionOption
from channelkit.core import (
    ChannelPromptOwner,
    SegmentEndReason,
    SessionTarget,
    SettlementReason,
    UserInputPresentationResult,
    UserInputRequestContext,
)
from channelkit.testing import (
    ScriptedBridge,
    ask,
    chunk,
    died,
    gate,
    inbound,
    permission,
    permission_request,
    question_request,
    resolved,
)

PRESENTED = UserInputPresentationResult.PRESENTED
HANDLED = UserInputPresentationResult.HANDLED
UNSUPPORTED = UserInputPresentationResult.UNSUPPORTED

SUBMIT = {
    "outcome": {"outcome": "selected", "optionId": "proceed_once"},
    "answers": {"0": "Beijing", "1": "Logs, Metrics"},
}


def q(request_id: str = "req-q", **kw: Any):
    return lambda sid: question_request(request_id, sid, **kw)


def p(request_id: str, **kw: Any):
    return lambda sid: permission_request(request_id, sid, **kw)


class Settled:
    """Collects settlement reasons from a context."""

    def __init__(self) -> None:
        self.reasons: list[SettlementReason] = []
        self.event = threading.Event()

    def __call__(self, reason: SettlementReason) -> None:
        self.reasons.append(reason)
        self.event.set()


def presenting(
    result=PRESENTED, settled: Settled | None = None, hold: threading.Event | None = None
):
    def presenter(ctx: UserInputRequestContext) -> UserInputPresentationResult:
        if settled is not None:
            ctx.on_settled(settled)
        if hold is not None:
            hold.wait(5)
        return result

    return presenter


# -- presentation results ----------------------------------------------------------------


def test_presented_keeps_pending_and_context_carries_captured_scope(channel_factory):
    bridge = ScriptedBridge([ask(q())])
    seen_pending: list[list[str]] = []

    def presenter(ctx):
        seen_pending.append(ch.pending_request_ids())  # registered before presentation
        return PRESENTED

    ch = channel_factory(bridge, presenter=presenter)
    handle = ch.handle_inbound(inbound("hi", chat_id="group-1", sender_id="alice", is_group=True))
    ctx = ch.wait_for_presentation()
    assert seen_pending == [["req-q"]]
    assert ctx.request_id == "req-q"
    assert ctx.session_id == handle.session_id and ctx.run_id == handle.run_id
    assert ctx.owner == ChannelPromptOwner("alice")
    assert ctx.target == SessionTarget("test", "alice", "group-1", None, True)
    assert ctx.submit_option_id == "proceed_once"
    assert [x.answer_key for x in ctx.questions] == ["0", "1"]
    assert ctx.preceding_segment_id is None
    ch.lanes.submit(("run", handle.run_id), lambda: None).result(5)  # lane flushed
    assert ch.sent == []  # no text fallback
    assert ch.pending_request_ids() == ["req-q"]
    assert ctx.respond(SUBMIT) is True
    assert bridge.responses == [("req-q", SUBMIT)]  # forwarded verbatim, answers included
    assert ctx.settled is SettlementReason.RESOLVED_OUTSIDE_PRESENTER
    assert ch.pending_request_ids() == []
    assert handle.result().status == "completed"


def test_handled_is_accepted_only_when_respond_was_called(channel_factory):
    cancel = {"outcome": {"outcome": "selected", "optionId": "cancel"}}

    def presenter(ctx):
        assert ctx.respond(cancel) is True
        return HANDLED

    bridge = ScriptedBridge([ask(q())])
    ch = channel_factory(bridge, presenter=presenter)
    ch.handle_inbound(inbound("hi")).result()
    assert bridge.responses == [("req-q", cancel)]
    assert ch.sent == []
    assert ch.presentations[0].settled is SettlementReason.CANCELLED


def test_handled_without_respond_falls_back_to_text(channel_factory):
    bridge = ScriptedBridge([permission(q())])
    ch = channel_factory(bridge, presenter=presenting(HANDLED))
    ch.handle_inbound(inbound("hi")).result()
    text = ch.wait_for_sent("Permission required to run a tool")
    assert "Tool: ask_user_question" in text
    assert "Action: Ask user 2 questions" in text
    assert "Parameters: questions (2 items)" in text
    assert bridge.responses == []
    assert ch.pending_request_ids() == ["req-q"]
    # the text path owns it now: /approve works (no answers, as for any text client)
    assert ch.handle_inbound(inbound("/approve")).reply == "Permission approved."


def test_unsupported_and_throwing_presenters_fall_back_to_text(channel_factory, caplog):
    ch = channel_factory(ScriptedBridge([permission(q("r1"))]), presenter=presenting(UNSUPPORTED))
    ch.handle_inbound(inbound("hi")).result()
    ch.wait_for_sent("Permission required")

    def boom(ctx):
        raise RuntimeError("card api down")

    ch2 = channel_factory(ScriptedBridge([permission(q("r2"))]), presenter=boom)
    ch2.handle_inbound(inbound("hi")).result()
    ch2.wait_for_sent("Permission required")
    assert "user input presentation failed for request r2" in caplog.text
    assert ch2.pending_request_ids() == ["r2"]


def test_default_hook_is_unsupported(channel_factory):
    ch = channel_factory(ScriptedBridge([permission(q())]))
    ch.handle_inbound(inbound("hi")).result()
    ch.wait_for_sent("Reply with:")
    assert len(ch.presentations) == 1  # recorded, then the default answered unsupported


# -- segments around questions -------------------------------------------------------------


def test_direct_question_allocates_no_segment(channel_factory):
    ch = channel_factory(ScriptedBridge([permission(q())]), presenter=presenting())
    ch.handle_inbound(inbound("hi")).result()
    assert ch.chunks == [] and ch.segment_ends == [] and ch.boundaries == []
    assert ch.presentations[0].preceding_segment_id is None


def test_input_request_closes_open_segment_without_legacy_boundary(channel_factory):
    bridge = ScriptedBridge([chunk("thinking"), permission(q(), emit_boundary=False)])
    ch = channel_factory(bridge, presenter=presenting())
    ch.handle_inbound(inbound("hi")).result()
    segment = ch.chunks[0][3]
    assert segment is not None
    delivered = ch.completes[-1][3]
    assert [(e[2], e[3]) for e in ch.segment_ends] == [
        (segment, SegmentEndReason.INPUT_REQUESTED),
        (delivered, SegmentEndReason.COMPLETED),
    ]
    names = [r[0] for r in ch.records]
    assert names.index("on_output_segment_end") < names.index("present_user_input_request")
    assert ch.boundaries == []
    assert ch.presentations[0].preceding_segment_id == segment.segment_id


def test_bridge_boundary_before_question_closes_segment_once(channel_factory):
    bridge = ScriptedBridge([chunk("thinking"), permission(q())])
    ch = channel_factory(bridge, presenter=presenting())
    ch.handle_inbound(inbound("hi")).result()
    assert [e[3] for e in ch.segment_ends] == [
        SegmentEndReason.RESPONSE_BOUNDARY,
        SegmentEndReason.COMPLETED,  # the final response's segment, after delivery
    ]
    assert len(ch.boundaries) == 1
    assert ch.presentations[0].preceding_segment_id is None


def test_text_after_settled_question_opens_a_new_segment(channel_factory):
    bridge = ScriptedBridge([chunk("before"), ask(q()), chunk("after")])
    ch = channel_factory(bridge, presenter=presenting())
    handle = ch.handle_inbound(inbound("hi"))
    ctx = ch.wait_for_presentation()
    assert ctx.respond(SUBMIT)
    result = handle.result()
    first, second = ch.chunks[0][3], ch.chunks[1][3]
    assert first is not None and second is not None
    assert first.segment_id != second.segment_id
    assert first.run_id == second.run_id == result.run_id
    assert first.session_id == second.session_id == result.session_id
    assert ch.completes[0][3] == second


@pytest.mark.parametrize("kind", ["loop", "webhook"])
def test_synthetic_runs_never_reach_the_presenter(channel_factory, kind):
    bridge = ScriptedBridge([chunk("x"), permission(q())])
    ch = channel_factory(bridge, presenter=presenting())
    target = SessionTarget("test", "system", "chat1")
    runner = ch.run_loop_prompt if kind == "loop" else ch.run_webhook_task
    runner(target, "job").result()
    assert ch.presentations == []
    ch.wait_for_sent("Permission required to run a tool")
    assert [str(e.type) for e in ch.events] == ["started", "text_chunk", "completed"]


# -- commands ------------------------------------------------------------------------------


def test_card_presented_question_refuses_approve_and_accepts_owner_deny(channel_factory):
    settled = Settled()
    bridge = ScriptedBridge([ask(q("req-card"))])
    ch = channel_factory(bridge, presenter=presenting(settled=settled), session_scope="chat")
    handle = ch.handle_inbound(inbound("hi", sender_id="owner-1", is_group=True))
    ch.wait_for_presentation()
    for cmd in ("/approve", "/approve-always", "/approve req-card"):
        reply = ch.handle_inbound(inbound(cmd, sender_id="owner-1")).reply
        assert reply == (
            "Submit this question through its interactive card, or use /deny [request-id] "
            "to cancel it."
        )
    other = ch.handle_inbound(inbound("/deny req-card", sender_id="someone-else"))
    assert other.reply == "No pending permission request with that id for this chat."
    assert bridge.responses == []
    denied = ch.handle_inbound(inbound("/deny req-card", sender_id="owner-1"))
    assert denied.reply == "Permission denied."
    assert bridge.responses == [
        ("req-card", {"outcome": {"outcome": "selected", "optionId": "cancel"}})
    ]
    assert settled.reasons == [SettlementReason.CANCELLED]
    assert handle.result().status == "completed"
    assert ch.handle_inbound(inbound("/deny req-card")).reply == (
        "No pending permission request with that id for this chat."
    )


def test_text_permission_prompt_and_commands(channel_factory):
    bridge = ScriptedBridge([ask(p("req-1"))])
    ch = channel_factory(bridge)
    handle = ch.handle_inbound(inbound("hi"))
    text = ch.wait_for_sent("Permission required")
    assert text == (
        "Permission required to run a tool\n\n"
        "Tool: run_shell_command\n"
        "Action: Run req-1\n"
        "Parameters: command\n\n"
        "Reply with:\n"
        "/approve        Allow\n"
        "/approve-always Always Allow in project\n"
        "/deny           Reject"
    )
    assert "secret-token" not in text and "req-1" not in text.split("Action")[0]
    reply = ch.handle_inbound(inbound("/approve"))
    assert reply.reply == "Permission approved."
    assert reply.result().delivered
    assert bridge.responses == [
        ("req-1", {"outcome": {"outcome": "selected", "optionId": "proceed_once"}})
    ]
    assert handle.result().status == "completed"
    assert "Permission approved." in ch.sent_texts


@pytest.mark.parametrize(
    ("command", "option", "reply"),
    [
        ("/approve-always", "proceed_always_project", "Permission approved always."),
        ("/deny", "cancel", "Permission denied."),
    ],
)
def test_approve_always_and_deny(channel_factory, command, option, reply):
    bridge = ScriptedBridge([ask(p("req-1"))])
    ch = channel_factory(bridge)
    ch.handle_inbound(inbound("hi"))
    ch.wait_for_sent("Permission required")
    assert ch.handle_inbound(inbound(command)).reply == reply
    assert bridge.responses == [("req-1", {"outcome": {"outcome": "selected", "optionId": option}})]


def test_ambiguity_lists_request_ids_and_explicit_ids_work(channel_factory):
    bridge = ScriptedBridge([permission(p("req-1")), ask(p("req-2"))])
    ch = channel_factory(bridge)
    handle = ch.handle_inbound(inbound("hi"))
    ch.wait_for(lambda c: sum("Permission required" in t for t in c.sent_texts) == 2)
    assert ch.handle_inbound(inbound("/approve")).reply == (
        "Multiple permission requests are pending for this chat. Reply with /approve "
        "<request-id>.\n- req-1: Run req-1\n- req-2: Run req-2"
    )
    assert ch.handle_inbound(inbound("/approve nope")).reply == (
        "No pending permission request with that id for this chat."
    )
    assert ch.handle_inbound(inbound("/approve req-2")).reply == "Permission approved."
    assert ch.handle_inbound(inbound("/deny")).reply == "Permission denied."
    assert [r[0] for r in bridge.responses] == ["req-2", "req-1"]
    assert (
        ch.handle_inbound(inbound("/deny")).reply == "No pending permission request for this chat."
    )
    handle.result()


def test_other_chats_threads_and_senders_cannot_answer(channel_factory):
    bridge = ScriptedBridge([ask(p("req-1"))])
    ch = channel_factory(bridge)
    ch.handle_inbound(inbound("hi", chat_id="g", thread_id="t1", is_group=True))
    ch.wait_for_sent("Permission required")
    none = "No pending permission request for this chat."
    assert ch.handle_inbound(inbound("/approve", chat_id="other")).reply == none
    assert ch.handle_inbound(inbound("/approve", chat_id="g", thread_id="t2")).reply == none
    # user scope: another member of the same group cannot approve
    assert (
        ch.handle_inbound(inbound("/approve", chat_id="g", thread_id="t1", sender_id="bob")).reply
        == none
    )
    assert bridge.responses == []
    assert ch.handle_inbound(inbound("/approve", chat_id="g", thread_id="t1")).reply == (
        "Permission approved."
    )


def test_shared_session_requires_authorized_sender(channel_factory):
    bridge = ScriptedBridge([ask(p("req-1"))])
    ch = channel_factory(bridge, session_scope="chat", authorized_senders={"owner-1", "bob"})
    ch.handle_inbound(inbound("hi"))
    ch.wait_for_sent("Permission required")
    assert ch.handle_inbound(inbound("/approve", sender_id="rando")).reply == (
        "Only authorized members can answer permission requests in this shared session."
    )
    assert ch.handle_inbound(inbound("/approve", sender_id="bob")).reply == "Permission approved."


def test_missing_options_and_reject_always_only(channel_factory):
    only_reject_always = (PermissionOption("never", "Never", "reject_always"),)
    bridge = ScriptedBridge([permission(p("req-1", options=only_reject_always))])
    ch = channel_factory(bridge)
    ch.handle_inbound(inbound("hi")).result()
    ch.wait_for_sent("Permission required")
    assert ch.handle_inbound(inbound("/approve")).reply == (
        "This permission request has no approvable option."
    )
    assert ch.handle_inbound(inbound("/approve-always")).reply == (
        "This permission request has no always-allow option."
    )
    assert ch.handle_inbound(inbound("/deny")).reply == "Permission denied."
    assert bridge.responses == [("req-1", {"outcome": {"outcome": "cancelled"}})]


def test_bridge_false_and_bridge_error_replies(channel_factory):
    answers = iter([False])

    def respond(_rid, _resp):
        value = next(answers, None)
        if value is None:
            raise RuntimeError("relay down")
        return value

    bridge = ScriptedBridge(
        [permission(p("req-1")), permission(p("req-2"))], respond_result=respond
    )
    ch = channel_factory(bridge)
    ch.handle_inbound(inbound("hi")).result()
    ch.wait_for(lambda c: len(c.sent) == 2)
    assert ch.handle_inbound(inbound("/approve req-1")).reply == (
        "Permission request is no longer pending."
    )
    assert ch.handle_inbound(inbound("/approve req-2")).reply == (
        "Failed to answer the permission request."
    )
    assert ch.pending_request_ids() == []
    assert ch.handle_inbound(inbound("/approve req-2")).reply == (
        "No pending permission request with that id for this chat."
    )


def test_commands_during_in_flight_presentation(channel_factory):
    hold = threading.Event()
    bridge = ScriptedBridge([permission(q("req-presenting"))])
    ch = channel_factory(bridge, presenter=presenting(UNSUPPORTED, hold=hold))
    handle = ch.handle_inbound(inbound("hi"))
    ch.wait_for_presentation()
    reply = ch.handle_inbound(inbound("/approve req-presenting")).reply
    assert reply is not None and "Submit this question through its interactive card" in reply
    assert bridge.responses == []
    hold.set()
    handle.result()
    ch.wait_for_sent("Permission required to run a tool")


def test_deny_during_in_flight_presentation_suppresses_the_fallback(channel_factory):
    hold = threading.Event()
    bridge = ScriptedBridge([permission(q("req-deny"))])
    ch = channel_factory(bridge, presenter=presenting(UNSUPPORTED, hold=hold))
    handle = ch.handle_inbound(inbound("hi"))
    ch.wait_for_presentation()
    assert ch.handle_inbound(inbound("/deny req-deny")).reply == "Permission denied."
    hold.set()
    handle.result()
    ch.wait_idle(5)
    assert ch.sent_texts == ["Permission denied."]
    assert len(bridge.responses) == 1


# -- settlement -----------------------------------------------------------------------------


def _presented(channel_factory, steps, **kw):
    settled = Settled()
    bridge = ScriptedBridge(steps, **kw)
    ch = channel_factory(bridge, presenter=presenting(settled=settled))
    handle = ch.handle_inbound(inbound("hi"))
    ctx = ch.wait_for_presentation()
    return ch, bridge, handle, ctx, settled


def test_settle_direct_response(channel_factory):
    ch, bridge, handle, ctx, settled = _presented(channel_factory, [ask(q())])
    assert ctx.respond(SUBMIT)
    handle.result()
    assert settled.reasons == [SettlementReason.RESOLVED_OUTSIDE_PRESENTER]
    assert ch.pending_request_ids() == []
    late: list[SettlementReason] = []
    unsubscribe = ctx.on_settled(late.append)  # already settled: called at once
    unsubscribe()
    assert late == [SettlementReason.RESOLVED_OUTSIDE_PRESENTER]
    assert ctx.respond(SUBMIT) is False  # already answered: exactly one caller wins
    assert len(bridge.responses) == 1


@pytest.mark.parametrize(
    ("outcome", "reason"),
    [
        ({"outcome": "cancelled"}, SettlementReason.CANCELLED),
        ({"outcome": "selected", "optionId": "cancel"}, SettlementReason.CANCELLED),
        (
            {"outcome": "selected", "optionId": "proceed_once"},
            SettlementReason.RESOLVED_OUTSIDE_PRESENTER,
        ),
        (None, SettlementReason.RESOLVED_OUTSIDE_PRESENTER),
    ],
)
def test_settle_external_permission_resolved(channel_factory, outcome, reason):
    release = threading.Event()
    steps = [permission(q()), gate(release), resolved("req-q", outcome), resolved("req-q", None)]
    ch, bridge, handle, ctx, settled = _presented(channel_factory, steps)
    unsubscribed: list[SettlementReason] = []
    ctx.on_settled(unsubscribed.append)()
    release.set()
    handle.result()
    assert settled.reasons == [reason]
    assert unsubscribed == []
    assert ch.pending_request_ids() == []
    assert ctx.respond(SUBMIT) is False  # no longer pending
    assert bridge.responses == []


def test_settle_timeout_answers_cancelled(channel_factory, clock):
    ch, bridge, handle, ctx, settled = _presented(channel_factory, [ask(q())])
    clock.advance(299)
    assert settled.reasons == []
    clock.advance(1)
    assert settled.event.wait(5)
    handle.result()
    assert settled.reasons == [SettlementReason.CANCELLED]
    assert bridge.responses == [("req-q", {"outcome": {"outcome": "cancelled"}})]
    assert ch.pending_request_ids() == []


def test_settle_run_cancellation_wins_over_later_bridge_cancel(channel_factory):
    steps = [ask(q()), resolved("req-q", {"outcome": "cancelled"})]
    ch, bridge, handle, ctx, settled = _presented(channel_factory, steps)
    assert ch.cancel_run(ctx.session_id, ctx.run_id) is True
    handle.result()
    assert settled.reasons == [SettlementReason.RUN_CANCELLED]
    assert ch.pending_request_ids() == []
    assert ctx.respond(SUBMIT) is False


def test_settle_session_death(channel_factory):
    release = threading.Event()
    steps = [permission(q()), gate(release), died()]
    ch, bridge, handle, ctx, settled = _presented(channel_factory, steps)
    release.set()
    handle.result()
    assert settled.reasons == [SettlementReason.CANCELLED]
    assert ch.pending_request_ids() == []
    # the route keeps its session: the bridge restores the conversation (or says it
    # could not), so the next message continues the same session
    assert ch.handle_inbound(inbound("again")).result().session_id == handle.session_id


def test_settle_bridge_replacement(channel_factory):
    ch, bridge, handle, ctx, settled = _presented(channel_factory, [permission(q())])
    handle.result()
    replacement = ScriptedBridge([])
    ch.set_bridge(replacement)
    assert settled.reasons == [SettlementReason.CANCELLED]
    assert bridge.responses == [] and replacement.responses == []
    assert ch.handle_inbound(inbound("/deny req-q")).reply == (
        "No pending permission request with that id for this chat."
    )


def test_settle_send_failure(channel_factory):
    settled: list[SettlementReason] = []
    bridge = ScriptedBridge([permission(p("req-1"))])
    ch = channel_factory(bridge)
    ch.send_error = OSError("send failed")
    original = ch._requests.dispatch_request

    def capture(request):
        original(request)
        pending = ch._requests.get(request.request_id)
        if pending is not None:
            pending.subscribe(settled.append)

    ch._requests.dispatch_request = capture  # type: ignore[method-assign]
    ch.handle_inbound(inbound("hi")).result()
    ch.wait_idle(5)
    assert settled == [SettlementReason.CANCELLED]
    assert bridge.responses == [("req-1", {"outcome": {"outcome": "cancelled"}})]
    assert ch.pending_request_ids() == []


def test_listener_errors_are_isolated(channel_factory, caplog):
    ch, bridge, handle, ctx, settled = _presented(channel_factory, [ask(q())])

    def bad(_reason):
        raise RuntimeError("listener boom")

    ctx.on_settled(bad)
    after = Settled()
    ctx.on_settled(after)
    assert ctx.respond(SUBMIT)
    handle.result()
    assert settled.reasons == after.reasons == [SettlementReason.RESOLVED_OUTSIDE_PRESENTER]
    assert "user input settlement listener failed for request req-q" in caplog.text


# -- one-shot respond under contention -------------------------------------------------------


def test_32_threads_respond_once(channel_factory):
    calls: list[str] = []
    entered = threading.Event()
    release = threading.Event()

    def respond(rid, _resp):
        calls.append(rid)
        entered.set()
        release.wait(5)
        return True

    ch, bridge, handle, ctx, settled = _presented(
        channel_factory, [ask(q())], respond_result=respond
    )
    start = threading.Barrier(32, timeout=5)
    results: list[bool] = []
    lock = threading.Lock()

    def caller() -> None:
        start.wait()
        value = ctx.respond(SUBMIT)
        with lock:
            results.append(value)

    threads = [threading.Thread(target=caller) for _ in range(32)]
    for t in threads:
        t.start()
    assert entered.wait(5)
    release.set()
    for t in threads:
        t.join(10)
    assert sorted(results) == [False] * 31 + [True]  # exactly one caller wins
    assert calls == ["req-q"]
    assert settled.reasons == [SettlementReason.RESOLVED_OUTSIDE_PRESENTER]
    handle.result()


def test_respond_error_reaches_every_caller_and_settles_cancelled(channel_factory):
    def respond(_rid, _resp):
        raise ConnectionError("agent gone")

    ch, bridge, handle, ctx, settled = _presented(
        channel_factory, [permission(q())], respond_result=respond
    )
    with pytest.raises(ConnectionError):
        ctx.respond(SUBMIT)
    assert ctx.respond(SUBMIT) is False  # the request is settled: nobody else wins
    assert len(bridge.responses) == 1
    assert settled.reasons == [SettlementReason.CANCELLED]
    handle.result()

"""What settlement listeners observe: the reason a request settles with when an answer
or a collapsed bridge cancellation lands inside the cancel window, and a failing
listener logged with its session and run ids."""

from __future__ import annotations

import threading

from channelkit.agents.base import PermissionResolved
from channelkit.core import SettlementReason, UserInputPresentationResult
from channelkit.testing import ScriptedBridge, ask, inbound, question_request

SUBMIT = {"outcome": {"outcome": "selected", "optionId": "proceed_once"}}


def _presented(channel_factory, steps):
    reasons: list[SettlementReason] = []

    def presenter(ctx):
        ctx.on_settled(reasons.append)
        return UserInputPresentationResult.PRESENTED

    bridge = ScriptedBridge(steps)
    ch = channel_factory(bridge, presenter=presenter)
    handle = ch.handle_inbound(inbound("hi"))
    ctx = ch.wait_for_presentation()
    return ch, bridge, handle, ctx, reasons


def test_collapsed_bridge_cancel_inside_the_cancel_window_settles_run_cancelled(
    channel_factory,
):
    # Interleaving: cancel_run's RPC succeeds and clears cancel_pending; before ChannelBase
    # settles the session's requests run_cancelled, the bridge's reader thread delivers the
    # collapsed cancellation of the question. It used to win as the neutral "cancelled".
    ch, bridge, handle, ctx, reasons = _presented(
        channel_factory, [ask(lambda s: question_request("req-q", s))]
    )
    original = ch._cancellation.finish

    def window(run, reason):
        reader = threading.Thread(
            target=ch.event_sink.permission_resolved,
            args=(PermissionResolved("req-q", {"outcome": "cancelled"}),),
        )
        reader.start()
        reader.join(5)
        original(run, reason)

    ch._cancellation.finish = window  # type: ignore[method-assign]
    assert ch.cancel_run(ctx.session_id, ctx.run_id) is True
    assert handle.result().status == "cancelled"
    assert reasons == [SettlementReason.RUN_CANCELLED]
    assert ch.pending_request_ids() == []


def test_external_answer_inside_the_cancel_window_keeps_its_classification(channel_factory):
    # Only a collapsed cancellation is relabelled; a real answer from another surface is not.
    ch, bridge, handle, ctx, reasons = _presented(
        channel_factory, [ask(lambda s: question_request("req-q", s))]
    )
    original = ch._cancellation.finish

    def window(run, reason):
        ch.event_sink.permission_resolved(PermissionResolved("req-q", SUBMIT["outcome"]))
        original(run, reason)

    ch._cancellation.finish = window  # type: ignore[method-assign]
    assert ch.cancel_run(ctx.session_id, ctx.run_id) is True
    handle.result()
    assert reasons == [SettlementReason.RESOLVED_OUTSIDE_PRESENTER]


def test_listener_failure_log_names_session_and_run(channel_factory, caplog):
    ch, bridge, handle, ctx, reasons = _presented(
        channel_factory, [ask(lambda s: question_request("req-q", s))]
    )

    def bad(_reason):
        raise RuntimeError("listener boom")

    ctx.on_settled(bad)
    assert ctx.respond(SUBMIT)
    handle.result()
    line = next(r.getMessage() for r in caplog.records if "listener failed" in r.getMessage())
    assert ctx.session_id in line and ctx.run_id in line

"""Core: ordinary permission requests offered to ``present_permission_request``."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from channelkit.agents.base import PermissionOption, PermissionResolved
from channelkit.core import (
    ChannelConfig,
    PermissionOutcome,
    PermissionRequestContext,
    UserInputPresentationResult,
)
from channelkit.runtime import FakeClock
from channelkit.testing import (
    RecordingChannel,
    ScriptedBridge,
    ask,
    chunk,
    inbound,
    permission_request,
    question_request,
    wait_until,
)

PRESENTED = UserInputPresentationResult.PRESENTED
HANDLED = UserInputPresentationResult.HANDLED
UNSUPPORTED = UserInputPresentationResult.UNSUPPORTED

QWEN_OPTIONS = (
    PermissionOption("proceed_always", "Always Allow", "allow_always"),
    PermissionOption("proceed_once", "Allow", "allow_once"),
    PermissionOption("auto_edit", "Switch to auto-edit mode", "switch_mode"),
    PermissionOption("cancel", "Reject", "reject_once"),
)


class ButtonChannel(RecordingChannel):
    """A channel whose adapter presents permission requests with ``buttons``."""

    def __init__(self, *args: Any, buttons: Callable[..., Any] | None = None, **kw: Any) -> None:
        self.buttons = buttons
        self.contexts: list[PermissionRequestContext] = []
        self.outcomes: list[PermissionOutcome | None] = []
        super().__init__(*args, **kw)

    def present_permission_request(
        self, context: PermissionRequestContext
    ) -> UserInputPresentationResult:
        self.contexts.append(context)
        context.on_settled(lambda _reason: self.outcomes.append(context.outcome()))
        if self.buttons is None:
            return PRESENTED
        result: UserInputPresentationResult = self.buttons(context)
        return result


def make(bridge: ScriptedBridge, clock: FakeClock, **kw: Any) -> ButtonChannel:
    buttons = kw.pop("buttons", None)
    cfg = ChannelConfig(name="test", max_workers=8, **kw)
    return ButtonChannel(cfg, bridge, clock=clock, buttons=buttons)


def shell(request_id: str = "req-1", **kw: Any) -> Callable[[str], Any]:
    return lambda sid: permission_request(request_id, sid, **kw)


def context_of(ch: ButtonChannel) -> PermissionRequestContext:
    wait_until(lambda: ch.contexts, timeout=5)
    return ch.contexts[0]


def test_ordinary_permission_is_offered_with_the_agents_own_options_and_no_text_prompt():
    steps = [chunk("Let me check."), ask(shell(options=QWEN_OPTIONS), emit_boundary=False)]
    bridge = ScriptedBridge(steps)
    ch = make(bridge, FakeClock())
    try:
        handle = ch.handle_inbound(inbound("hi", chat_id="c1", sender_id="alice"))
        ctx = context_of(ch)
        assert ctx.request_id == "req-1" and ctx.run_id == handle.run_id
        assert ctx.owner.id == "alice" and ctx.target.chat_id == "c1"
        assert [(o.option_id, o.kind) for o in ctx.options] == [
            ("proceed_always", "allow_always"),
            ("proceed_once", "allow_once"),
            ("auto_edit", "switch_mode"),
            ("cancel", "reject_once"),
        ]
        assert ctx.title == "Run req-1"
        assert "Tool: run_shell_command" in ctx.explanation
        assert "secret-token" not in ctx.explanation  # never raw parameter values
        assert ctx.preceding_segment_id is not None  # "Let me check." ended before it
        assert ctx.outcome() is None
        assert ctx.select("auto_edit") is True
        assert bridge.responses == [
            ("req-1", {"outcome": {"outcome": "selected", "optionId": "auto_edit"}})
        ]
        assert handle.result().status == "completed"
        assert not any("Permission required" in t for t in ch.sent_texts)
        assert ch.outcomes == [PermissionOutcome("selected", QWEN_OPTIONS[2])]
    finally:
        ch.close(timeout=5)


def test_reject_button_sends_the_agents_reject_option_and_reads_as_not_allowed():
    bridge = ScriptedBridge([ask(shell())])
    ch = make(bridge, FakeClock())
    try:
        handle = ch.handle_inbound(inbound("hi"))
        ctx = context_of(ch)
        assert ctx.select("cancel") is True
        assert ctx.select("proceed_once") is False  # one-shot
        assert bridge.responses == [
            ("req-1", {"outcome": {"outcome": "selected", "optionId": "cancel"}})
        ]
        handle.result()
        outcome = ch.outcomes[0]
        assert outcome is not None and outcome.option is not None
        assert outcome.option.option_id == "cancel" and not outcome.allowed
    finally:
        ch.close(timeout=5)


def test_deny_command_still_works_and_the_button_racing_it_loses():
    bridge = ScriptedBridge([ask(shell())])
    ch = make(bridge, FakeClock())
    try:
        handle = ch.handle_inbound(inbound("hi"))
        ctx = context_of(ch)
        assert ch.handle_inbound(inbound("/deny")).reply == "Permission denied."
        assert ctx.select("proceed_once") is False
        assert bridge.responses == [
            ("req-1", {"outcome": {"outcome": "selected", "optionId": "cancel"}})
        ]
        handle.result()
        outcome = ch.outcomes[0]
        assert outcome is not None and outcome.option is not None
        assert outcome.option.option_id == "cancel"
    finally:
        ch.close(timeout=5)


def _tap(start: threading.Barrier, ctx: PermissionRequestContext, results: list[Any]) -> None:
    start.wait(5)
    results.append(ctx.select("proceed_always"))


def test_concurrent_button_and_approve_have_exactly_one_winner():
    for _ in range(5):
        bridge = ScriptedBridge([ask(shell())])
        ch = make(bridge, FakeClock())
        try:
            handle = ch.handle_inbound(inbound("hi"))
            ctx = context_of(ch)
            results: list[Any] = []
            start = threading.Barrier(2)
            thread = threading.Thread(target=_tap, args=(start, ctx, results))
            thread.start()
            start.wait(5)
            reply = ch.handle_inbound(inbound("/approve")).reply
            thread.join(5)
            button_won = results == [True]
            assert button_won != (reply == "Permission approved.")
            assert len(bridge.responses) == 1
            handle.result()
            outcome = ch.outcomes[0]
            assert outcome is not None and outcome.option is not None
            expected = "proceed_always" if button_won else "proceed_once"
            assert outcome.option.option_id == expected and outcome.allowed
        finally:
            ch.close(timeout=5)


def test_expiry_on_the_fake_clock_ends_the_request_as_expired():
    clock = FakeClock()
    bridge = ScriptedBridge([ask(shell())])
    ch = make(bridge, clock, permission_timeout=60)
    try:
        handle = ch.handle_inbound(inbound("hi"))
        ctx = context_of(ch)
        assert ctx.expires_at == clock.now() + 60
        clock.advance(59)
        assert ch.pending_request_ids() == ["req-1"]
        clock.advance(1)
        wait_until(lambda: ch.outcomes, timeout=5)
        assert ch.outcomes == [PermissionOutcome("expired")]
        assert bridge.responses == [("req-1", {"outcome": {"outcome": "cancelled"}})]
        assert ctx.select("proceed_once") is False
        handle.result()
    finally:
        ch.close(timeout=5)


def test_unsupported_and_handled_without_answer_fall_back_to_the_text_prompt():
    for result in (UNSUPPORTED, HANDLED):
        bridge = ScriptedBridge([ask(shell())])
        ch = make(bridge, FakeClock(), buttons=lambda _ctx, r=result: r)
        try:
            handle = ch.handle_inbound(inbound("hi"))
            ch.wait_for_sent("Permission required to run a tool")
            assert ch.handle_inbound(inbound("/approve")).reply == "Permission approved."
            handle.result()
        finally:
            ch.close(timeout=5)


def test_a_raising_adapter_falls_back_to_the_text_prompt():
    def boom(_ctx: PermissionRequestContext) -> UserInputPresentationResult:
        raise RuntimeError("api down")

    bridge = ScriptedBridge([ask(shell())])
    ch = make(bridge, FakeClock(), buttons=boom)
    try:
        handle = ch.handle_inbound(inbound("hi"))
        ch.wait_for_sent("Permission required to run a tool")
        ch.handle_inbound(inbound("/deny"))
        handle.result()
    finally:
        ch.close(timeout=5)


def test_structured_questions_never_reach_the_permission_hook():
    bridge = ScriptedBridge([ask(lambda sid: question_request("req-q", sid))])
    ch = make(bridge, FakeClock())
    try:
        handle = ch.handle_inbound(inbound("hi"))
        ch.wait_for_sent("Permission required")  # RecordingChannel: questions unsupported
        assert ch.contexts == []
        ch.handle_inbound(inbound("/deny"))
        handle.result()
    finally:
        ch.close(timeout=5)


def test_answered_elsewhere_reports_the_agents_chosen_option():
    bridge = ScriptedBridge([ask(shell())])
    ch = make(bridge, FakeClock())
    try:
        ch.handle_inbound(inbound("hi"))
        ctx = context_of(ch)
        outcome = {"outcome": "selected", "optionId": "proceed_once"}
        ch._requests.dispatch_resolved(PermissionResolved("req-1", outcome))
        wait_until(lambda: ch.outcomes, timeout=5)
        assert ch.outcomes[0] == PermissionOutcome("selected", ctx.options[1])
    finally:
        bridge.close()
        ch.close(timeout=5)


def test_plain_channels_keep_the_text_prompt_and_settlement_reasons():
    bridge = ScriptedBridge([ask(shell())])
    ch = RecordingChannel(ChannelConfig(name="test"), bridge, clock=FakeClock())
    try:
        handle = ch.handle_inbound(inbound("hi"))
        ch.wait_for_sent("/approve")
        ch.handle_inbound(inbound("/approve"))
        assert handle.result().status == "completed"
    finally:
        ch.close(timeout=5)

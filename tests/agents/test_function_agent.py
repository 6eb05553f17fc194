from __future__ import annotations

import threading

import pytest
from channelkit.agents import (
    FunctionAgent,
    PermissionRequest,
    PermissionResolved,
    Question,
    QuestionCancelled,
    QuestionExpired,
    ToolCallEvent,
    Turn,
)
from channelkit.core import LifecycleType, SegmentEndReason, UserInputPresentationResult
from channelkit.runtime import FakeClock, Scheduler, WorkerPool
from channelkit.testing import inbound, make_channel

SUBMIT = {"outcome": {"outcome": "selected", "optionId": "proceed_once"}}


class Sink:
    """A bare AgentEventSink recording events."""

    def __init__(self) -> None:
        self.events: list[tuple[str, object]] = []
        self.cond = threading.Condition()

    def _add(self, name: str, value: object) -> None:
        with self.cond:
            self.events.append((name, value))
            self.cond.notify_all()

    def text_chunk(self, session_id: str, chunk: str) -> None:
        self._add("chunk", chunk)

    def response_boundary(self, session_id: str) -> None:
        self._add("boundary", session_id)

    def tool_call(self, event: ToolCallEvent) -> None:
        self._add("tool", event)

    def permission_request(self, request: PermissionRequest) -> None:
        self._add("request", request)

    def permission_resolved(self, event: PermissionResolved) -> None:
        self._add("resolved", event)

    def session_died(self, event: object) -> None:
        self._add("died", event)

    def wait_request(self) -> PermissionRequest:
        with self.cond:
            assert self.cond.wait_for(lambda: any(n == "request" for n, _ in self.events), 5)
            return next(v for n, v in self.events if n == "request")  # type: ignore[return-value]


def run_in_thread(agent: FunctionAgent, sink: Sink, text: str = "hi"):
    out: dict[str, object] = {}

    def target() -> None:
        try:
            out["result"] = agent.prompt("s1", text, sink)
        except BaseException as exc:
            out["error"] = exc

    t = threading.Thread(target=target)
    t.start()
    return t, out


def test_say_ask_say_produces_two_segments_and_the_question():
    def fn(turn: Turn) -> str:
        turn.say("Let me check. ")
        answers = turn.ask(
            [
                Question("Which region?", ["Beijing", ("Shanghai", "cn-east")], header="Region"),
                {"question": "Which signals?", "options": ["Logs", "Metrics"], "multiSelect": True},
            ]
        )
        turn.say(f"Region {answers['0']}; ")
        return f"signals {answers['1']}."

    def presenter(ctx):
        threading.Thread(
            target=ctx.respond,
            args=({**SUBMIT, "answers": {"0": "Beijing", "1": "Logs, Metrics"}},),
        ).start()
        return UserInputPresentationResult.PRESENTED

    ch = make_channel(FunctionAgent(fn), presenter=presenter)
    try:
        result = ch.handle_inbound(inbound("deploy")).result()
        assert result.status == "completed"
        assert result.response == "Let me check. Region Beijing; signals Logs, Metrics."
        names = [n for n, _ in ch.records if n != "on_task_lifecycle"]
        assert names == [
            "on_response_chunk",
            "on_output_segment_end",
            "on_response_boundary",
            "present_user_input_request",
            "on_response_chunk",
            "on_response_chunk",
            "on_response_complete",
            "send_message",
            "on_output_segment_end",  # the delivered segment ends after delivery
        ]
        seg1 = ch.chunks[0][3]
        seg2 = ch.chunks[1][3]
        assert seg1 is not None and seg2 is not None and seg1.segment_id != seg2.segment_id
        assert ch.segment_ends[0][2:] == (seg1, SegmentEndReason.RESPONSE_BOUNDARY)
        assert ch.segment_ends[1][2:] == (seg2, SegmentEndReason.COMPLETED)
        ctx = ch.presentations[0]
        assert [q.header for q in ctx.questions] == ["Region", "Question 2"]
        assert ctx.questions[1].multi_select is True
        assert ctx.questions[0].options[1] == ("Shanghai", "cn-east")
        assert ctx.run_id == seg1.run_id == seg2.run_id
        assert ch.events[-1].type is LifecycleType.COMPLETED
    finally:
        ch.close()


def test_ask_emits_canonical_question_after_a_boundary():
    agent = FunctionAgent(lambda turn: str(turn.ask([Question("Q?", ["a", "b"])])))
    sink = Sink()
    t, out = run_in_thread(agent, sink)
    request = sink.wait_request()
    assert [n for n, _ in sink.events] == ["boundary", "request"]
    meta = request.tool_call["_meta"]
    assert meta["qwenInteractionKind"] == "user_question"
    assert meta["toolName"] == "ask_user_question"
    assert meta["qwenQuestions"][0]["options"] == [
        {"label": "a", "description": ""},
        {"label": "b", "description": ""},
    ]
    assert [(o.option_id, o.name, o.kind) for o in request.options] == [
        ("proceed_once", "Submit", "allow_once"),
        ("cancel", "Cancel", "reject_once"),
    ]
    assert agent.respond_to_permission(request.request_id, {**SUBMIT, "answers": {"0": "a"}})
    assert agent.respond_to_permission(request.request_id, SUBMIT) is False  # one-shot
    t.join(5)
    assert out["result"] == "{'0': 'a'}"
    assert ("resolved", PermissionResolved(request.request_id, SUBMIT["outcome"])) in sink.events


def test_ask_raises_cancelled_on_user_cancel_and_on_turn_cancel():
    seen: list[str] = []

    def fn(turn: Turn) -> str:
        try:
            turn.ask([Question("Q?", ["a", "b"])])
        except QuestionCancelled:
            seen.append("user-cancel")
        turn.ask([Question("Again?", ["a", "b"])])
        return "unreachable"

    agent = FunctionAgent(fn)
    sink = Sink()
    t, out = run_in_thread(agent, sink)
    first = sink.wait_request()
    assert agent.respond_to_permission(
        first.request_id, {"outcome": {"outcome": "selected", "optionId": "cancel"}}
    )
    with sink.cond:
        assert sink.cond.wait_for(lambda: sum(1 for n, _ in sink.events if n == "request") == 2, 5)
    assert agent.cancel_session("s1") is True
    t.join(5)
    assert seen == ["user-cancel"]
    assert isinstance(out["error"], QuestionCancelled)
    assert agent.cancel_session("s1") is False  # no turn any more


def test_ask_expires_on_the_scheduler_clock():
    clock = FakeClock()
    pool = WorkerPool(2)
    scheduler = Scheduler(pool, clock=clock)
    agent = FunctionAgent(
        lambda turn: str(turn.ask([Question("Q?", ["a", "b"])])),
        question_timeout=60,
        scheduler=scheduler,
    )
    sink = Sink()
    t, out = run_in_thread(agent, sink)
    request = sink.wait_request()
    clock.advance(59)
    assert pool.wait_idle(5)
    assert t.is_alive()
    clock.advance(1)
    t.join(5)
    assert isinstance(out["error"], QuestionExpired)
    assert out["error"].request_id == request.request_id  # type: ignore[attr-defined]
    assert sink.events[-1] == (
        "resolved",
        PermissionResolved(request.request_id, {"outcome": "cancelled"}),
    )
    scheduler.stop()
    pool.shutdown()


def test_request_permission_decisions():
    decisions = []

    def fn(turn: Turn) -> str:
        decisions.append(turn.request_permission("rm -rf build", raw_input={"command": "rm"}))
        decisions.append(turn.request_permission("again"))
        return ""

    agent = FunctionAgent(fn)
    sink = Sink()
    t, out = run_in_thread(agent, sink)
    first = sink.wait_request()
    assert first.tool_call["title"] == "rm -rf build"
    assert "_meta" not in first.tool_call
    agent.respond_to_permission(
        first.request_id, {"outcome": {"outcome": "selected", "optionId": "proceed_always"}}
    )
    with sink.cond:
        sink.cond.wait_for(lambda: sum(1 for n, _ in sink.events if n == "request") == 2, 5)
    second = [v for n, v in sink.events if n == "request"][1]
    agent.respond_to_permission(second.request_id, {"outcome": {"outcome": "cancelled"}})  # type: ignore[attr-defined]
    t.join(5)
    assert decisions[0].option_id == "proceed_always" and decisions[0].allowed
    assert decisions[1].cancelled and not decisions[1].allowed
    assert out["result"] == ""


def test_prompt_returns_everything_said_and_cancel_flag():
    flags = []

    def fn(turn: Turn) -> str:
        turn.say("a")
        turn.tool_call("ls", kind="execute")
        turn.boundary()
        turn.say("b")
        flags.append(turn.cancelled)
        return "c"

    agent = FunctionAgent(fn)
    sink = Sink()
    assert agent.prompt("s1", "x", sink) == "abc"
    assert flags == [False]
    assert [n for n, _ in sink.events] == ["chunk", "tool", "boundary", "chunk", "chunk"]


def test_cancelled_turn_stops_saying_and_asking():
    started = threading.Event()
    proceed = threading.Event()

    def fn(turn: Turn) -> str:
        started.set()
        proceed.wait(5)
        assert turn.cancelled
        turn.say("ignored")
        with pytest.raises(QuestionCancelled):
            turn.ask([Question("Q?", ["a", "b"])])
        return "also ignored"

    agent = FunctionAgent(fn)
    sink = Sink()
    t, out = run_in_thread(agent, sink)
    assert started.wait(5)
    assert agent.cancel_session("s1")
    proceed.set()
    t.join(5)
    assert out["result"] == ""
    assert sink.events == []


def test_channel_cancel_unblocks_a_waiting_question():
    ch = make_channel(
        FunctionAgent(lambda turn: str(turn.ask([Question("Q?", ["a", "b"])]))),
        presenter=lambda ctx: UserInputPresentationResult.PRESENTED,
    )
    try:
        handle = ch.handle_inbound(inbound("go"))
        ctx = ch.wait_for_presentation()
        reasons = []
        ctx.on_settled(reasons.append)
        assert ch.cancel_run(ctx.session_id, ctx.run_id)
        assert handle.result().status == "cancelled"
        assert [str(r) for r in reasons] == ["run_cancelled"]
    finally:
        ch.close()


def test_validation():
    with pytest.raises(TypeError):
        FunctionAgent("not callable")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="question_timeout"):
        FunctionAgent(lambda t: "", question_timeout=0)


@pytest.mark.parametrize(
    ("questions", "field"),
    [
        ([], "questions"),
        ([Question(f"q{i}?", ["a", "b"]) for i in range(5)], "questions"),
        ([Question("Which?", ["only"])], "questions[0].options"),
        ([Question("Which?", ["a", "b", "c", "d", "e"])], "questions[0].options"),
        ([Question("ok?", ["a", "b"]), Question(" ", ["a", "b"])], "questions[1].question"),
        ([Question("Which?", ["a", ""])], "questions[0].options[1]"),
    ],
)
def test_ask_validates_questions_before_asking(questions, field):
    # A malformed form used to go out anyway: the channel rendered it as a plain
    # permission prompt and /approve returned {} to the agent.
    sink = Sink()
    errors: list[BaseException] = []

    def fn(turn: Turn) -> str:
        try:
            turn.ask(questions)
        except ValueError as exc:
            errors.append(exc)
        return ""

    # (a short timeout only so the unvalidated request cannot hang the test)
    FunctionAgent(fn, question_timeout=0.05).prompt("s1", "hi", sink)
    assert len(errors) == 1 and field in str(errors[0])
    assert [n for n, _ in sink.events if n in ("request", "boundary")] == []


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), 0, -1])
def test_timeouts_must_be_finite_and_positive(bad):
    with pytest.raises(ValueError, match="question_timeout"):
        FunctionAgent(lambda t: "", question_timeout=bad)
    sink = Sink()
    errors: list[BaseException] = []

    def fn(turn: Turn) -> str:
        try:
            turn.ask([Question("Which?", ["a", "b"])], timeout=bad)
        except ValueError as exc:
            errors.append(exc)
        return ""

    FunctionAgent(fn).prompt("s1", "hi", sink)
    assert len(errors) == 1 and "timeout" in str(errors[0])


def test_ask_on_a_stopped_scheduler_leaves_no_waiter_behind():
    pool = WorkerPool(2)
    scheduler = Scheduler(pool, clock=FakeClock())
    scheduler.stop()
    errors: list[BaseException] = []

    def fn(turn: Turn) -> str:
        try:
            turn.ask([Question("Which?", ["a", "b"])])
        except Exception as exc:
            errors.append(exc)
        return ""

    agent = FunctionAgent(fn, scheduler=scheduler)
    agent.prompt("s1", "hi", Sink())
    assert len(errors) == 1
    assert agent._waiters == {}  # registered waiters are always unregistered
    pool.shutdown(timeout=5)

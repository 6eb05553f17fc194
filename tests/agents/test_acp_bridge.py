"""AcpBridge against our own fake ACP agent (tests/agents/acp_fake_agent.py)."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from acp_testkit import WAIT, RecordingSink, process_is_reaped
from channelkit.agents.acp import (
    AcpBridge,
    AcpRequestError,
    AcpTimeoutError,
    AgentProcessError,
)
from channelkit.agents.base import AgentBridge, PermissionRequest, ToolCallEvent
from channelkit.errors import ConfigurationError
from channelkit.testing import wait_until

SUBMIT = {"outcome": "selected", "optionId": "proceed_once"}
ANSWERS = {"0": "Blue", "1": "Tests, Docs"}


class PromptThread(threading.Thread):
    """Runs ``bridge.prompt`` on its own thread and keeps the result or the error."""

    def __init__(self, bridge: AcpBridge, session_id: str, text: str, sink: RecordingSink):
        super().__init__(daemon=True)
        self.args_ = (bridge, session_id, text, sink)
        self.result: str | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        bridge, session_id, text, sink = self.args_
        try:
            self.result = bridge.prompt(session_id, text, sink)
        except BaseException as exc:
            self.error = exc

    def finish(self) -> None:
        self.join(WAIT)
        assert not self.is_alive(), "prompt did not return"


def received(log: Path) -> list[dict[str, Any]]:
    """Every message the fake agent read from its stdin."""
    messages: list[dict[str, Any]] = []
    if not log.exists():
        return messages
    for line in log.read_text().splitlines():
        try:
            messages.append(json.loads(line))
        except ValueError:
            pass  # empty, or a line the agent is still writing
    return messages


def by_method(log: Path, method: str) -> list[dict[str, Any]]:
    return [m for m in received(log) if m.get("method") == method]


def acp_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("channelkit-acp-")]


class FakeScheduler:
    """Records call_later timers; the test fires them by hand."""

    class Handle:
        def __init__(self, fn: Callable[[], None]) -> None:
            self.fn = fn
            self.cancelled = False

        def cancel(self) -> None:
            self.cancelled = True

    def __init__(self) -> None:
        self.timers: list[tuple[float, FakeScheduler.Handle]] = []

    def call_later(self, delay: float, fn: Callable[[], None]) -> FakeScheduler.Handle:
        handle = FakeScheduler.Handle(fn)
        self.timers.append((delay, handle))
        return handle


# ----------------------------------------------------------------------------- basics
def test_implements_agent_bridge_protocol(make_fake_bridge: Any) -> None:
    assert isinstance(make_fake_bridge(), AgentBridge)


def test_streaming_returns_concatenated_text_and_maps_updates(
    make_fake_bridge: Any, recording_sink: RecordingSink, fake_agent_log: Path, tmp_path: Path
) -> None:
    bridge = make_fake_bridge()
    text = bridge.prompt("chat-1", "stream Hello |world|!", recording_sink)

    assert text == "Hello world!"
    assert recording_sink.of("text_chunk") == [
        ("chat-1", "Hello "),
        ("chat-1", "world"),
        ("chat-1", "!"),
    ]
    # tool_call then tool_call_update; the update keeps what the first event said.
    assert recording_sink.of("tool_call") == [
        ToolCallEvent("chat-1", "t1", "read", "Read file", "pending", {"path": "a.txt"}),
        ToolCallEvent("chat-1", "t1", "read", "Read file", "completed", {"path": "a.txt"}),
    ]
    # plan / thought updates are ignored; nothing else was emitted.
    assert recording_sink.kinds() == ["text_chunk"] * 3 + ["tool_call"] * 2

    init = by_method(fake_agent_log, "initialize")[0]["params"]
    assert init["protocolVersion"] == 1
    assert init["clientCapabilities"] == {
        "fs": {"readTextFile": False, "writeTextFile": False},
        "terminal": False,
    }
    new = by_method(fake_agent_log, "session/new")[0]["params"]
    assert new == {"cwd": str(tmp_path), "mcpServers": []}
    prompt = by_method(fake_agent_log, "session/prompt")[0]["params"]
    assert prompt == {
        "sessionId": "fake-session-1",
        "prompt": [{"type": "text", "text": "stream Hello |world|!"}],
    }
    assert bridge.agent_info["agentInfo"]["name"] == "fake-acp"


def test_sessions_are_created_lazily_once_per_channel_session(
    make_fake_bridge: Any, recording_sink: RecordingSink, fake_agent_log: Path
) -> None:
    bridge = make_fake_bridge()
    assert bridge.prompt("a", "echo one", recording_sink) == "one"
    assert bridge.prompt("a", "echo two", recording_sink) == "two"
    assert bridge.prompt("b", "echo three", recording_sink) == "three"
    assert len(by_method(fake_agent_log, "initialize")) == 1
    assert len(by_method(fake_agent_log, "session/new")) == 2
    sessions = [m["params"]["sessionId"] for m in by_method(fake_agent_log, "session/prompt")]
    assert sessions == ["fake-session-1", "fake-session-1", "fake-session-2"]


def test_session_map_is_bounded(
    make_fake_bridge: Any, recording_sink: RecordingSink, fake_agent_log: Path
) -> None:
    bridge = make_fake_bridge(max_sessions=2)
    for session in ("a", "b", "c", "a"):
        bridge.prompt(session, "echo x", recording_sink)
    # "a" was evicted when "c" arrived, so it got a new ACP session.
    assert len(by_method(fake_agent_log, "session/new")) == 4


# ------------------------------------------------------------------------ permissions
def test_permission_round_trip_with_answers(
    make_fake_bridge: Any, recording_sink: RecordingSink, fake_agent_log: Path
) -> None:
    bridge = make_fake_bridge()
    turn = PromptThread(bridge, "chat-1", "ask", recording_sink)
    turn.start()
    request: PermissionRequest = recording_sink.wait_for("permission_request")

    kinds = recording_sink.kinds()
    assert kinds == ["text_chunk", "response_boundary", "permission_request"]
    assert recording_sink.of("response_boundary") == ["chat-1"]
    assert request.session_id == "chat-1"
    assert request.request_id.startswith("acp-")
    meta = request.tool_call["_meta"]
    assert meta["qwenInteractionKind"] == "user_question"
    assert meta["toolName"] == "ask_user_question"
    assert [q["header"] for q in meta["qwenQuestions"]] == ["Color", "Extras"]
    assert request.tool_call["rawInput"]["questions"][1]["multiSelect"] is True
    assert request.title == "Ask user 2 questions"
    assert [(o.option_id, o.name, o.kind) for o in request.options] == [
        ("proceed_once", "Submit", "allow_once"),
        ("cancel", "Cancel", "reject_once"),
    ]

    assert bridge.respond_to_permission(request.request_id, {"outcome": SUBMIT, "answers": ANSWERS})
    assert not bridge.respond_to_permission(request.request_id, {"outcome": SUBMIT})
    turn.finish()
    assert turn.error is None
    expected = f"outcome=selected answers={json.dumps(ANSWERS, sort_keys=True)}"
    assert turn.result == "Before question." + expected
    assert recording_sink.of("permission_resolved") == []

    replies = [m for m in received(fake_agent_log) if "result" in m and "outcome" in m["result"]]
    assert replies == [
        {"jsonrpc": "2.0", "id": 101, "result": {"outcome": SUBMIT, "answers": ANSWERS}}
    ]


def test_permission_answered_synchronously_from_the_sink(make_fake_bridge: Any) -> None:
    bridge = make_fake_bridge()

    def answer(request: PermissionRequest) -> None:
        assert bridge.respond_to_permission(
            request.request_id, {"outcome": SUBMIT, "answers": {"0": "Green"}}
        )

    sink = RecordingSink(on_permission=answer)
    assert bridge.prompt("s", "ask", sink).endswith('answers={"0": "Green"}')


def test_concurrent_sessions_keep_their_own_permissions(make_fake_bridge: Any) -> None:
    bridge = make_fake_bridge()
    sinks = {name: RecordingSink() for name in ("left", "right")}
    turns = {name: PromptThread(bridge, name, "ask", sinks[name]) for name in sinks}
    for turn in turns.values():
        turn.start()
    requests = {name: sinks[name].wait_for("permission_request") for name in sinks}
    assert requests["left"].request_id != requests["right"].request_id
    # answer in the reverse order
    assert bridge.respond_to_permission(
        requests["right"].request_id, {"outcome": SUBMIT, "answers": {"0": "R"}}
    )
    assert bridge.respond_to_permission(
        requests["left"].request_id, {"outcome": SUBMIT, "answers": {"0": "L"}}
    )
    for turn in turns.values():
        turn.finish()
    assert turns["left"].result is not None and turns["left"].result.endswith('{"0": "L"}')
    assert turns["right"].result is not None and turns["right"].result.endswith('{"0": "R"}')
    assert [c for _, c in sinks["left"].of("text_chunk")][-1].endswith('{"0": "L"}')


def test_invalid_permission_response_names_the_field(make_fake_bridge: Any) -> None:
    bridge = make_fake_bridge()
    sink = RecordingSink()
    turn = PromptThread(bridge, "s", "ask", sink)
    turn.start()
    request = sink.wait_for("permission_request")
    with pytest.raises(ConfigurationError, match=r"response\.outcome\.optionId"):
        bridge.respond_to_permission(request.request_id, {"outcome": {"outcome": "selected"}})
    with pytest.raises(ConfigurationError, match=r"response\.outcome\.outcome"):
        bridge.respond_to_permission(request.request_id, {"outcome": {"outcome": "maybe"}})
    with pytest.raises(ConfigurationError, match=r"response\.answers"):
        bridge.respond_to_permission(request.request_id, {"outcome": SUBMIT, "answers": ["x"]})
    # still pending after the bad attempts
    assert bridge.respond_to_permission(request.request_id, {"outcome": {"outcome": "cancelled"}})
    turn.finish()
    assert turn.result == "Before question.outcome=cancelled answers=null"


def test_permission_timeout_runs_on_an_injected_scheduler(
    make_fake_bridge: Any, recording_sink: RecordingSink
) -> None:
    scheduler = FakeScheduler()
    bridge = make_fake_bridge(permission_timeout=42.0, scheduler=scheduler)
    turn = PromptThread(bridge, "s", "ask", recording_sink)
    turn.start()
    request = recording_sink.wait_for("permission_request")
    assert [delay for delay, _ in scheduler.timers] == [42.0]
    scheduler.timers[0][1].fn()  # the timer fires
    assert recording_sink.wait_for("permission_resolved").request_id == request.request_id
    turn.finish()
    assert turn.result is not None and "outcome=cancelled" in turn.result

    # an answered request cancels its timer
    turn = PromptThread(bridge, "s", "ask", recording_sink)
    turn.start()
    second = recording_sink.wait_for("permission_request", count=2)
    assert bridge.respond_to_permission(second.request_id, {"outcome": SUBMIT})
    assert scheduler.timers[1][1].cancelled
    scheduler.timers[1][1].fn()  # a late fire is a no-op
    turn.finish()
    assert turn.result is not None and "outcome=selected" in turn.result
    assert len(recording_sink.of("permission_resolved")) == 1


def test_permission_timeout_with_the_runtime_scheduler_and_fake_clock(
    make_fake_bridge: Any, recording_sink: RecordingSink
) -> None:
    from channelkit.runtime import FakeClock, Scheduler, WorkerPool

    clock = FakeClock()
    pool = WorkerPool(2)
    scheduler = Scheduler(pool, clock=clock)
    try:
        bridge = make_fake_bridge(permission_timeout=300.0, scheduler=scheduler)
        turn = PromptThread(bridge, "s", "ask", recording_sink)
        turn.start()
        request = recording_sink.wait_for("permission_request")
        clock.advance(299.0)
        assert pool.wait_idle(WAIT)
        assert recording_sink.of("permission_resolved") == []
        clock.advance(1.0)
        assert pool.wait_idle(WAIT)
        resolved = recording_sink.wait_for("permission_resolved")
        assert (resolved.request_id, resolved.outcome) == (
            request.request_id,
            {"outcome": "cancelled"},
        )
        turn.finish()
        assert turn.result == "Before question.outcome=cancelled answers=null"
        # an answer after the expiry is refused
        assert not bridge.respond_to_permission(request.request_id, {"outcome": SUBMIT})
    finally:
        scheduler.stop()
        pool.shutdown(wait=True)


# ----------------------------------------------------------------------------- cancel
def test_cancel_session_ends_a_hanging_turn(
    make_fake_bridge: Any, recording_sink: RecordingSink, fake_agent_log: Path
) -> None:
    bridge = make_fake_bridge()
    assert not bridge.cancel_session("s")  # unknown session: nothing to cancel
    bridge.prompt("s", "echo warm", recording_sink)
    turn = PromptThread(bridge, "s", "hang", recording_sink)
    turn.start()
    recording_sink.wait_for("text_chunk", count=2)  # the agent is in the turn
    assert bridge.cancel_session("s")
    turn.finish()
    assert turn.error is None
    assert turn.result == "waiting"
    # one notification for the session; said twice only when the cancel overtook the
    # end of the prompt's write (this thread ran before the prompt thread marked it
    # written, which a loaded machine allows), and a repeated cancel is harmless
    cancel = {
        "jsonrpc": "2.0",
        "method": "session/cancel",
        "params": {"sessionId": "fake-session-1"},
    }
    assert by_method(fake_agent_log, "session/cancel") in ([cancel], [cancel, cancel])


def test_cancel_before_the_turn_reaches_the_agent(
    make_fake_bridge: Any,
    recording_sink: RecordingSink,
    fake_agent_log: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gate = tmp_path / "gate"
    monkeypatch.setenv("FAKE_ACP_INIT_GATE", str(gate))
    bridge = make_fake_bridge()
    turn = PromptThread(bridge, "s", "echo never", recording_sink)
    turn.start()
    wait_until(lambda: len(by_method(fake_agent_log, "initialize")) == 1, WAIT)
    assert bridge.cancel_session("s")  # the run is starting: honoured without a wire call
    gate.touch()
    turn.finish()
    assert turn.error is None
    assert turn.result == ""
    assert by_method(fake_agent_log, "session/prompt") == []
    assert recording_sink.events == []


def test_cancel_settles_pending_permission_cancelled(
    make_fake_bridge: Any, recording_sink: RecordingSink
) -> None:
    bridge = make_fake_bridge()
    turn = PromptThread(bridge, "s", "ask", recording_sink)
    turn.start()
    request = recording_sink.wait_for("permission_request")
    assert bridge.cancel_session("s")
    resolved = recording_sink.wait_for("permission_resolved")
    assert (resolved.request_id, resolved.outcome) == (request.request_id, {"outcome": "cancelled"})
    turn.finish()
    assert turn.result == "Before question.outcome=cancelled answers=null"
    assert not bridge.respond_to_permission(request.request_id, {"outcome": SUBMIT})


# ---------------------------------------------------------------------- process death
def test_process_death_fails_the_prompt_and_reports_session_died(
    make_fake_bridge: Any, recording_sink: RecordingSink
) -> None:
    bridge = make_fake_bridge()
    bridge.prompt("s", "echo hi", recording_sink)
    pid = bridge.pid
    assert pid is not None
    with pytest.raises(AgentProcessError, match="exited with code 3") as info:
        bridge.prompt("s", "die", recording_sink)
    assert info.value.returncode == 3
    died = recording_sink.wait_for("session_died")
    assert died.session_id == "s"
    assert "code 3" in died.reason
    wait_until(lambda: process_is_reaped(pid), WAIT)

    # the next prompt starts a fresh process and session; this agent cannot load its old
    # session, so the person is told the conversation starts over
    from channelkit.agents.acp.bridge import CONTEXT_LOST_NOTICE

    assert bridge.prompt("s", "echo again", recording_sink) == CONTEXT_LOST_NOTICE + "again"
    assert bridge.pid not in (None, pid)


def test_process_death_settles_pending_permission_cancelled(
    make_fake_bridge: Any, recording_sink: RecordingSink
) -> None:
    bridge = make_fake_bridge()
    turn = PromptThread(bridge, "s", "ask-die", recording_sink)
    turn.start()
    request = recording_sink.wait_for("permission_request")
    resolved = recording_sink.wait_for("permission_resolved")
    assert resolved.request_id == request.request_id
    assert resolved.outcome == {"outcome": "cancelled"}
    recording_sink.wait_for("session_died")
    turn.finish()
    assert isinstance(turn.error, AgentProcessError)
    assert "code 4" in str(turn.error)
    assert not bridge.respond_to_permission(request.request_id, {"outcome": SUBMIT})
    kinds = recording_sink.kinds()
    assert kinds.index("permission_resolved") < kinds.index("session_died")


def test_agent_that_exits_at_start(make_fake_bridge: Any, recording_sink: RecordingSink) -> None:
    bridge = make_fake_bridge(mode="exit-on-start")
    with pytest.raises(AgentProcessError, match="exited with code 5"):
        bridge.prompt("s", "echo x", recording_sink)
    assert recording_sink.events == []


def test_missing_command_is_a_clear_error(tmp_path: Path, recording_sink: RecordingSink) -> None:
    bridge = AcpBridge([str(tmp_path / "no-such-agent")], cwd=tmp_path)
    with pytest.raises(AgentProcessError, match="cannot start agent"):
        bridge.prompt("s", "hi", recording_sink)
    bridge.close()


# ----------------------------------------------------------------- protocol robustness
def test_malformed_lines_are_skipped(
    make_fake_bridge: Any, recording_sink: RecordingSink, fake_agent_log: Path
) -> None:
    bridge = make_fake_bridge()
    assert bridge.prompt("s", "malformed", recording_sink) == "survived"
    assert recording_sink.kinds() == ["text_chunk"]
    # the broken permission request (params: 1) was answered with an error, not silence
    wait_until(lambda: any(m.get("id") == 55 for m in received(fake_agent_log)), WAIT)
    errors = [m for m in received(fake_agent_log) if m.get("id") == 55]
    assert errors[0]["error"]["code"] == -32602
    assert bridge.prompt("s", "echo still fine", recording_sink) == "still fine"


def test_unimplemented_client_methods_get_method_not_found(
    make_fake_bridge: Any, recording_sink: RecordingSink
) -> None:
    bridge = make_fake_bridge()
    assert bridge.prompt("s", "fs", recording_sink) == "fs-error=-32601"


def test_sink_errors_do_not_break_the_reader(make_fake_bridge: Any) -> None:
    class Exploding(RecordingSink):
        def text_chunk(self, session_id: str, chunk: str) -> None:
            super().text_chunk(session_id, chunk)
            raise RuntimeError("sink bug")

    sink = Exploding()
    bridge = make_fake_bridge()
    assert bridge.prompt("s", "stream a|b", sink) == "ab"
    assert len(sink.of("tool_call")) == 2


# --------------------------------------------------------------------------- timeouts
def test_request_timeout_when_agent_never_initializes(
    make_fake_bridge: Any, recording_sink: RecordingSink
) -> None:
    bridge = make_fake_bridge(mode="no-init-reply", request_timeout=0.3, close_timeout=2.0)
    with pytest.raises(AcpTimeoutError, match="initialize") as info:
        bridge.prompt("s", "echo x", recording_sink)
    assert info.value.timeout == 0.3
    assert bridge.pid is None  # the half-started process was stopped and reaped


def test_agent_error_reply_raises_request_error(
    make_fake_bridge: Any, recording_sink: RecordingSink
) -> None:
    bridge = make_fake_bridge(mode="init-error")
    with pytest.raises(AcpRequestError, match="initialize: agent error -32000: nope") as info:
        bridge.prompt("s", "echo x", recording_sink)
    assert info.value.code == -32000


def test_prompt_timeout_cancels_the_turn(
    make_fake_bridge: Any, recording_sink: RecordingSink, fake_agent_log: Path
) -> None:
    bridge = make_fake_bridge(prompt_timeout=0.3)
    with pytest.raises(AcpTimeoutError, match="session/prompt"):
        bridge.prompt("s", "hang-forever", recording_sink)
    wait_until(lambda: len(by_method(fake_agent_log, "session/cancel")) == 1, WAIT)


# ------------------------------------------------------------------------------ close
def test_close_reaps_the_process_and_joins_threads(
    make_fake_bridge: Any, recording_sink: RecordingSink
) -> None:
    bridge = make_fake_bridge()
    bridge.start()
    pid = bridge.pid
    assert pid is not None
    bridge.close()
    assert process_is_reaped(pid)
    assert acp_threads() == []
    bridge.close()  # idempotent
    with pytest.raises(AgentProcessError, match="closed"):
        bridge.prompt("s", "echo x", recording_sink)
    assert not bridge.cancel_session("s")


def test_close_during_a_turn_settles_permission_and_fails_prompt(
    make_fake_bridge: Any, recording_sink: RecordingSink, fake_agent_log: Path
) -> None:
    bridge = make_fake_bridge()
    turn = PromptThread(bridge, "s", "ask", recording_sink)
    turn.start()
    request = recording_sink.wait_for("permission_request")
    pid = bridge.pid
    assert pid is not None
    bridge.close()
    turn.finish()
    resolved = recording_sink.of("permission_resolved")
    assert [(r.request_id, r.outcome) for r in resolved] == [
        (request.request_id, {"outcome": "cancelled"})
    ]
    assert recording_sink.of("session_died") == []  # closing is not a death
    # the agent either finished the turn after the cancelled answer or was stopped
    assert turn.error is None or isinstance(turn.error, AgentProcessError)
    assert process_is_reaped(pid)
    assert acp_threads() == []


def test_close_kills_an_agent_that_ignores_stdin_eof(
    tmp_path: Path, recording_sink: RecordingSink
) -> None:
    script = tmp_path / "stubborn.py"
    script.write_text(
        "import json, signal, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "line = sys.stdin.readline()\n"
        "msg = json.loads(line)\n"
        "print(json.dumps({'jsonrpc': '2.0', 'id': msg['id'],"
        " 'result': {'protocolVersion': 1}}), flush=True)\n"
        "while True:\n"
        "    time.sleep(0.05)\n"
    )
    bridge = AcpBridge([sys.executable, str(script)], cwd=tmp_path, close_timeout=0.3)
    bridge.start()
    pid = bridge.pid
    assert pid is not None
    bridge.close()
    assert process_is_reaped(pid)
    assert acp_threads() == []


def test_close_during_a_hanging_prompt_raises_in_the_prompt(
    make_fake_bridge: Any, recording_sink: RecordingSink
) -> None:
    bridge = make_fake_bridge()
    bridge.prompt("s", "echo warm", recording_sink)
    turn = PromptThread(bridge, "s", "hang-forever", recording_sink)
    turn.start()
    wait_until(lambda: bridge.pid is not None, WAIT)
    bridge.close()
    turn.finish()
    assert isinstance(turn.error, AgentProcessError)
    assert "closed" in str(turn.error)
    assert recording_sink.of("session_died") == []


def test_stderr_is_drained_and_bounded(
    make_fake_bridge: Any, recording_sink: RecordingSink
) -> None:
    bridge = make_fake_bridge()
    assert bridge.prompt("s", "stderr", recording_sink) == "done"
    bridge.close()  # joins the stderr thread after it read everything
    tail = bridge.stderr_tail()
    assert 0 < len(tail) <= 50
    assert tail[-1].startswith("noise line 3999")


def test_configuration_errors_name_the_field(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="command"):
        AcpBridge([])
    with pytest.raises(ConfigurationError, match="command"):
        AcpBridge("qwen --acp")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="permission_timeout"):
        AcpBridge(["x"], permission_timeout=0)
    with pytest.raises(ConfigurationError, match="max_sessions"):
        AcpBridge(["x"], max_sessions=0)

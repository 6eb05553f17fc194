"""channelkit.testing: the scripted bridge's gate step leaves nothing running behind it."""

from __future__ import annotations

import threading

from channelkit.testing import ScriptedBridge, final, gate

from tests.agents.acp_testkit import RecordingSink


def _new_threads(before: set[threading.Thread]) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t not in before and t.is_alive()]


def _run(bridge: ScriptedBridge, result: list[str]) -> threading.Thread:
    thread = threading.Thread(
        target=lambda: result.append(bridge.prompt("s", "go", RecordingSink()))
    )
    thread.start()
    assert bridge.wait_prompt(1)
    return thread


def test_cancelled_gate_returns_and_its_helper_thread_ends() -> None:
    hold = threading.Event()  # never set: only the cancel can open the gate
    bridge = ScriptedBridge([gate(hold, timeout=30.0), final("done")])
    result: list[str] = []
    before = set(threading.enumerate())
    thread = _run(bridge, result)
    assert bridge.cancel_session("s")
    thread.join(5)
    assert not thread.is_alive() and result == ["done"]
    # the relay thread is joined by the step itself, long before the 30 s gate timeout
    assert _new_threads(before) == []


def test_opened_gate_returns_promptly() -> None:
    hold = threading.Event()
    bridge = ScriptedBridge([gate(hold, timeout=30.0), final("done")])
    result: list[str] = []
    before = set(threading.enumerate())
    thread = _run(bridge, result)
    hold.set()
    thread.join(5)
    assert not thread.is_alive() and result == ["done"]
    assert _new_threads(before) == []

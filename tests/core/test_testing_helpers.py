"""channelkit.testing: the scripted bridge's gate step leaves nothing running behind it;
`wait_until` returns the first truthy value and, when it gives up, says what it waited for
and what the state was then."""

from __future__ import annotations

import threading

import pytest
from channelkit.testing import ScriptedBridge, final, gate, wait_until

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


def test_wait_until_returns_the_first_truthy_value_and_ticks_between_polls() -> None:
    polls: list[int] = []
    ticks: list[int] = []

    def third() -> int | None:
        polls.append(1)
        return len(polls) if len(polls) == 3 else None

    assert wait_until(third, 5.0, interval=0.0, tick=lambda: ticks.append(1)) == 3
    assert len(ticks) == 2  # between the polls, not after the last


def test_wait_until_says_what_it_waited_for_and_the_state_when_it_gave_up() -> None:
    seen: list[str] = []

    def never() -> bool:
        seen.append("poll")
        return False

    with pytest.raises(AssertionError) as raised:
        wait_until(never, 0.05, what="the resume", state=lambda: f"{len(seen)} polls")
    message = str(raised.value)
    assert message.startswith("timed out after 0.05s waiting for the resume; ")
    # read when the wait ran out, not when it began
    assert message.endswith(f"{len(seen)} polls") and len(seen) > 1

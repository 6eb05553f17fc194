"""Contract: when the agent dies while a question or a tool approval waits on the person,
the prompt may end cancelled, but the chat tells once that the run failed; on every chat
platform through its emulator.

The agent dies the way the ACP bridge reports a dead agent process: the waiting request
resolves cancelled, ``session_died`` reaches the channel, and the prompt raises."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from channelkit.agents import FunctionAgent, Turn
from channelkit.agents.base import AgentEventSink, SessionDied
from channelkit.runtime import FakeClock
from contract_drivers import BOUND_S, DRIVERS, Driver, wait_for
from contract_harness import COLOR, new_token


class DyingAgent(FunctionAgent):
    """A function agent whose process the test can kill while a turn waits on a person."""

    def __init__(self) -> None:
        self.asks: Any = None
        super().__init__(self._turn, question_timeout=3600.0, name="contract")
        self._sinks: dict[str, AgentEventSink] = {}
        self._sinks_lock = threading.Lock()
        self.waiting = threading.Event()

    def prompt(self, session_id: str, text: str, sink: AgentEventSink) -> str:
        with self._sinks_lock:
            self._sinks[session_id] = sink
        return super().prompt(session_id, text, sink)

    def _turn(self, turn: Turn) -> str | None:
        turn.say(f"Let me check first {turn.text}.")
        self.waiting.set()
        self.asks(turn)  # returns (cancelled) once the process died
        raise RuntimeError("agent process exited (code 137)")

    def die(self) -> None:
        """The agent process exits: waiting requests resolve cancelled, the session dies."""
        with self._sinks_lock:
            sinks = dict(self._sinks)
        for session_id, sink in sinks.items():
            sink.session_died(SessionDied(session_id, "agent process exited (code 137)"))
        self.close()  # every waiting ask / request_permission returns cancelled


@pytest.fixture(scope="module", params=sorted(DRIVERS))
def dying(request: pytest.FixtureRequest) -> Iterator[tuple[Driver, DyingAgent]]:
    from channelkit.platforms import PLATFORMS

    spec = PLATFORMS.get(DRIVERS[request.param].platform)  # read now: a plugin may add it
    if spec is None or spec.playground is None:
        pytest.skip(f"{request.param} cannot be emulated yet")
    agent = DyingAgent()
    clock = FakeClock(start=time.monotonic(), wall_start=time.time())
    try:
        with DRIVERS[request.param].start(agent, clock) as driver:
            yield driver, agent
    finally:
        agent.close()


def _asks_a_question(turn: Turn) -> None:
    try:
        turn.ask([COLOR])
    except Exception:  # the question was cancelled when the process died
        return


def _asks_approval(title: str) -> Any:
    def asks(turn: Turn) -> None:
        turn.request_permission(title)

    return asks


@pytest.mark.parametrize("waiting_on", ["question", "approval"])
def test_the_person_is_told_once_that_the_run_failed(
    dying: tuple[Driver, DyingAgent], waiting_on: str
) -> None:
    d, agent = dying
    token = new_token()
    agent.waiting.clear()
    if waiting_on == "question":
        agent.asks = _asks_a_question
    else:
        agent.asks = _asks_approval(f"Run ls {token}")
    try:
        before = d.failures()
        d.send(token)
        assert agent.waiting.wait(BOUND_S)
        wait_for(lambda: d.pg.channel.pending_request_ids(), "the channel to hold the request")
        d.settle()  # the prompt is on the platform
        agent.die()
        wait_for(lambda: d.failures() > before, "the failure told in the chat", tick=d.tick)
        assert d.pg.channel.wait_idle(BOUND_S)
        d.settle()
        assert d.failures() == before + 1, d.chat_texts()
        assert not d.pg.channel.pending_request_ids()
        if waiting_on == "question":
            # the prompt is no longer answerable (it may read cancelled or expired)
            prompt = d.prompt(COLOR.question)
            assert prompt is None or prompt.state != "pending", d.prompts()
    finally:
        d.reset()

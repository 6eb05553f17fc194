"""Busy chat bounds and fallbacks, on a plain channel with a FakeClock:

* ``collect``: a collected turn holds at most `COLLECT_MAX_MESSAGES` messages and
  `COLLECT_MAX_BYTES` bytes, the message beyond starts the next turn (nothing dropped);
  the window is a timer on the channel's clock; a channel closed during the window ends
  the collected handle ``cancelled``;
* ``steer``: a bridge without the capability (as ACP agents) or one that refuses the
  text gets the message queued as a turn of its own;
* ``FunctionAgent`` steering inbox: refused unless ``steerable``, without a running turn,
  after the function returned, beyond `MAX_STEERED`; ``wait_steered`` wakes on cancel.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from channelkit.agents import FunctionAgent, Turn
from channelkit.agents.base import AgentEventSink, PermissionResponse
from channelkit.agents.function import MAX_STEERED
from channelkit.core import InboundMessage
from channelkit.core.busy import COLLECT_MAX_BYTES, COLLECT_MAX_MESSAGES
from channelkit.core.handles import RunHandle
from channelkit.runtime import FakeClock
from channelkit.testing import RecordingChannel

BOUND_S = 10.0


def _say(channel: RecordingChannel, text: str, sender: str = "u1") -> Any:
    return channel.handle_inbound(
        InboundMessage(channel_name=channel.name, chat_id="chat", sender_id=sender, text=text)
    )


class _Recorder:
    """An agent function recording each prompt; ``hold`` keeps the first turn running."""

    def __init__(self, hold: bool = False) -> None:
        self.prompts: list[str] = []
        self.entered = threading.Event()
        self.release = threading.Event()
        self.hold = hold

    def __call__(self, turn: Turn) -> str:
        self.prompts.append(turn.text)
        if self.hold and len(self.prompts) == 1:
            self.entered.set()
            self.release.wait(BOUND_S)
        return f"answer {len(self.prompts)}"


def test_collect_waits_for_the_window_on_the_channel_clock(
    channel_factory: Callable[..., RecordingChannel], clock: FakeClock
) -> None:
    agent = _Recorder()
    channel = channel_factory(FunctionAgent(agent), busy="collect", collect_window=2.0)
    first = _say(channel, "one")
    second = _say(channel, "two")
    assert isinstance(first, RunHandle) and isinstance(second, RunHandle)
    assert first.run_id == second.run_id  # one turn
    clock.advance(1.9)
    assert channel.wait_idle(BOUND_S)
    assert agent.prompts == []
    clock.advance(0.1)
    assert first.result(BOUND_S).status == "completed"
    assert agent.prompts == ["one\n\ntwo"]


def test_collect_starts_the_next_turn_at_the_message_bound(
    channel_factory: Callable[..., RecordingChannel], clock: FakeClock
) -> None:
    agent = _Recorder()
    channel = channel_factory(FunctionAgent(agent), busy="collect")
    texts = [f"m{i}" for i in range(COLLECT_MAX_MESSAGES + 1)]
    handles = [_say(channel, text) for text in texts]
    # the full turn takes no more; the message beyond it opened the next turn
    assert len({handle.run_id for handle in handles}) == 2
    assert handles[-1].run_id != handles[0].run_id
    # the full turn starts at once, without waiting out its window (the clock stands)
    assert handles[0].result(BOUND_S).status == "completed"
    clock.advance(1.5)
    for handle in handles:
        assert handle.result(BOUND_S).status == "completed"
    # ... and always ahead of the turn the message beyond it opened
    assert agent.prompts == ["\n\n".join(texts[:-1]), texts[-1]]


def test_collect_starts_the_next_turn_at_the_byte_bound(
    channel_factory: Callable[..., RecordingChannel], clock: FakeClock
) -> None:
    agent = _Recorder()
    channel = channel_factory(FunctionAgent(agent), busy="collect")
    big = "x" * (COLLECT_MAX_BYTES // 2 + 1)
    handles = [_say(channel, big), _say(channel, big)]
    clock.advance(1.5)
    for handle in handles:
        assert handle.result(BOUND_S).status == "completed"
    assert agent.prompts == [big, big]


def test_a_channel_closed_during_the_window_ends_the_collected_turn_cancelled(
    channel_factory: Callable[..., RecordingChannel],
) -> None:
    agent = _Recorder()
    channel = channel_factory(FunctionAgent(agent), busy="collect")
    handle = _say(channel, "one")
    channel.close(timeout=5)
    assert handle.result(BOUND_S).status == "cancelled"
    assert agent.prompts == []
    assert channel.busy_chat.collecting == 0


class _NoSteer:
    """A bridge without the steer capability (as an ACP agent)."""

    def __init__(self, inner: FunctionAgent) -> None:
        self._inner = inner

    def prompt(self, session_id: str, text: str, sink: AgentEventSink) -> str:
        return self._inner.prompt(session_id, text, sink)

    def cancel_session(self, session_id: str) -> bool:
        return self._inner.cancel_session(session_id)

    def respond_to_permission(self, request_id: str, response: PermissionResponse) -> bool:
        return self._inner.respond_to_permission(request_id, response)

    def close(self) -> None:
        self._inner.close()


def _second_message_is_queued(channel: RecordingChannel, agent: _Recorder) -> None:
    first = _say(channel, "one")
    assert agent.entered.wait(BOUND_S)
    second = _say(channel, "two")
    agent.release.set()
    assert first.result(BOUND_S).status == "completed"
    assert second.result(BOUND_S).status == "completed"
    assert agent.prompts == ["one", "two"]


def test_steer_without_the_capability_queues_the_message(
    channel_factory: Callable[..., RecordingChannel],
) -> None:
    agent = _Recorder(hold=True)
    channel = channel_factory(_NoSteer(FunctionAgent(agent)), busy="steer")
    _second_message_is_queued(channel, agent)


def test_steer_refused_by_the_agent_queues_the_message(
    channel_factory: Callable[..., RecordingChannel],
) -> None:
    agent = _Recorder(hold=True)  # never reads its inbox: not steerable
    channel = channel_factory(FunctionAgent(agent), busy="steer")
    _second_message_is_queued(channel, agent)


def _running_turn(agent_fn: Callable[[Turn], str | None], **kwargs: Any) -> Any:
    """Start one turn of ``agent_fn`` on a thread; returns (agent, thread)."""
    agent = FunctionAgent(agent_fn, **kwargs)

    class Sink:
        def __getattr__(self, name: str) -> Callable[..., None]:
            return lambda *args: None

    thread = threading.Thread(target=agent.prompt, args=("s", "go", Sink()), daemon=True)
    thread.start()
    return agent, thread


def test_the_function_agent_inbox_is_bounded_and_closes_with_the_turn() -> None:
    entered, release = threading.Event(), threading.Event()
    read: list[str] = []

    def fn(turn: Turn) -> str:
        entered.set()
        release.wait(BOUND_S)
        read.extend(turn.steered())
        return "done"

    agent, thread = _running_turn(fn, steerable=True)
    assert entered.wait(BOUND_S)
    assert not agent.steer("other session", "x")
    assert all(agent.steer("s", f"t{i}") for i in range(MAX_STEERED))
    assert not agent.steer("s", "one too many")
    release.set()
    thread.join(BOUND_S)
    assert read == [f"t{i}" for i in range(MAX_STEERED)]
    assert not agent.steer("s", "after the turn")


def test_a_function_agent_that_is_not_steerable_refuses() -> None:
    entered, release = threading.Event(), threading.Event()

    def fn(turn: Turn) -> str:
        entered.set()
        release.wait(BOUND_S)
        return "done"

    agent, thread = _running_turn(fn)
    assert entered.wait(BOUND_S)
    assert not agent.steer("s", "x")
    release.set()
    thread.join(BOUND_S)


def test_wait_steered_returns_a_text_and_wakes_on_cancel() -> None:
    got: list[list[str]] = []
    entered, first_read = threading.Event(), threading.Event()

    def fn(turn: Turn) -> str:
        entered.set()
        got.append(turn.wait_steered(BOUND_S))
        first_read.set()
        got.append(turn.wait_steered(BOUND_S))  # woken by the cancel, not the timeout
        return ""

    agent, thread = _running_turn(fn, steerable=True)
    assert entered.wait(BOUND_S)
    assert agent.steer("s", "more")
    assert first_read.wait(BOUND_S)
    started = time.monotonic()
    assert agent.cancel_session("s")
    thread.join(BOUND_S)
    assert not thread.is_alive()
    assert time.monotonic() - started < BOUND_S / 2  # woken, not timed out
    assert got == [["more"], []]

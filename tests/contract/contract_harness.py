"""The harness of the contract suite: the scripted agent every platform's channel runs,
its deterministic responder gate, and the helpers the rule modules share (the fixtures
are in ``conftest.py``; the platform drivers in :mod:`contract_drivers`)."""

from __future__ import annotations

import queue
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pytest
from channelkit.agents import FunctionAgent, Question, Turn
from channelkit.agents.base import AgentEventSink, PermissionResolved, PermissionResponse
from channelkit.errors import QuestionError
from channelkit.platforms.common.delivery import DeliveryPath, DeliveryTarget
from channelkit.runtime import FakeClock
from contract_drivers import BOUND_S, DRIVERS, Driver, wait_for

LIFETIME_S = 270.0  # the question lifetime every channel uses by default
COLOR = Question("Pick a color?", ["Red", "Blue"], header="Color")
SIZE = Question("Pick a size?", ["Small", "Large"], header="Size")


class Script:
    """The agent of the shared channel: each test sets ``fn``; outcomes go to a queue."""

    def __init__(self) -> None:
        self.fn: Callable[[Turn], str | None] = lambda turn: "idle"
        self.outcomes: queue.Queue[Any] = queue.Queue()

    def __call__(self, turn: Turn) -> str | None:
        return self.fn(turn)

    def outcome(self) -> Any:
        try:
            return self.outcomes.get(timeout=BOUND_S)
        except queue.Empty:
            raise AssertionError("the agent reported no outcome") from None

    def no_outcome(self, within: float = 0.2) -> bool:
        try:
            got = self.outcomes.get(timeout=within)
        except queue.Empty:
            return True
        self.outcomes.put(got)
        return False


class GatedAgent(FunctionAgent):
    """A FunctionAgent whose next answer (``hold_next``) waits at the responder until the
    test releases it: a deterministic interleaving of answers and the responder."""

    def __init__(self, fn: Callable[[Turn], str | None]) -> None:
        super().__init__(fn, question_timeout=3600.0, name="contract")
        self._lock_gate = threading.Lock()
        self._hold: threading.Event | None = None
        self._hold_after: threading.Event | None = None
        self.entered = threading.Event()
        self.results: queue.Queue[bool] = queue.Queue()

    def hold_next(self) -> threading.Event:
        release = threading.Event()
        with self._lock_gate:
            self._hold = release
        self.entered.clear()
        return release

    def hold_resolution(self) -> threading.Event:
        """The next answer reaches the agent at once, but the report that it was
        resolved (which settles the request in the channel) waits until the test
        releases it: the turn goes on while the answer's settlement is on its way."""
        release = threading.Event()
        with self._lock_gate:
            self._hold_after = release
        self.entered.clear()
        return release

    def prompt(self, session_id: str, text: str, sink: AgentEventSink) -> str:
        return super().prompt(session_id, text, _HeldResolutions(sink, self))

    def held_resolution(self) -> None:
        """Called with each resolution report: waits at a gate set by `hold_resolution`."""
        with self._lock_gate:
            after, self._hold_after = self._hold_after, None
        if after is not None:
            self.entered.set()
            after.wait(BOUND_S)

    def respond_to_permission(self, request_id: str, response: PermissionResponse) -> bool:
        with self._lock_gate:
            hold, self._hold = self._hold, None
        if hold is None:
            return super().respond_to_permission(request_id, response)
        self.entered.set()
        hold.wait(BOUND_S)
        accepted = super().respond_to_permission(request_id, response)
        self.results.put(accepted)
        return accepted


class _HeldResolutions:
    """The run's sink, with each resolution report passed through the agent's gate."""

    def __init__(self, sink: AgentEventSink, agent: GatedAgent) -> None:
        self._sink = sink
        self._agent = agent

    def permission_resolved(self, event: PermissionResolved) -> None:
        self._agent.held_resolution()
        self._sink.permission_resolved(event)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sink, name)


class Context:
    def __init__(self, driver: Driver, script: Script, agent: GatedAgent) -> None:
        self.driver = driver
        self.script = script
        self.agent = agent


@contextmanager
def open_platform(platform: str, **channel_options: Any) -> Iterator[Context]:
    from channelkit.platforms import PLATFORMS

    driver = DRIVERS.get(platform)  # a key may name an ingress mode: its platform's spec
    spec = PLATFORMS.get(driver.platform if driver is not None else platform)
    if spec is None or spec.playground is None:  # read now: a plugin may have registered it
        pytest.skip(f"{platform} has a contract driver but the playground cannot emulate it yet")
    script = Script()
    agent = GatedAgent(script)
    clock = FakeClock(start=time.monotonic(), wall_start=time.time())
    try:
        with DRIVERS[platform].start(agent, clock, **channel_options) as driver:
            yield Context(driver, script, agent)
    finally:
        agent.close()


def known_defect(d: Driver, rule: str, request: pytest.FixtureRequest) -> float:
    """Mark the test a strict xfail where the platform has an open defect breaking
    ``rule``; the bound to wait for the rule's effect (short where it is known not to
    come: the fix still shows within it, and the strict xfail then fails)."""
    reason = d.known_defects.get(rule)
    if reason is None:
        return BOUND_S
    request.node.add_marker(pytest.mark.xfail(strict=True, reason=f"{d.platform}: {reason}"))
    return 2.0


def new_token() -> str:
    return uuid.uuid4().hex[:8]


def hold_until_cancelled(
    script: Script, text: str, said: threading.Event | None = None
) -> Callable[[Turn], str | None]:
    def fn(turn: Turn) -> str | None:
        turn.say(text)
        if said is not None:
            said.set()
        deadline = time.monotonic() + BOUND_S
        while not turn.cancelled and time.monotonic() < deadline:
            time.sleep(0.01)
        script.outcomes.put("cancelled" if turn.cancelled else "not cancelled")
        return None

    return fn


def ask(script: Script, *questions: Question) -> Callable[[Turn], str | None]:
    def fn(turn: Turn) -> str | None:
        try:
            answers: Any = turn.ask(list(questions))
        except QuestionError as exc:
            answers = exc
        script.outcomes.put(answers)
        return None

    return fn


def pending(d: Driver, text: str) -> Any:
    prompt = d.wait_prompt(text)
    assert prompt.native, prompt
    # the channel holds it (the emulator may show it a moment before)
    wait_for(lambda: d.pg.channel.pending_request_ids(), "the channel to hold the question")
    time.sleep(0.05)
    return prompt


#: ``wrap(part, path, first, send)``: the send a final answer's delivery path makes
#: instead of ``send`` (``part`` / ``path``: its indexes; ``first``: the first part's
#: first path)
SendWrapper = Callable[[int, int, bool, Callable[[], object]], Callable[[], object]]


class NextFinalSend:
    """Wraps the delivery paths of the channel's next final answer (the sends its
    delivery chain makes) with ``wrap``; later answers go out unchanged. ``fired`` is
    set once an answer went through it; ``first`` is that answer's first path."""

    def __init__(self, d: Driver, wrap: SendWrapper) -> None:
        self.channel = d.pg.channel
        self.wrap = wrap
        self.fired = threading.Event()
        self.first: DeliveryPath | None = None
        self._deliver = self.channel.delivery.deliver
        self.channel.delivery.deliver = self.deliver

    def deliver(self, parts: Sequence[Sequence[DeliveryPath]], target: DeliveryTarget) -> Any:
        if self.fired.is_set() or not parts or not parts[0]:
            return self._deliver(parts, target)
        self.fired.set()
        self.first = parts[0][0]
        wrapped = [
            tuple(
                DeliveryPath(p.name, self.wrap(i, j, i == j == 0, p.send), p.idempotent)
                for j, p in enumerate(paths)
            )
            for i, paths in enumerate(parts)
        ]
        return self._deliver(wrapped, target)

    def restore(self) -> None:
        self.channel.delivery.deliver = self._deliver


#: runs tried until one's answer goes out as a send of its own (`run_to_a_final_send`)
FINAL_SEND_ATTEMPTS = 8


def answer_with_a_final_send(d: Driver, token: str) -> str:
    """An answer that leaves a final send whether or not its live message was posted:
    where the live message holds at most so many characters (Discord), a longer answer
    always leaves a part to post, and ``token`` comes last, in that part."""
    limit = d.live_message_limit
    return token if limit is None else f"{'more words. ' * (limit // 10)}\n\n{token}"


def run_to_a_final_send(ctx: Context, wrap: SendWrapper) -> tuple[NextFinalSend, str]:
    """Run until an answer goes out as a send of its own, its paths wrapped with
    ``wrap`` (`NextFinalSend`); returns the interceptor and the answer's token (in the
    part the final send carries). The channel is idle when it returns.

    Where a platform shows an answer in the segment's live message, whether a final send
    is left depends on whether that message was posted before the run ended; a run whose
    answer the live message showed (nothing intercepted, the answer shown normally) is
    followed by another, `FINAL_SEND_ATTEMPTS` in all. A platform whose driver declares
    no final send (``final_send``) is skipped."""
    d = ctx.driver
    d.require("final_send")
    for _ in range(FINAL_SEND_ATTEMPTS):
        token = f"answer {new_token()}"
        interceptor = NextFinalSend(d, wrap)
        started = threading.Event()

        def fn(
            turn: Turn,
            answer: str = answer_with_a_final_send(d, token),
            started: threading.Event = started,
        ) -> str:
            started.set()
            return answer

        try:
            ctx.script.fn = fn
            d.send("hello")
            # the run has begun (an ingress request's deferred part may start it after
            # the ACK), so an idle channel below means its final send was made, or none
            assert started.wait(BOUND_S), "the run never started"
            assert d.pg.channel.wait_idle(BOUND_S)
        finally:
            interceptor.restore()
        if interceptor.fired.is_set():
            return interceptor, token
        d.settle()
    pytest.skip(
        f"{d.platform} showed {FINAL_SEND_ATTEMPTS} answers in their live messages: "
        "no final send"
    )

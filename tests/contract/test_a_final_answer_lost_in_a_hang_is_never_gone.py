"""Contract: a final answer whose send hung (the request went out, no reply came) is not
sent again without an idempotency key, but it is never gone: the person's next message
gets a one-line hint, and ``/last`` sends the scope's last answer again (bounded in age:
after ``last_answer_max_age`` there is nothing to send, and ``/last`` says so); on every
chat platform through its emulator.

The hang is injected into the channel's delivery chain: the first attempt of the answer's
first part raises a read timeout (a request that was sent, its outcome unknown)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from channelkit.core.text import MSG_LAST_UNCERTAIN, MSG_NO_LAST_ANSWER
from channelkit.errors import ReadTimeout
from channelkit.platforms.common.delivery import DeliveryPath, DeliveryTarget
from contract_drivers import BOUND_S, DRIVERS, Driver, wait_for
from contract_harness import Context, new_token, open_platform

#: a short age bound for the test that lets an answer grow too old (a FakeClock far
#: ahead would make the emulators' signed callbacks stale)
SHORT_AGE_S = 5.0


@pytest.fixture(params=sorted(DRIVERS))
def short_memory(request: pytest.FixtureRequest) -> Iterator[Context]:
    """A channel of its own that keeps the last answer ``SHORT_AGE_S`` seconds."""
    with open_platform(request.param, last_answer_max_age=SHORT_AGE_S) as context:
        yield context


class HangOnce:
    """Makes the next final answer's first send hang (a read timeout after sending);
    with an idempotency key (Feishu's ``uuid``) the chain may retry it, else not."""

    def __init__(self, d: Driver) -> None:
        self.channel = d.pg.channel
        self.fired = threading.Event()
        self.idempotent = False
        self._deliver = self.channel.delivery.deliver
        self.channel.delivery.deliver = self.deliver

    def deliver(self, parts: Sequence[Sequence[DeliveryPath]], target: DeliveryTarget) -> Any:
        if self.fired.is_set() or not parts or not parts[0]:
            return self._deliver(parts, target)
        self.fired.set()
        first, *rest = parts[0]
        self.idempotent = first.idempotent
        calls = [0]
        real: Callable[[], object] = first.send

        def hangs() -> object:
            calls[0] += 1
            if calls[0] == 1:
                raise ReadTimeout("read timed out (the final send hung)", timeout=True)
            return real()

        hanging = DeliveryPath(first.name, hangs, first.idempotent)
        return self._deliver([(hanging, *rest), *parts[1:]], target)

    def restore(self) -> None:
        self.channel.delivery.deliver = self._deliver


def _count(d: Driver, text: str) -> int:
    return sum(1 for t in d.chat_texts() if text in t)


def _lose_an_answer(ctx: Context, answer: str) -> HangOnce:
    d = ctx.driver
    hang = HangOnce(d)
    started = threading.Event()
    # Where the streamed message ends as the final answer (Discord), whether any final
    # send is made depends on whether that message was posted before the run ended. An
    # answer longer than one message always leaves a part to post (the whole answer when
    # the message never came, the rest when it did), and the first such send hangs.
    limit = d.live_message_limit
    text = answer if limit is None else f"{answer}\n\n{'more words. ' * (limit // 10)}"

    def fn(turn: Any) -> str:
        started.set()
        return text

    try:
        ctx.script.fn = fn
        d.send("hello")
        # the run has begun (an ingress request's deferred part may start it after the
        # ACK), so an idle channel below means its final send was made
        assert started.wait(BOUND_S), "the run never started"
        assert d.pg.channel.wait_idle(BOUND_S)
        d.settle()
    finally:
        hang.restore()
    if not hang.fired.is_set():
        pytest.skip(
            f"{d.platform} shows the final answer in the streamed card or stream itself "
            "(its last update is a projection): no final send to hang"
        )
    if hang.idempotent:
        d.settle()
    return hang


def test_the_next_message_after_a_hung_final_send_carries_a_hint(ctx: Context) -> None:
    d = ctx.driver
    lost = f"answer {new_token()}"
    hang = _lose_an_answer(ctx, lost)
    hints = _count(d, MSG_LAST_UNCERTAIN)
    second = f"second {new_token()}"
    ctx.script.fn = lambda turn: second
    d.send("are you there?")
    wait_for(lambda: _count(d, second), "the second answer", tick=d.tick)
    assert d.pg.channel.wait_idle(BOUND_S)
    d.settle()
    if hang.idempotent:  # retried with the same key: delivered, nothing to hint at
        assert _count(d, lost) >= 1 and _count(d, MSG_LAST_UNCERTAIN) == hints
        return
    assert _count(d, MSG_LAST_UNCERTAIN) == hints + 1, d.chat_texts()
    texts = d.chat_texts()
    hint_at = max(i for i, t in enumerate(texts) if MSG_LAST_UNCERTAIN in t)
    assert hint_at < max(i for i, t in enumerate(texts) if second in t)  # before the answer
    # once: the message after that gets none
    third = f"third {new_token()}"
    ctx.script.fn = lambda turn: third
    d.send("and now?")
    wait_for(lambda: _count(d, third), "the third answer", tick=d.tick)
    assert d.pg.channel.wait_idle(BOUND_S)
    d.settle()
    assert _count(d, MSG_LAST_UNCERTAIN) == hints + 1


def test_last_sends_the_hung_answer_again(ctx: Context) -> None:
    d = ctx.driver
    lost = f"answer {new_token()}"
    _lose_an_answer(ctx, lost)
    shown = _count(d, lost)
    hints = _count(d, MSG_LAST_UNCERTAIN)
    ctx.script.fn = lambda turn: "a new run"  # /last starts none: it sends the kept answer
    d.send("/last")
    wait_for(lambda: _count(d, lost) > shown, "the answer sent again", tick=d.tick)
    assert d.pg.channel.wait_idle(BOUND_S)
    d.settle()
    assert _count(d, lost) == shown + 1
    # the person has it now: no hint on the next message
    after = f"after {new_token()}"
    ctx.script.fn = lambda turn: after
    d.send("thanks")
    wait_for(lambda: _count(d, after), "the next answer", tick=d.tick)
    assert d.pg.channel.wait_idle(BOUND_S)
    d.settle()
    assert _count(d, MSG_LAST_UNCERTAIN) == hints


@pytest.mark.parametrize("why", ["no answer yet", "the answer is too old"])
def test_last_with_nothing_to_send_says_so(short_memory: Context, why: str) -> None:
    own_ctx = short_memory
    d = own_ctx.driver
    if why == "the answer is too old":
        answer = f"answer {new_token()}"
        own_ctx.script.fn = lambda turn: answer
        d.send("hello")
        wait_for(lambda: _count(d, answer), "the answer", tick=d.tick)
        assert d.pg.channel.wait_idle(BOUND_S)
        d.settle()
        d.clock.advance(SHORT_AGE_S + 1.0)
        shown = _count(d, answer)
    d.send("/last")
    wait_for(lambda: _count(d, MSG_NO_LAST_ANSWER), "the reply to /last", tick=d.tick)
    assert d.pg.channel.wait_idle(BOUND_S)
    if why == "the answer is too old":
        assert _count(d, answer) == shown

"""Contract: a final answer whose send hung (the request went out, no reply came) is not
sent again without an idempotency key, but it is never gone: the person's next message
gets a one-line hint, and ``/last`` sends the scope's last answer again (bounded in age:
after ``last_answer_max_age`` there is nothing to send, and ``/last`` says so); on every
chat platform through its emulator.

The hang is injected into the channel's delivery chain: the first attempt of the answer's
first part raises a read timeout (a request that was sent, its outcome unknown)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from channelkit.core.text import MSG_LAST_UNCERTAIN, MSG_NO_LAST_ANSWER
from channelkit.errors import ReadTimeout
from contract_drivers import BOUND_S, DRIVERS, Driver, wait_for
from contract_harness import Context, new_token, open_platform, run_to_a_final_send

#: a short age bound for the test that lets an answer grow too old (a FakeClock far
#: ahead would make the emulators' signed callbacks stale)
SHORT_AGE_S = 5.0


@pytest.fixture(params=sorted(DRIVERS))
def short_memory(request: pytest.FixtureRequest) -> Iterator[Context]:
    """A channel of its own that keeps the last answer ``SHORT_AGE_S`` seconds."""
    with open_platform(request.param, last_answer_max_age=SHORT_AGE_S) as context:
        yield context


class HangOnce:
    """The first attempt of the next final answer's first send hangs (a read timeout
    after sending); with an idempotency key (Feishu's ``uuid``) the chain may retry it,
    else not."""

    def __init__(self) -> None:
        self.calls = 0

    def wrap(
        self, part: int, path: int, first: bool, send: Callable[[], object]
    ) -> Callable[[], object]:
        if not first:
            return send

        def hangs() -> object:
            self.calls += 1
            if self.calls == 1:
                raise ReadTimeout("read timed out (the final send hung)", timeout=True)
            return send()

        return hangs


def _count(d: Driver, text: str) -> int:
    return sum(1 for t in d.chat_texts() if text in t)


def _lose_an_answer(ctx: Context) -> tuple[bool, str]:
    """Run until a final send is made and hang it; whether that send was idempotent (the
    chain may then retry it) and the lost answer's token."""
    interceptor, token = run_to_a_final_send(ctx, HangOnce().wrap)
    assert interceptor.first is not None
    ctx.driver.settle()
    if interceptor.first.idempotent:
        ctx.driver.settle()
    return interceptor.first.idempotent, token


def test_the_next_message_after_a_hung_final_send_carries_a_hint(ctx: Context) -> None:
    d = ctx.driver
    idempotent, lost = _lose_an_answer(ctx)
    hints = _count(d, MSG_LAST_UNCERTAIN)
    second = f"second {new_token()}"
    ctx.script.fn = lambda turn: second
    d.send("are you there?")
    wait_for(lambda: _count(d, second), "the second answer", tick=d.tick)
    assert d.pg.channel.wait_idle(BOUND_S)
    d.settle()
    if idempotent:  # retried with the same key: delivered, nothing to hint at
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
    _, lost = _lose_an_answer(ctx)
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

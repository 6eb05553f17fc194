"""Contract: a chat far over its rate limit never holds a pool worker with its streamed
output, on every platform that paces its API calls (`OutboundPacer`).

The channel's hook pool has ONE worker. Chat A's limits are tiny (a token every
`TOKEN_S` seconds after a burst of five, per chat and per card:
`OutboundPacer.override()`), and A's run streams parts until its stream is throttled.
Then a person writes in another chat, B, and sees the bot's streamed answer while the
fake clock stays far short of A's wait: a throttled stream write books its retry on the
scheduler (`SnapshotWriter`, inside `no_wait()`) instead of sleeping on the worker.
Before, that write waited for its token on the only worker (up to a minute), and B got
nothing. When A's run ends and the clock moves on, every part of A's text arrives:
nothing is dropped. (B streams its answer, so its card is written on the pool too; a
final answer alone would go from B's run.)

Not on Weixin (iLink messages cannot be edited: nothing streams) nor Telegram (its
stream previews never waited: `ChatRateLimiter.stream_wait()`).
"""

from __future__ import annotations

import queue
import threading
from typing import Any

import pytest
from channelkit.agents import Turn
from channelkit.platforms.common.rate_limit import OutboundLimit, OutboundPacer
from contract_drivers import BOUND_S, wait_for
from contract_harness import Context, new_token

pytestmark = pytest.mark.slow  # many seconds of real time: its file starts first

TOKEN_S = 1_000.0  # seconds per token of chat A (its stream stays throttled)
BURST = 5.0  # enough for B's card and answer
PARTS = 12  # parts A streams, a write each: more than its bursts allow
FAR_S = 25.0  # fake seconds the clock may move while B is answered (A waits longer)


def _tiny(pacer: OutboundPacer) -> None:
    """Every family paced per chat (or per card) at one token every `TOKEN_S` after a
    burst of `BURST`; the bot-wide limits stay as they are."""
    pacer.enabled = True
    for family, limits in pacer.table.limits.items():
        scope = "resource" if any(lim.scope == "resource" for lim in limits) else "chat"
        bot = tuple(lim for lim in limits if lim.scope == "bot")
        pacer.override(family, OutboundLimit(1 / TOKEN_S, BURST, scope), *bot)


def test_a_throttled_stream_leaves_the_only_worker_to_another_chat_and_loses_no_text(
    one_worker: Context,
) -> None:
    ctx, d = one_worker, one_worker.driver
    d.require("live_output")
    pacer = getattr(d.pg.channel, "outbound_pacer", None)
    if pacer is None:
        pytest.skip(f"{d.platform} paces streams by ChatRateLimiter, which never waited")
    _tiny(pacer)
    a, b = new_token(), new_token()
    parts: queue.Queue[str | None] = queue.Queue()
    b_shown = threading.Event()

    def fn(turn: Turn) -> str | None:
        if b in turn.text:  # B streams its answer: its card is written on the pool
            turn.say(f"answer for {b}.")
            b_shown.wait(BOUND_S * 2)
            return None
        while (part := parts.get(timeout=BOUND_S * 3)) is not None:
            turn.say(part)
        ctx.script.outcomes.put("A said all")
        return None

    ctx.script.fn = fn
    wanted = [f"part {i} of {a}." for i in range(PARTS)]
    started = d.clock.now()
    d.send(f"stream {a}")
    parts.put(wanted[0] + " ")
    wait_for(lambda: d.segment(wanted[0]), "A's first part", tick=lambda: d.clock.advance(0.1))
    for part in wanted[1:]:
        parts.put(part + " ")
        for _ in range(4):  # the flush interval passes: A writes, until throttled
            d.clock.advance(0.25)
            d.pg.channel.wait_idle(0.05)  # A's write went (or was throttled)
    shown_a = d.segment(wanted[0])
    assert shown_a is not None and wanted[-1] not in shown_a.text, "A's stream was not throttled"

    d.send_as(f"question {b}", chat=d.other_group, group=True, mentions_bot=True)

    # the clock crawls (B's card flushes within a second of it): far short of A's wait
    wait_for(
        lambda: d.segment(f"answer for {b}."),
        lambda: f"B's answer while A is throttled (now: {d.segments()})",
        tick=lambda: d.clock.advance(0.01) if d.clock.now() - started < FAR_S else None,
    )
    assert d.clock.now() - started < FAR_S + 1
    assert pacer.throttled > 0  # A's stream was told to wait, and its worker moved on
    b_shown.set()
    d.wait_segment(f"answer for {b}.", "completed")

    parts.put(None)  # A's run ends; its last writes wait for the clock, bounded
    assert ctx.script.outcome() == "A said all"

    def all_of_a() -> Any:
        seg = d.segment(wanted[-1])
        return seg is not None and seg.state == "completed" and all(w in seg.text for w in wanted)

    wait_for(
        all_of_a,
        lambda: f"all of A's text (now: {d.segments()})",
        tick=lambda: d.clock.advance(5.0),
    )

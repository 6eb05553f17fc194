"""Contract: a burst of output into one chat never exceeds the platform's per-chat rate
limit and loses no text, on every chat platform (issue 28).

The emulator enforces a small per-chat limit (``POST /_emulator/limits``: 2 writes a
second, bursts of 4, on the channel's fake clock) and answers past it with the
platform's own 429. The channel paces its writes a little below it (1.5 a second, bursts
of 2: `OutboundPacer.override()`, Telegram's `ChatRateLimiter.set_limit()`), the numbers
small so the test takes seconds, not the minutes of the real limits. One run writes
`PARTS` segments, one message (or card) each, as fast as it can: the emulator refused
none of the writes, and every part reached the chat.

A second case turns the pacing off: the same burst is refused (the emulator enforces
what the first case says it stayed inside). Not on Discord: its client also follows the
``X-RateLimit-*`` headers the emulator sends, which keep even an unpaced burst inside.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import requests
from channelkit.agents import Turn
from channelkit.platforms.common.rate_limit import ChatLimit, OutboundLimit
from contract_drivers import Driver, wait_for
from contract_harness import Context, new_token

pytestmark = pytest.mark.slow  # many seconds of real time: its file starts first

PARTS = 8  # segments of the burst (more than the burst of the limits)
EMULATOR = {"per_second": 2.0, "burst": 4.0}  # the platform's limit, as enforced
PACED = (1.5, 2.0)  # the channel's pacing: rate, burst (below the enforced limit)


def _limits(d: Driver, enabled: bool) -> dict[str, Any]:
    """Enforce `EMULATOR` (Telegram: for private chats and groups alike)."""
    if d.platform == "telegram":
        d.emulator.limits.clock = d.clock.now
        body: dict[str, Any] = {
            "enabled": enabled,
            "private_per_second": EMULATOR["per_second"],
            "private_burst": EMULATOR["burst"],
            "group_per_minute": EMULATOR["per_second"] * 60,
            "group_burst": EMULATOR["burst"],
        }
    else:
        d.emulator.write_limits.clock = d.clock.now
        body = {"enabled": enabled, **EMULATOR}
    response = requests.post(f"{d.pg.url}/_emulator/limits", json=body, timeout=5)
    assert response.status_code == 200, response.text
    return dict(response.json())


def _rejected(d: Driver) -> int:
    response = requests.get(f"{d.pg.url}/_emulator/limits", timeout=5)
    assert response.status_code == 200, response.text
    return int(response.json()["rejected_429"])


def _pace(d: Driver, paced: bool) -> None:
    """The channel paces every per-chat write at `PACED` (or not at all)."""
    channel = d.pg.channel
    rate, burst = PACED
    if d.platform == "telegram":
        limit = ChatLimit(rate=rate, burst=burst) if paced else ChatLimit(1e6, 1e6)
        channel.rate_limiter.set_limit(lambda chat_id: limit)
        return
    pacer = channel.outbound_pacer
    pacer.enabled = paced
    for family, limits in pacer.table.limits.items():
        pacer.override(
            family,
            *(
                OutboundLimit(rate, burst, lim.scope) if lim.scope != "bot" else lim
                for lim in limits
            ),
        )


def _shown(d: Driver) -> str:
    """Every bot message and card of the chat, as text."""
    state = d.state()
    out = [json.dumps(view, ensure_ascii=False) for view in state["views"].values()]
    out += [str(e.get("text", "")) for e in state["timeline"] if e.get("from") == "bot"]
    return "\n".join(out)


def _burst(ctx: Context, token: str) -> None:
    def fn(turn: Turn) -> str:
        for part in range(PARTS):
            turn.say(f"part {part} of {token}.")
            turn.boundary()
        ctx.script.outcomes.put("said")
        return f"end of {token}."

    ctx.script.fn = fn
    ctx.driver.send("burst")
    assert ctx.script.outcome() == "said"


def test_a_burst_of_segments_stays_inside_the_chats_limit_and_loses_no_text(
    ctx: Context,
) -> None:
    d = ctx.driver
    token = new_token()
    _pace(d, paced=True)
    assert _limits(d, enabled=True)["enabled"] is True
    _burst(ctx, token)
    wanted = [f"part {part} of {token}." for part in range(PARTS)] + [f"end of {token}."]

    def missing() -> list[str]:
        shown = _shown(d)
        return [text for text in wanted if text not in shown]

    # fake time moves slowly (0.05 s a poll): unpaced, the writes would bunch up
    wait_for(
        lambda: not missing(),
        lambda: f"every part ({missing()} missing)",
        tick=lambda: d.clock.advance(0.05),
    )
    assert d.pg.channel.wait_idle(10.0)
    assert _rejected(d) == 0  # no write went past the chat's limit
    assert not missing()


def test_the_same_burst_unpaced_is_refused_past_the_limit(ctx: Context) -> None:
    d = ctx.driver
    if d.platform.startswith("discord"):
        pytest.skip("discord paces by the emulator's X-RateLimit-* headers even unpaced")
    _pace(d, paced=False)
    _limits(d, enabled=True)
    _burst(ctx, new_token())
    # fake time crawls (a hundredth of a second a poll): the burst's writes bunch up
    crawl = lambda: d.clock.advance(0.01)  # noqa: E731
    wait_for(lambda: _rejected(d) > 0, "a refusal past the limit", tick=crawl)
    d.settle()
    _limits(d, enabled=False)  # the channel's retries of the refused writes now go
    assert d.pg.channel.wait_idle(30.0)

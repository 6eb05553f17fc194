"""Contract: a chat far over its rate limit never holds a pool worker with a final
answer, on every platform whose answers are messages (no live output to stream into).

The channel's hook pool has ONE worker, and the per-chat limits are tiny (one token
every `TOKEN_S` seconds, a burst of one). A person's first answer takes the chat's token;
their second answer finds none: the delivery chain is told to wait (`Throttled`, inside
`no_wait()`) and books its next try on the scheduler instead of sleeping on the worker.
Another person, in another chat, is answered meanwhile while the fake clock stays far
short of the first chat's wait; then the clock moves on and the second answer arrives,
once. Before, the second answer waited for its token on the only worker (up to a minute)
and the other person got nothing. (The platforms with live output stream into their
status cards: `test_a_throttled_stream_never_holds_the_worker_another_chat_needs.py`.)
"""

from __future__ import annotations

import pytest
from channelkit.platforms.common.rate_limit import OutboundLimit
from contract_drivers import wait_for
from contract_harness import Context, new_token

TOKEN_S = 40.0  # seconds per token of a chat (within the chain's patience: 60 s)
FAR_S = 25.0  # fake seconds the clock may move while the other person is answered
OTHER_PERSON = "person_elsewhere_7"


def test_a_throttled_final_answer_leaves_the_only_worker_to_another_chat(
    one_worker: Context,
) -> None:
    ctx, d = one_worker, one_worker.driver
    if d.caps.live_output is None:
        pytest.skip(f"{d.platform}: its answers stream into a live card (the stream rule)")
    pacer = getattr(d.pg.channel, "outbound_pacer", None)
    if pacer is None:
        pytest.skip(f"{d.platform} paces its answers by ChatRateLimiter's gate, never waited")
    pacer.enabled = True
    for family, limits in pacer.table.limits.items():
        bot = tuple(lim for lim in limits if lim.scope == "bot")
        pacer.override(family, OutboundLimit(1 / TOKEN_S, 1.0, "chat"), *bot)
    first, second, other = new_token(), new_token(), new_token()
    ctx.script.fn = lambda turn: f"answer for {turn.text.split()[-1]}."
    d.send(f"question {first}")
    wait_for(lambda: f"answer for {first}." in d.chat_texts(), "the first answer")

    started = d.clock.now()
    d.send(f"question {second}")  # the chat's token is spent: this answer must wait
    wait_for(lambda: pacer.throttled > 0, "the second answer to be told to wait")
    d.send_as(f"question {other}", user=OTHER_PERSON)  # in their own (direct) chat
    wait_for(
        lambda: f"answer for {other}." in d.chat_texts(),
        lambda: f"the other person's answer while the chat waits (now: {d.chat_texts()})",
        tick=lambda: d.clock.advance(0.01) if d.clock.now() - started < FAR_S else None,
    )
    assert d.clock.now() - started < FAR_S + 1
    assert f"answer for {second}." not in d.chat_texts()

    wait_for(
        lambda: f"answer for {second}." in d.chat_texts(),
        "the second answer once its token came",
        tick=lambda: d.clock.advance(5.0),
    )
    assert d.chat_texts().count(f"answer for {second}.") == 1
    assert pacer.unpaced == 0  # it went with its token, not past the limit

"""Contract: once a tool approval is answered, its prompt shows only the outcome: the
"Reply with: /approve ... /deny ..." commands it offered are gone; on every chat platform
with approval buttons, through its emulator."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from channelkit.agents import Turn
from contract_drivers import Driver, wait_for
from contract_harness import Context, new_token

COMMANDS = ("/approve", "/deny", "Reply with")


def _shown(d: Driver, title: str) -> str:
    """Everything the chat shows of the approval prompt for ``title`` now."""
    views = [v for v in d.bot_views() if title in json.dumps(v, ensure_ascii=False)]
    assert views, f"no approval prompt for {title!r}"
    return json.dumps(views[-1], ensure_ascii=False)


@pytest.mark.parametrize("choice", ["Allow", "Reject"])
def test_a_settled_approval_prompt_shows_the_outcome_and_no_commands(
    ctx: Context, choice: str
) -> None:
    d = ctx.driver
    d.require("approval_buttons")
    title = f"Run ls {new_token()}"

    def asks(turn: Turn) -> str:
        ctx.script.outcomes.put(turn.request_permission(title))
        return ""

    ctx.script.fn = asks
    d.send("permission")
    shown: Any = wait_for(
        lambda: (a := d.approval_buttons(title)) and a["buttons"] and a, "the approval buttons"
    )
    wait_for(lambda: d.pg.channel.pending_request_ids(), "the channel to hold the request")
    time.sleep(0.05)
    d.press(shown, choice)
    decision = ctx.script.outcome()
    assert decision.allowed is (choice == "Allow"), decision
    wait_for(lambda: not d.approval_buttons(title)["buttons"], "the prompt settled in place")
    assert d.pg.channel.wait_idle(5.0)
    d.settle()
    settled = _shown(d, title)
    assert not [c for c in COMMANDS if c in settled], settled
    assert choice in settled, settled  # the outcome is shown

"""Contract: approval buttons answer a tool permission once and only for its owner;
presentations render natively with the platform's message id and pin where the platform
pins; on every chat platform through its emulator."""

from __future__ import annotations

import time

from channelkit.agents import Turn
from contract_drivers import FOREIGN, wait_for
from contract_harness import (
    Context,
    new_token,
)

# -- approval buttons ----------------------------------------------------------------------------


def test_approval_buttons_answer_a_tool_permission_once_and_only_for_the_owner(
    ctx: Context,
) -> None:
    d = ctx.driver
    d.require("approval_buttons")
    title = f"Run ls {new_token()}"

    def asks(turn: Turn) -> str:
        ctx.script.outcomes.put(turn.request_permission(title))
        return ""

    ctx.script.fn = asks
    d.send("permission")
    shown = wait_for(
        lambda: (a := d.approval_buttons(title)) and a["buttons"] and a, "the approval buttons"
    )
    wait_for(lambda: d.pg.channel.pending_request_ids(), "the channel to hold the request")
    time.sleep(0.05)
    assert {"Allow", "Reject"} <= set(shown["buttons"]), shown
    if d.caps.foreign_users is None:
        d.press(shown, "Reject", user=FOREIGN)
        assert ctx.script.no_outcome(0.3)  # refused: the request still waits
        if d.caps.private_notice is None:
            wait_for(lambda: d.notices(FOREIGN), "the private notice to the foreign user")
    d.press(shown, "Allow")
    decision = ctx.script.outcome()
    assert decision.allowed and decision.option_id == "proceed_once", decision
    wait_for(lambda: not d.approval_buttons(title)["buttons"], "the buttons settled in place")
    assert ctx.script.no_outcome()


# -- presentations -------------------------------------------------------------------------------


def test_a_presentation_is_rendered_natively_with_a_message_id(ctx: Context) -> None:
    d = ctx.driver
    title = f"Deploy {new_token()}"
    card = {
        "title": title,
        "blocks": [
            {"type": "text", "text": "All 3 services are up."},
            {
                "type": "buttons",
                "buttons": [{"label": "Dashboard", "url": "https://example.test/d"}],
            },
        ],
    }

    def presents(turn: Turn) -> str:
        turn.present(card)
        return ""

    ctx.script.fn = presents
    d.send("present")
    shown = wait_for(lambda: d.presentations(title), "the presentation", tick=d.tick)
    assert len(shown) == 1, shown
    assert shown[0]["messageId"], shown  # the platform's id of the message (pins need it)
    if d.caps.native_presentation is None:
        assert shown[0]["native"], shown  # not degraded to plain text


def test_a_pinned_presentation_is_pinned_where_the_platform_pins(ctx: Context) -> None:
    d = ctx.driver
    d.require("pins")
    title = f"Pinned {new_token()}"
    payload = {
        "presentation": {"title": title, "blocks": [{"type": "text", "text": "Read me."}]},
        "delivery": {"pin": True},
    }

    def presents(turn: Turn) -> str:
        turn.present(payload)
        return ""

    ctx.script.fn = presents
    d.send("present")
    shown = wait_for(
        lambda: [p for p in d.presentations(title) if p["pinned"]], "the pinned presentation"
    )
    assert len(shown) == 1

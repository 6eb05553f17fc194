"""Contract: approval buttons answer a tool permission once and only for its owner;
presentations render natively with the platform's message id and pin where the platform
pins; on every chat platform through its emulator."""

from __future__ import annotations

import time

import pytest
from channelkit.agents import Turn
from contract_drivers import FOREIGN, wait_for
from contract_harness import (
    Context,
    known_defect,
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


def test_a_presentations_value_button_reaches_the_agent_as_the_persons_message(
    ctx: Context, request: pytest.FixtureRequest
) -> None:
    """The person presses a value button of a presentation: the agent receives its value
    as that person's message in the same conversation, and its answer shows; a link
    button is a link (no callback)."""
    d = ctx.driver
    d.require("presentation_buttons")
    bound = known_defect(d, "presentation_buttons", request)
    value = f"hello from a button {new_token()}"
    seen: list[tuple[str, str]] = []

    def fn(turn: Turn) -> str:
        seen.append((turn.text, turn.session_id))
        if turn.text == "present":
            turn.present(
                {
                    "title": "Buttons",
                    "blocks": [
                        {
                            "type": "buttons",
                            "buttons": [
                                {"label": "Open docs", "url": "https://example.com/docs"},
                                {"label": "Say hello", "value": value},
                            ],
                        }
                    ],
                }
            )
            return ""
        return f"You wrote: {turn.text}"

    ctx.script.fn = fn
    d.send("present")
    shown = wait_for(lambda: d.presentation_keyboard("Say hello"), "the presentation's buttons")
    link = shown["buttons"].get("Open docs")
    if link is not None:  # where the chat lists link buttons, they are links
        assert link["url"] == "https://example.com/docs" and not link["data"], link
    d.click(shown["id"], "tap", {"data": shown["buttons"]["Say hello"]["data"]})
    wait_for(lambda: value in [t for t, _ in seen], "the agent to receive the value", bound)
    assert [text for text, _ in seen] == ["present", value]
    assert len({session for _, session in seen}) == 1  # the same conversation
    d.wait_segment(f"You wrote: {value}", "completed")

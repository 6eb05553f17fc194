"""Discord rejects repeated custom_ids (and repeated option values in a select): two
buttons or options sharing a value get distinct ids, and every id still decodes to the
value (or command) the agent receives when it is clicked."""

from __future__ import annotations

from typing import Any

from channelkit.platforms.discord import renderer as discord
from channelkit.presentation import (
    Button,
    ButtonsBlock,
    MessagePresentation,
    SelectBlock,
    SelectOption,
    adapt,
)


def _components(message: dict[str, Any]) -> list[dict[str, Any]]:
    rows = [c for c in message["components"][0]["components"] if c["type"] == 1]
    return [item for row in rows for item in row["components"]]


def test_shared_values_get_unique_decodable_custom_ids() -> None:
    presentation = MessagePresentation(
        blocks=(
            ButtonsBlock((Button("Yes", value="same"), Button("Also yes", value="same"))),
            ButtonsBlock((Button("Run", command="/go"), Button("Run again", command="/go"))),
            SelectBlock((SelectOption("A", "same"), SelectOption("B", "same"), SelectOption("C"))),
        )
    )
    [message] = discord.render(adapt(presentation, discord.CAPABILITIES))
    items = _components(message)
    buttons = [i for i in items if i["type"] == 2]
    ids = [b["custom_id"] for b in buttons]
    assert len(set(ids)) == len(ids) == 4
    assert [discord.decode_custom_id(i) for i in ids] == [
        ("value", "same"),
        ("value", "same"),
        ("command", "/go"),
        ("command", "/go"),
    ]
    [select] = [i for i in items if i["type"] == 3]
    values = [o["value"] for o in select["options"]]
    assert len(set(values)) == 3
    assert [discord.decode_custom_id(v) for v in values] == [
        ("value", "same"),
        ("value", "same"),
        ("value", "C"),
    ]
    assert discord.decode_custom_id(select["custom_id"]) is None


def test_values_with_colons_and_at_the_byte_budget_round_trip() -> None:
    value = "deploy:approve:" + "x" * (discord.CAPABILITIES.limits.actions.max_value_bytes - 15)  # type: ignore[operator]
    presentation = MessagePresentation(
        blocks=(ButtonsBlock(tuple(Button(f"B{n}", value=value) for n in range(5))),)
    )
    [message] = discord.render(adapt(presentation, discord.CAPABILITIES))
    ids = [b["custom_id"] for b in _components(message)]
    assert len(set(ids)) == 5
    assert all(len(i) <= 100 for i in ids)
    assert {discord.decode_custom_id(i) for i in ids} == {("value", value)}

"""Normalization, validation, JSON round trip, schema, legacy interactive, delivery."""

from __future__ import annotations

import json

import pytest
from channelkit.errors import ConfigurationError
from channelkit.presentation import (
    Button,
    ButtonsBlock,
    ContextBlock,
    Delivery,
    DividerBlock,
    MessagePresentation,
    PinRequest,
    PresentationError,
    ReplyPayload,
    SelectBlock,
    SelectOption,
    TextBlock,
    load_schema,
    parse_delivery,
    parse_presentation,
    parse_reply_payload,
    presentation_from_interactive,
    presentation_to_interactive,
)

FULL = {
    "title": "Deploy approval",
    "tone": "warning",
    "blocks": [
        {"type": "text", "text": "Canary is ready."},
        {"type": "context", "text": "Build 1234"},
        {"type": "divider"},
        {
            "type": "buttons",
            "buttons": [
                {"label": "Approve", "value": "deploy:approve", "style": "success", "priority": 2},
                {"label": "Docs", "url": "https://x.test/d"},
                {"label": "Status", "command": "/status", "disabled": True},
            ],
        },
        {
            "type": "select",
            "placeholder": "Environment",
            "options": [{"label": "Canary", "value": "env:canary"}, {"label": "Prod"}],
        },
    ],
}


def test_round_trip_is_lossless() -> None:
    presentation = MessagePresentation.from_dict(FULL)
    again = MessagePresentation.from_dict(json.loads(json.dumps(presentation.to_dict())))
    assert again == presentation
    assert presentation.to_dict()["blocks"][4]["options"][1] == {"label": "Prod", "value": "Prod"}


def test_normalization_trims_lowercases_and_drops_empty_blocks() -> None:
    presentation = MessagePresentation.from_dict(
        {
            "title": "  Hi  ",
            "tone": "INFO",
            "blocks": [
                {"type": "TEXT", "text": "  body  "},
                {"type": "text", "text": "   "},
                {"type": "context", "text": ""},
                {"type": "buttons", "buttons": []},
                {"type": "select", "options": []},
                {
                    "type": "buttons",
                    "buttons": [{"text": " Go ", "callback_data": "go", "style": "DANGER"}],
                },
            ],
        }
    )
    assert presentation.title == "Hi"
    assert presentation.tone == "info"
    assert presentation.blocks == (
        TextBlock("body"),
        ButtonsBlock((Button("Go", value="go", style="danger"),)),
    )


def test_title_only_presentation_is_valid() -> None:
    presentation = MessagePresentation.from_dict({"title": "Just a title"})
    assert presentation.blocks == ()
    assert presentation.to_dict() == {"title": "Just a title", "blocks": []}


def test_empty_presentation_is_rejected() -> None:
    with pytest.raises(PresentationError, match="title or at least one block"):
        MessagePresentation.from_dict({"blocks": [{"type": "text", "text": "  "}]})


@pytest.mark.parametrize(
    ("button", "path"),
    [
        ({"value": "v"}, "blocks[1].buttons[0].label"),
        ({"label": "   ", "value": "v"}, "blocks[1].buttons[0].label"),
        ({"label": "No target"}, "blocks[1].buttons[0].value"),
        ({"label": "Bad style", "value": "v", "style": "loud"}, "blocks[1].buttons[0].style"),
        ({"label": "Bad prio", "value": "v", "priority": "high"}, "blocks[1].buttons[0].priority"),
    ],
)
def test_invalid_button_rejected_with_path(button: dict[str, object], path: str) -> None:
    data = {"blocks": [{"type": "text", "text": "x"}, {"type": "buttons", "buttons": [button]}]}
    with pytest.raises(PresentationError) as info:
        MessagePresentation.from_dict(data)
    assert info.value.path == path
    assert str(info.value).startswith(path + ": ")
    assert isinstance(info.value, ConfigurationError)


def test_option_values_are_filled_and_typed_actions_accepted() -> None:
    presentation = MessagePresentation.from_dict(
        {
            "blocks": [
                {
                    "type": "select",
                    "options": [
                        {"label": "A"},
                        {"label": "B", "action": {"type": "callback", "value": "b"}},
                    ],
                },
                {
                    "type": "buttons",
                    "buttons": [{"label": "Run", "action": {"type": "command", "command": "/run"}}],
                },
            ]
        }
    )
    select = presentation.blocks[0]
    assert isinstance(select, SelectBlock)
    assert [o.value for o in select.options] == ["A", "b"]
    assert presentation.blocks[1] == ButtonsBlock((Button("Run", command="/run"),))
    assert SelectOption("Z").value == "Z"


def test_unknown_block_type_rejected_by_from_dict() -> None:
    with pytest.raises(PresentationError) as info:
        MessagePresentation.from_dict(
            {"blocks": [{"type": "text", "text": "a"}, {"type": "chart"}]}
        )
    assert info.value.path == "blocks[1].type"
    assert "unknown block type 'chart'" in str(info.value)


def test_direct_construction_validates() -> None:
    with pytest.raises(PresentationError, match="label"):
        Button("  ", value="v")
    with pytest.raises(PresentationError, match="value, url or command"):
        Button("x")
    with pytest.raises(PresentationError, match="buttons"):
        ButtonsBlock(())
    with pytest.raises(PresentationError, match="text"):
        TextBlock(" ")
    with pytest.raises(PresentationError, match="blocks\\[0\\]"):
        MessagePresentation(blocks=("nope",))  # type: ignore[arg-type]
    with pytest.raises(PresentationError, match="tone"):
        MessagePresentation(title="t", tone="loud")  # type: ignore[arg-type]
    # Lists are accepted and frozen into tuples.
    block = ButtonsBlock([Button("a", value="a")])  # type: ignore[arg-type]
    assert isinstance(block.buttons, tuple)


# ------------------------------------------------------------------ JSON Schema


def test_schema_file_is_shipped_and_valid() -> None:
    import jsonschema

    schema = load_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    assert set(schema["$defs"]) >= {"presentation", "delivery", "replyPayload", "block"}


def test_schema_accepts_canonical_presentation() -> None:
    presentation = parse_presentation(FULL)
    assert parse_presentation(presentation.to_dict()) == presentation


@pytest.mark.parametrize(
    ("data", "path", "fragment"),
    [
        (
            {"blocks": [{"type": "text", "text": "a"}, {"type": "chart", "data": []}]},
            "blocks[1].type",
            "unknown block type 'chart'; expected one of text, context, divider, buttons, select",
        ),
        ({"blocks": [{"type": "text", "txt": "a"}]}, "blocks[0].txt", "unknown field 'txt'"),
        (
            {"blocks": [{"type": "buttons", "buttons": [{"label": "x"}]}]},
            "blocks[0].buttons[0].value",
            "a button needs a value, url or command",
        ),
        (
            {"blocks": [{"type": "buttons", "buttons": [{"label": " ", "value": "v"}]}]},
            "blocks[0].buttons[0].label",
            "must not be empty",
        ),
        ({"tone": "loud", "blocks": []}, "tone", "must be one of"),
        (
            {"blocks": [{"type": "select", "options": [{"value": "v"}]}]},
            "blocks[0].options[0].label",
            "is required",
        ),
        ({"blocks": "nope"}, "blocks", "must be of type array"),
    ],
)
def test_schema_rejects_with_clear_message(data: object, path: str, fragment: str) -> None:
    with pytest.raises(PresentationError) as info:
        parse_presentation(data)
    assert info.value.path == path
    assert fragment in str(info.value)


def test_schema_validates_delivery_and_reply_payload() -> None:
    assert parse_delivery({"pin": True}).pin_request == PinRequest()
    with pytest.raises(PresentationError) as info:
        parse_delivery({"pin": {"notify": True}})
    assert info.value.path == "pin.enabled"
    payload = parse_reply_payload(
        {"text": "hi", "presentation": FULL, "delivery": {"pin": {"enabled": True, "notify": True}}}
    )
    assert payload.delivery == Delivery(pin=PinRequest(enabled=True, notify=True))
    with pytest.raises(PresentationError) as info:
        parse_reply_payload({"text": "hi", "components": []})
    assert info.value.path == "components"


# ------------------------------------------------------------------ delivery / payload


def test_delivery_pin_normalization() -> None:
    assert Delivery().pin_request is None
    assert Delivery(pin=True).pin_request == PinRequest(enabled=True, notify=False, required=False)
    assert Delivery(pin=PinRequest(enabled=False, required=True)).pin_request is None
    assert Delivery.from_dict(
        {"pin": {"enabled": True, "required": True}}
    ).pin_request == PinRequest(required=True)
    assert Delivery(pin=True).to_dict() == {"pin": True}
    assert Delivery.from_dict(Delivery(pin=PinRequest(notify=True)).to_dict()) == Delivery(
        pin=PinRequest(notify=True)
    )
    with pytest.raises(PresentationError, match="pin"):
        Delivery(pin="yes")  # type: ignore[arg-type]


def test_reply_payload_round_trip_and_validation() -> None:
    payload = ReplyPayload(
        text="hello", presentation=MessagePresentation(title="T"), delivery=Delivery(pin=True)
    )
    assert ReplyPayload.from_dict(payload.to_dict()) == payload
    with pytest.raises(PresentationError, match="text or a presentation"):
        ReplyPayload(text="  ")
    with pytest.raises(PresentationError) as info:
        ReplyPayload.from_dict(
            {"presentation": {"blocks": [{"type": "buttons", "buttons": [{"label": "x"}]}]}}
        )
    assert info.value.path == "presentation.blocks[0].buttons[0].value"


# ------------------------------------------------------------------ legacy interactive


def test_legacy_interactive_maps_into_presentation() -> None:
    interactive = {
        "blocks": [
            {"type": "text", "text": "Pick"},
            {"type": "buttons", "buttons": [{"label": "Yes", "value": "y"}]},
            {"type": "select", "options": [{"label": "One", "value": "1"}]},
        ]
    }
    presentation = presentation_from_interactive(interactive)
    assert presentation == MessagePresentation(
        blocks=(
            TextBlock("Pick"),
            ButtonsBlock((Button("Yes", value="y"),)),
            SelectBlock((SelectOption("One", "1"),)),
        )
    )
    payload = ReplyPayload.from_dict({"interactive": interactive})
    assert payload.presentation == presentation
    with pytest.raises(PresentationError) as info:
        presentation_from_interactive({"blocks": [{"type": "divider"}]})
    assert info.value.path == "interactive.blocks[0].type"
    assert presentation_from_interactive({"blocks": []}) is None


def test_presentation_to_interactive_bridge() -> None:
    presentation = MessagePresentation(
        title="T",
        blocks=(ContextBlock("c"), DividerBlock(), ButtonsBlock((Button("B", value="b"),))),
    )
    assert presentation_to_interactive(presentation) == {
        "blocks": [
            {"type": "text", "text": "T"},
            {"type": "text", "text": "c"},
            {"type": "buttons", "buttons": [{"label": "B", "value": "b"}]},
        ]
    }
    assert presentation_to_interactive(MessagePresentation(blocks=(DividerBlock(),))) is None

"""Issue 6 acceptance, normalization: the shipped JSON Schema on its own (as an agent or
the CLI would use it, without the Python parser behind it) rejects an unknown block type,
pointing at the block's ``type`` and listing the known types."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
from channelkit.errors import PresentationError
from channelkit.presentation.schema import load_schema, validate_json

KNOWN = ["text", "context", "divider", "buttons", "select"]


def _errors(data: Any, definition: str) -> list[jsonschema.ValidationError]:
    schema = {**load_schema(), "$ref": f"#/$defs/{definition}"}
    return list(jsonschema.Draft202012Validator(schema).iter_errors(data))


@pytest.mark.parametrize(
    ("data", "definition", "path", "dotted"),
    [
        (
            {"blocks": [{"type": "chart", "data": []}]},
            "presentation",
            ["blocks", 0, "type"],
            "blocks[0].type",
        ),
        (
            {
                "text": "hi",
                "presentation": {"blocks": [{"type": "text", "text": "a"}, {"type": "x"}]},
            },
            "replyPayload",
            ["presentation", "blocks", 1, "type"],
            "presentation.blocks[1].type",
        ),
    ],
)
def test_schema_alone_rejects_unknown_block_type(
    data: dict[str, Any], definition: str, path: list[Any], dotted: str
) -> None:
    errors = _errors(data, definition)
    assert errors, "the schema accepted an unknown block type"
    best = jsonschema.exceptions.best_match(errors)
    while best.context:
        best = jsonschema.exceptions.best_match(best.context)
    assert list(best.absolute_path) == path
    assert all(kind in best.message for kind in KNOWN)
    # validate_json (what parse_presentation runs first) reports the same place.
    with pytest.raises(PresentationError) as caught:
        validate_json(data, definition)
    assert caught.value.path == dotted
    assert "unknown block type" in str(caught.value)


@pytest.mark.parametrize("kind", KNOWN)
def test_schema_accepts_every_known_block_type(kind: str) -> None:
    block: dict[str, Any] = {"type": kind}
    if kind in ("text", "context"):
        block["text"] = "a"
    elif kind == "buttons":
        block["buttons"] = [{"label": "Go", "value": "go"}]
    elif kind == "select":
        block["options"] = [{"label": "A", "value": "a"}]
    assert _errors({"blocks": [block]}, "presentation") == []

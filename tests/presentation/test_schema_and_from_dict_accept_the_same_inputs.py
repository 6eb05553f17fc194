"""The strict JSON Schema and ``ReplyPayload.from_dict`` accept exactly the same inputs
over the canonical vocabulary: valid and invalid values, nulls, wrong types, blank
strings, unknown fields, empty presentations. (``from_dict`` additionally reads the
documented legacy aliases and case variants, which the schema does not list; lone
surrogates, which JSON Schema cannot portably express, ``from_dict`` rejects.)"""

from __future__ import annotations

from typing import Any

import jsonschema
from channelkit.presentation import PresentationError, ReplyPayload
from channelkit.presentation.schema import load_schema
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

VALIDATOR = jsonschema.Draft202012Validator(load_schema())

strings = st.sampled_from(["x", " x ", "", "  ", "Go", "\u00e9"])
junk = st.sampled_from([None, 1, True, [], {}, 1.5])


def optional(key: str, value: Any) -> Any:
    return st.one_of(st.just({}), value.map(lambda v: {key: v}), junk.map(lambda v: {key: v}))


def merged(*parts: Any) -> Any:
    return st.tuples(*parts).map(lambda ds: {k: v for d in ds for k, v in d.items()})


button = merged(
    optional("label", strings),
    optional("value", strings),
    optional("url", strings),
    optional("command", strings),
    optional("style", st.sampled_from(["primary", "loud"])),
    optional("priority", st.sampled_from([1, 2.5])),
    optional("disabled", st.booleans()),
    optional("extra", st.just(1)),
)
option = merged(optional("label", strings), optional("value", strings))
block = merged(
    st.sampled_from(["text", "context", "divider", "buttons", "select", "chart"]).map(
        lambda t: {"type": t}
    ),
    optional("text", strings),
    optional("continuation", st.booleans()),
    optional("buttons", st.lists(button, max_size=2)),
    optional("options", st.lists(option, max_size=2)),
    optional("placeholder", strings),
)
presentation = merged(
    optional("title", strings),
    optional("tone", st.sampled_from(["info", "loud"])),
    optional("blocks", st.lists(block, max_size=3)),
)
pin = st.one_of(
    st.booleans(),
    merged(
        optional("enabled", st.booleans()),
        optional("notify", st.booleans()),
        optional("required", st.booleans()),
    ),
)
payload = merged(
    optional("text", strings),
    optional("presentation", presentation),
    optional("delivery", merged(optional("pin", pin))),
    optional("allow_mass_mentions", st.booleans()),
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(payload)
def test_schema_and_from_dict_agree(data: dict[str, Any]) -> None:
    schema_accepts = VALIDATOR.is_valid(data)
    try:
        ReplyPayload.from_dict(data)
    except PresentationError:
        parser_accepts = False
    else:
        parser_accepts = True
    assert schema_accepts == parser_accepts, data


def test_known_former_disagreements() -> None:
    for data in (
        {},
        {"text": "  "},
        {"presentation": {}},
        {"presentation": {"blocks": [{"type": "text", "text": " "}]}},
        {"text": "x", "delivery": None},
        {"text": "x", "extra": 1},
        {"text": "x", "presentation": {"blocks": [{"type": "divider", "text": "a"}]}},
        {
            "text": "x",
            "presentation": {
                "blocks": [{"type": "select", "options": [{"label": "a", "value": " "}]}]
            },
        },
    ):
        assert not VALIDATOR.is_valid(data), data
        try:
            ReplyPayload.from_dict(data)
        except PresentationError:
            continue
        raise AssertionError(f"from_dict accepted {data}")

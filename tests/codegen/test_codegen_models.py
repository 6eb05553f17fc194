"""Generated models from the fixture spec: aliases, UNSET, open enums, unknown fields, paths."""

from __future__ import annotations

import dataclasses
from types import ModuleType

import pytest
from channelkit.errors import ConfigurationError, DeserializationError
from channelkit.http.model import UNSET, Model, OpenEnum


def test_wire_names_are_aliased(acme: ModuleType) -> None:
    req = acme.DeliverRequest(
        out_track_id="t", card_data=acme.CardData(card_param_map={"a": "b"}), from_="x"
    )
    assert req.to_dict() == {
        "outTrackId": "t",
        "cardData": {"cardParamMap": {"a": "b"}},
        "from": "x",
    }
    assert acme.DeliverRequest.from_dict(req.to_dict()) == req
    assert acme.DeliverRequest.from_json(req.to_json()) == req
    assert isinstance(req, Model) and dataclasses.is_dataclass(req)


def test_unset_differs_from_none(acme: ModuleType) -> None:
    absent = acme.DeliverRequest.from_dict({"outTrackId": "t", "cardData": {"cardParamMap": {}}})
    null = acme.DeliverRequest.from_dict(
        {"outTrackId": "t", "cardData": {"cardParamMap": {}}, "note": None}
    )
    assert absent.note is UNSET and not absent.note and repr(UNSET) == "UNSET"
    assert null.note is None
    assert "note" not in absent.to_dict() and null.to_dict()["note"] is None
    with pytest.raises(DeserializationError) as caught:
        acme.DeliverRequest.from_dict({"outTrackId": None, "cardData": {"cardParamMap": {}}})
    assert caught.value.path == "outTrackId"


def test_unknown_fields_round_trip_at_every_level(acme: ModuleType) -> None:
    data = {
        "success": True,
        "brandNew": {"x": [1, 2]},
        "result": {
            "outTrackId": "t",
            "deliverResults": [{"spaceId": "s", "success": True, "later": 1}],
            "more": "y",
        },
    }
    parsed = acme.DeliverResponse.from_dict(data)
    assert parsed.extra_fields == {"brandNew": {"x": [1, 2]}}
    assert parsed.result.extra_fields == {"more": "y"}
    assert parsed.result.deliver_results[0].extra_fields == {"later": 1}
    assert parsed.to_dict() == data


def test_enums_are_open(acme: ModuleType) -> None:
    known = acme.TargetResult.from_dict({"callbackType": "STREAM"})
    assert known.callback_type is acme.CallbackType.STREAM
    unseen = acme.TargetResult.from_dict({"callbackType": "WEBSOCKET"})
    assert unseen.callback_type == "WEBSOCKET" and unseen.to_dict() == {"callbackType": "WEBSOCKET"}
    ints = acme.DeliverRequest.from_dict(
        {"outTrackId": "t", "cardData": {"cardParamMap": {}}, "userIdType": 3}
    )
    assert ints.user_id_type == 3
    assert (
        acme.DeliverRequest.from_dict(
            {"outTrackId": "t", "cardData": {"cardParamMap": {}}, "userIdType": 2}
        ).user_id_type
        is acme.DeliverRequestUserIdType.VALUE_2
    )
    assert issubclass(acme.Color, OpenEnum) and acme.Color("red") is acme.Color.RED
    assert acme.CallbackType.decode("nope") == "nope"
    with pytest.raises(DeserializationError) as caught:
        acme.TargetResult.from_dict({"callbackType": 5})
    assert caught.value.path == "callbackType"


def test_deserialization_errors_name_the_path(acme: ModuleType) -> None:
    cases = [
        (
            {"result": {"outTrackId": "t", "deliverResults": [{}, {"success": "yes"}]}},
            "result.deliverResults[1].success",
        ),
        ({"result": {"deliverResults": []}}, "result.outTrackId"),
        ({"result": "nope"}, "result"),
        ({"result": {"outTrackId": "t", "deliverResults": {"a": 1}}}, "result.deliverResults"),
    ]
    for data, path in cases:
        with pytest.raises(DeserializationError) as caught:
            acme.DeliverResponse.from_dict(data)
        assert caught.value.path == path
    with pytest.raises(DeserializationError) as caught:
        acme.DeliverRequest.from_dict({"outTrackId": "t", "cardData": {"cardParamMap": {"k": 1}}})
    assert caught.value.path == "cardData.cardParamMap.k"
    with pytest.raises(DeserializationError):
        acme.DeliverResponse.from_dict(["not", "an", "object"])


def test_unions_maps_recursion_and_numbers(acme: ModuleType) -> None:
    card = acme.Card.from_dict(
        {"cardId": "a", "parent": {"cardId": "b"}, "result": {"cardParamMap": {}}, "score": 3}
    )
    assert (
        isinstance(card.parent, acme.Card)
        and isinstance(card.result, acme.CardData)
        and card.score == 3
    )
    assert acme.Card.from_dict({"cardId": "a", "result": True}).result is True
    req = acme.DeliverRequest.from_dict(
        {
            "outTrackId": "t",
            "cardData": {"cardParamMap": {}},
            "chatId": 5,
            "privateData": {"u1": {"cardParamMap": {"x": "y"}}},
        }
    )
    assert req.chat_id == 5 and req.private_data["u1"].card_param_map == {"x": "y"}
    with pytest.raises(DeserializationError) as caught:
        acme.DeliverRequest.from_dict(
            {"outTrackId": "t", "cardData": {"cardParamMap": {}}, "chatId": 1.5}
        )
    assert caught.value.path == "chatId"


def test_encoding_checks_types_and_names_the_field(acme: ModuleType) -> None:
    bad = acme.DeliverRequest(out_track_id="t", card_data=acme.CardData(card_param_map={"k": 2}))
    with pytest.raises(ConfigurationError) as caught:
        bad.to_dict()
    assert caught.value.path == "cardData.cardParamMap.k"
    with_dict = acme.DeliverRequest(
        out_track_id="t", card_data={"cardParamMap": {}}, color=acme.Color.GREEN
    )
    assert with_dict.to_dict()["color"] == "green"

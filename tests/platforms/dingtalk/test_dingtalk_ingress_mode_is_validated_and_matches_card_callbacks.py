"""``ingress`` (stream | http) is validated with the field named, and the card callback
type always matches it: Stream mode cards ask for STREAM callbacks (no route key), HTTP
mode needs the route key whenever cards are on (check-config and start refuse it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from channelkit.cli import main
from channelkit.config import build_channels, parse_config
from channelkit.errors import ConfigurationError
from channelkit.platforms.dingtalk import DingtalkChannel, DingtalkConfig

BASE: dict[str, Any] = {"clientId": "ding-app", "clientSecret": "s3cret"}
CARDS = {"interactiveCards": {"enabled": True}}


def _error(data: dict[str, Any]) -> ConfigurationError:
    with pytest.raises(ConfigurationError) as caught:
        DingtalkConfig.from_dict(data)
    return caught.value


def test_stream_is_the_default_and_http_is_explicit() -> None:
    assert DingtalkConfig.from_dict(BASE).ingress == "stream"
    assert DingtalkConfig.from_dict({**BASE, **CARDS}).card_callback_type == "STREAM"
    http = DingtalkConfig.from_dict(
        {**BASE, **CARDS, "ingress": "http", "cardCallbackRouteKey": "ck"}
    )
    assert (http.ingress, http.card_callback_type) == ("http", "HTTP")


@pytest.mark.parametrize("value", ["websocket", "HTTP", "", 1])
def test_an_unknown_ingress_names_the_field(value: Any) -> None:
    assert _error({**BASE, "ingress": value}).path == "ingress"


def test_http_with_cards_requires_the_route_key() -> None:
    error = _error({**BASE, **CARDS, "ingress": "http"})
    assert error.path == "cardCallbackRouteKey"
    assert "ingress" in str(error)
    # without cards there is no card callback to route
    assert DingtalkConfig.from_dict({**BASE, "ingress": "http"}).ingress == "http"


def test_stream_mode_ignores_a_route_key_and_mounts_no_route() -> None:
    from channelkit.agents.function import FunctionAgent

    config = DingtalkConfig.from_dict({**BASE, **CARDS, "cardCallbackRouteKey": "left-over"})
    channel = DingtalkChannel(config, FunctionAgent(lambda turn: "hi"))
    try:
        assert channel.api.callback_route_key is None  # cards ask for STREAM callbacks
        assert channel.ingress_routes() == []
        assert channel.connections == (channel.stream,)
    finally:
        channel.close()
    http = DingtalkConfig.from_dict(
        {**BASE, **CARDS, "ingress": "http", "cardCallbackRouteKey": "k"}
    )
    channel = DingtalkChannel(http, FunctionAgent(lambda turn: "hi"))
    try:
        assert channel.api.callback_route_key == "k"
        assert channel.stream is None and channel.connections == ()
        assert [r.path for r in channel.ingress_routes()] == ["/dingtalk/robot", "/dingtalk/card"]
    finally:
        channel.close()


def _document(options: dict[str, Any]) -> dict[str, Any]:
    return {
        "channels": [
            {
                "platform": "dingtalk",
                "credentials": {"clientId": "ding-app", "clientSecret": "s3cret"},
                "options": options,
            }
        ],
        "agent": {"type": "demo"},
    }


@pytest.mark.parametrize(
    ("options", "path"),
    [
        ({"ingress": "webhook"}, "channels[0].options.ingress"),
        ({"ingress": "http", **CARDS}, "channels[0].options.cardCallbackRouteKey"),
    ],
)
def test_check_config_and_start_name_the_field(
    options: dict[str, Any], path: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(ConfigurationError) as caught:
        build_channels(parse_config(_document(options), environ={}))
    assert caught.value.path == path
    config_file = tmp_path / "channelkit.json"
    config_file.write_text(json.dumps(_document(options)), encoding="utf-8")
    assert main(["check-config", str(config_file)]) == 2
    assert path in capsys.readouterr().err

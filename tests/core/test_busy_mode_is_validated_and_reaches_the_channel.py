"""``busy`` (what a message does while its conversation's run is going) and the collect
window: a bad value is refused with an error naming the field, in ``ChannelConfig`` and
in the configuration file (``channels[i].options.busy`` / ``collectWindowSeconds``, the
schema ``check-config`` and ``serve`` share); a good one reaches the built channel."""

from __future__ import annotations

import copy
import math
from typing import Any

import pytest
from channelkit.agents import FunctionAgent
from channelkit.config import build_channels, config_schema, parse_config
from channelkit.core import ChannelConfig
from channelkit.core.busy import BUSY_MODES, BusyMode
from channelkit.errors import ConfigurationError

DOC: dict[str, Any] = {
    "channels": [
        {
            "platform": "dingtalk",
            "credentials": {"clientId": "ding-app", "clientSecret": "s3cret"},
            "options": {"ingress": "http", "cardCallbackRouteKey": "channelkit"},
        }
    ],
}


def _doc(**options: Any) -> dict[str, Any]:
    doc = copy.deepcopy(DOC)
    doc["channels"][0]["options"].update(options)
    return doc


def test_the_default_is_queue_and_every_mode_is_accepted() -> None:
    assert ChannelConfig(name="c").busy is BusyMode.QUEUE
    assert ChannelConfig(name="c").collect_window == 1.5
    for mode in BUSY_MODES:
        assert ChannelConfig(name="c", busy=mode).busy is BusyMode(mode)
    assert BUSY_MODES == ("queue", "interrupt", "collect", "steer")


@pytest.mark.parametrize("bad", ["", "Queue", "wait", None, 1])
def test_an_unknown_mode_is_refused_naming_the_field_and_the_modes(bad: object) -> None:
    with pytest.raises(ConfigurationError) as info:
        ChannelConfig(name="c", busy=bad)  # type: ignore[arg-type]
    assert info.value.path == "busy"
    assert "queue" in str(info.value) and "steer" in str(info.value)


@pytest.mark.parametrize("bad", [0, -1.0, True, "1.5", math.inf, math.nan, 61])
def test_a_bad_collect_window_is_refused_naming_the_field(bad: object) -> None:
    with pytest.raises(ConfigurationError) as info:
        ChannelConfig(name="c", busy="collect", collect_window=bad)  # type: ignore[arg-type]
    assert info.value.path == "collect_window"


def test_the_schema_lists_the_modes_for_every_channel() -> None:
    options = config_schema()["properties"]["channels"]["items"]["properties"]["options"]
    assert options["properties"]["busy"]["enum"] == list(BUSY_MODES)
    assert "collectWindowSeconds" in options["properties"]


@pytest.mark.parametrize(
    ("options", "path"),
    [
        ({"busy": "later"}, "channels[0].options.busy"),
        ({"busy": 3}, "channels[0].options.busy"),
        ({"collectWindowSeconds": 0}, "channels[0].options.collectWindowSeconds"),
        ({"collectWindowSeconds": "2"}, "channels[0].options.collectWindowSeconds"),
        ({"collectWindowSeconds": 600}, "channels[0].options.collectWindowSeconds"),
    ],
)
def test_a_bad_value_in_the_file_names_its_json_path(options: dict[str, Any], path: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        parse_config(_doc(**options), environ={})
    assert info.value.path == path


def test_the_mode_from_the_file_reaches_the_built_channel() -> None:
    config = parse_config(_doc(busy="collect", collectWindowSeconds=2.5), environ={})
    agent = FunctionAgent(lambda turn: "hi")
    (channel,) = build_channels(config, agent)
    try:
        assert channel.config.busy is BusyMode.COLLECT
        assert channel.config.collect_window == 2.5
        assert channel.busy_chat.mode is BusyMode.COLLECT
        assert channel.busy_chat.collect_window == 2.5
    finally:
        channel.close()
        agent.close()

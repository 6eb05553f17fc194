"""``state.resetFailClosedSeconds`` sets how long, after the store comes back empty, a
delivery sent before the wipe is refused; a bad value is rejected naming its path."""

from __future__ import annotations

from typing import Any

import pytest
from channelkit.config import build_state_store, parse_config
from channelkit.errors import ConfigurationError
from channelkit.platforms.common.store_watch import watch_of

pytest.importorskip("redis", reason="redis-py is not installed (the redis extra)")

CHANNEL = {"platform": "telegram", "name": "helpdesk", "credentials": {"botToken": "1:abc"}}


def document(state: Any) -> dict[str, Any]:
    return {"channels": [CHANNEL], "agent": {"type": "demo"}, "state": state}


def test_the_window_reaches_the_stores_watch() -> None:
    config = parse_config(
        document({"redis": {"url": "redis://h:1/0"}, "resetFailClosedSeconds": 120}), environ={}
    )
    store = build_state_store(config)
    try:
        assert watch_of(store).fail_closed_s == 120.0
    finally:
        store.close()
    default = build_state_store(parse_config(document({"redis": {"url": "redis://h:1/0"}})))
    try:
        assert watch_of(default).fail_closed_s is None  # each platform's redelivery window
    finally:
        default.close()


@pytest.mark.parametrize("value", [0, -5, "60", 100000])
def test_a_bad_window_is_rejected_naming_its_path(value: Any) -> None:
    state = {"redis": {"url": "redis://h:1/0"}, "resetFailClosedSeconds": value}
    with pytest.raises(ConfigurationError) as caught:
        parse_config(document(state), environ={})
    assert "resetFailClosedSeconds" in str(caught.value.path or "") + str(caught.value)

"""Two Weixin pollers of one bot sharing a store: a message both fetch is handed on once."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from channelkit.platforms.weixin import WeixinConfig
from channelkit.platforms.weixin.polling import WeixinPolling
from channelkit.runtime import FakeClock
from channelkit.state import MemoryStore


class FakeIlink:
    """``get_updates`` always answers the same batch (two pollers, one cursor)."""

    def __init__(self, msgs: list[dict[str, Any]]) -> None:
        self.msgs = msgs

    def get_updates(self, cursor: str, timeout_s: float) -> Any:
        return SimpleNamespace(
            errcode=0, errmsg="", msgs=self.msgs, get_updates_buf="c1", longpolling_timeout_ms=0
        )


def test_a_message_both_instances_fetch_is_handled_once() -> None:
    clock = FakeClock()
    store = MemoryStore(namespace="bot", clock=clock)
    api = FakeIlink([{"message_id": 9, "from_user_id": "u"}, {"message_id": 10}])
    handled: list[tuple[str, Any]] = []
    config = WeixinConfig(bot_token="tok", base_url="http://127.0.0.1:9", typing=False)
    pollers = [
        WeixinPolling(
            config,
            lambda m, who=who: handled.append((who, m["message_id"])),
            api=api,  # type: ignore[arg-type]
            clock=clock,
            store=store,
        )
        for who in ("a", "b")
    ]
    for poller in pollers:
        poller.poll_once()
    assert sorted(mid for _, mid in handled) == [9, 10]
    assert {who for who, _ in handled} == {"a"}


def test_without_a_store_each_instance_hands_the_message_on() -> None:
    clock = FakeClock()
    api = FakeIlink([{"message_id": 9}])
    handled: list[Any] = []
    config = WeixinConfig(bot_token="tok", base_url="http://127.0.0.1:9", typing=False)
    for _ in range(2):
        WeixinPolling(config, handled.append, api=api, clock=clock).poll_once()  # type: ignore[arg-type]
    assert len(handled) == 2

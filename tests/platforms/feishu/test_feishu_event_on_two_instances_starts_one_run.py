"""Two FeishuChannels of one bot sharing a store: the same event_id delivered to both (a
retry landing on the other process) starts one run."""

from __future__ import annotations

from typing import Any

from channelkit.platforms.feishu import FeishuChannel
from channelkit.platforms.feishu.api import FeishuApi
from channelkit.state import MemoryStore
from channelkit.testing import ScriptedBridge, final
from feishu_helpers import channel_on, message_event, request


def _instance(rt: Any, api: FeishuApi, bridge: ScriptedBridge, store: Any) -> FeishuChannel:
    return channel_on(rt, api, bridge, store=store)


def test_an_event_reaching_two_instances_starts_one_run(rt: Any, api: FeishuApi) -> None:
    store = MemoryStore(namespace="bot")
    one, two = ScriptedBridge([final("ok")]), ScriptedBridge([final("ok")])
    a, b = _instance(rt, api, one, store), _instance(rt, api, two, store)
    try:
        event = message_event("hi", event_id="ev-shared")
        first = a.handle_event_request(request(event))
        second = b.handle_event_request(request(event, nonce="nonce-2"))
        assert first.status == 200 and second.status == 200
        assert first.after and not second.after
        first.run_after()
        assert one.wait_prompt(1)
        assert [text for _, text in one.prompts + two.prompts] == ["hi"]
    finally:
        a.close(timeout=2.0)
        b.close(timeout=2.0)

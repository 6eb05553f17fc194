"""Two TelegramChannels of one bot sharing a store: the same update_id delivered to both
(a webhook retry landing on the other process, two pollers) starts one run."""

from __future__ import annotations

import uuid
from typing import Any

from channelkit.core import ChannelConfig
from channelkit.http import RetryPolicy
from channelkit.platforms.telegram import TelegramChannel, TelegramConfig
from channelkit.platforms.telegram.api import TelegramApi
from channelkit.state import MemoryStore
from channelkit.testing import ScriptedBridge, final

from tests.platforms.telegram.tg_env import BASE, CHAT, OWNER, SECRET, TOKEN


def _update(update_id: int, text: str) -> dict[str, Any]:
    return {
        "update_id": update_id,
        "message": {
            "message_id": update_id,
            "date": 0,
            "chat": {"id": CHAT, "type": "private"},
            "from": {"id": OWNER, "is_bot": False, "first_name": "o"},
            "text": text,
        },
    }


def _instance(rt: Any, bridge: ScriptedBridge, store: Any) -> TelegramChannel:
    config = TelegramConfig(
        bot_token=TOKEN, webhook_secret=SECRET, api_base_url=BASE, ingress="webhook"
    )
    return TelegramChannel(
        config,
        bridge,
        channel_config=ChannelConfig(name="telegram", max_workers=8),
        api=TelegramApi(TOKEN, base_url=BASE, retry=RetryPolicy.never()),
        executor=rt.pool,
        run_executor=rt.run_pool,
        scheduler=rt.scheduler,
        store=store,
    )


def _deliver_to_both(rt: Any, store: Any) -> tuple[ScriptedBridge, ScriptedBridge, list[int]]:
    one, two = ScriptedBridge([final("ok")]), ScriptedBridge([final("ok")])
    a, b = _instance(rt, one, store), _instance(rt, two, store)
    update = _update(501, "hello")
    first, second = a.receive_update(update), b.receive_update(update)
    first.run_after()
    second.run_after()
    assert first.status == 200 and second.status == 200  # both acknowledged
    assert one.wait_prompt(1)
    return one, two, [len(first.after), len(second.after)]


def test_an_update_reaching_two_instances_starts_one_run(rt, mock) -> None:  # type: ignore[no-untyped-def]
    store = MemoryStore(namespace="bot")
    one, two, afters = _deliver_to_both(rt, store)
    assert afters[0] > 0 and afters[1] == 0  # the second copy hands nothing to the pool
    assert [text for _, text in one.prompts + two.prompts] == ["hello"]


def test_an_update_reaching_two_instances_through_redis_starts_one_run(  # type: ignore[no-untyped-def]
    rt, mock, redis_server
) -> None:
    from channelkit.state import RedisStore

    store = RedisStore(redis_server.url, namespace=f"tg-{uuid.uuid4().hex[:8]}")
    try:
        one, two, afters = _deliver_to_both(rt, store)
        assert afters[1] == 0
        assert [text for _, text in one.prompts + two.prompts] == ["hello"]
    finally:
        store.close()

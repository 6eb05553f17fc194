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


def _update(update_id: int, text: str, date: int = 0) -> dict[str, Any]:
    return {
        "update_id": update_id,
        "message": {
            "message_id": update_id,
            "date": date,
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


def test_a_redis_outage_tells_each_person_once_and_a_wiped_redis_replays_nothing(  # type: ignore[no-untyped-def]
    rt, mock, redis_server
) -> None:
    """Redis stopped: the updates are acknowledged, nothing runs, the sender is told
    MSG_STORE_UNAVAILABLE once (not per update). Redis restarted empty: the update sent
    before does not run on the other instance; a new one runs."""
    from channelkit.core.text import MSG_STORE_UNAVAILABLE
    from channelkit.state import RedisStore

    store = RedisStore(redis_server.url, namespace=f"tg-{uuid.uuid4().hex[:8]}")
    one, two = ScriptedBridge([final("ok")]), ScriptedBridge([final("ok")])
    a, b = _instance(rt, one, store), _instance(rt, two, store)
    try:
        before = _update(601, "before", date=int(a.clock.time()) - 5)
        a.receive_update(before).run_after()
        assert one.wait_prompt(1)
        redis_server.stop()
        try:
            for n in range(3):
                response = a.receive_update(_update(610 + n, f"lost {n}"))
                assert response.status == 200
                response.run_after()
            rt.settle()
            history = mock.request_history
            sent = [r.json()["text"] for r in history if r.path.endswith("/sendmessage")]
            assert sent.count(MSG_STORE_UNAVAILABLE) == 1
        finally:
            redis_server.start()  # empty
        b.receive_update(before).run_after()  # redelivered to the other instance
        rt.settle()
        assert two.prompts == []
        b.receive_update(_update(620, "after", date=int(b.clock.time()) + 1)).run_after()
        assert two.wait_prompt(1)  # new work resumes without a restart
        assert [text for _, text in two.prompts] == ["after"]
    finally:
        store.close()

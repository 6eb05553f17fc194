"""A Telegram run that spans a Redis failover is answered once and never started twice.

Two instances of one bot (two `TelegramChannel`s, each with its own `RedisStore`
connected through three real Sentinels on 127.0.0.1) share the state. An update starts
a run on the first; while the agent is still working the primary is killed (SIGKILL)
and the Sentinels promote the replica. The run then finishes and its answer is sent
once; the same update redelivered afterwards (a webhook retry reaching either instance)
starts nothing; a new update runs on the new primary.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from channelkit.core import ChannelConfig
from channelkit.http import RetryPolicy
from channelkit.platforms.telegram import TelegramChannel, TelegramConfig
from channelkit.platforms.telegram.api import TelegramApi
from channelkit.testing import ScriptedBridge, final, gate

from tests.platforms.telegram.tg_env import BASE, CHAT, OWNER, SECRET, TOKEN
from tests.state.sentinel_cluster import SERVICE, Cluster, replicate, running_cluster


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    with running_cluster(tmp_path) as made:
        yield made


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


def _sent(mock: Any) -> list[str]:
    return [r.json()["text"] for r in mock.request_history if r.path.endswith("/sendmessage")]


def test_a_run_spanning_a_failover_is_answered_once_and_not_started_again(  # type: ignore[no-untyped-def]
    rt, mock, cluster: Cluster
) -> None:
    from channelkit.state import RedisStore

    namespace = f"tg-ha-{uuid.uuid4().hex[:8]}"
    stores = [
        RedisStore(sentinels=cluster.addresses(), sentinel_service=SERVICE, namespace=namespace)
        for _ in range(2)
    ]
    working = threading.Event()
    one = ScriptedBridge([gate(working), final("answer one")])
    two = ScriptedBridge([final("answer two")])
    a, b = _instance(rt, one, stores[0]), _instance(rt, two, stores[1])
    try:
        first = a.receive_update(_update(701, "hello"))
        assert first.status == 200
        first.run_after()
        assert one.wait_prompt(1)  # the run is under way, waiting on its gate
        replicate(cluster)  # the update's first-delivery mark reached the replica

        cluster.kill(cluster.primary)
        cluster.wait_for_primary(cluster.replica)
        working.set()  # the agent finishes after the failover
        rt.settle()

        for instance in (b, a):  # the platform's retry of the same update, on either one
            again = instance.receive_update(_update(701, "hello"))
            assert again.status == 200
            again.run_after()
        rt.settle()
        assert [text for _, text in one.prompts] == ["hello"]
        assert two.prompts == []
        assert _sent(mock).count("answer one") == 1

        later = b.receive_update(_update(702, "after"))  # new work on the new primary
        later.run_after()
        assert two.wait_prompt(1)
        rt.settle()
        assert [text for _, text in two.prompts] == ["after"]
        assert _sent(mock).count("answer two") == 1
    finally:
        working.set()
        for store in stores:
            store.close()

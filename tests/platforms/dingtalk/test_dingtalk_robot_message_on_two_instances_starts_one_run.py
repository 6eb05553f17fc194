"""Two DingTalk instances sharing a store: one robot msgId delivered to both (an HTTP
retry or a Stream redelivery landing on the other process) starts one run."""

from __future__ import annotations

import threading

import pytest
from channelkit.core.text import MSG_STORE_UNAVAILABLE
from cluster_helpers import Bot
from dingtalk_helpers import ScriptBridge


@pytest.fixture
def bot():
    made = []

    def make(**kw):
        b = Bot(ScriptBridge, **kw)
        made.append(b)
        return b

    yield make
    for b in made:
        b.close()


def test_a_robot_message_reaching_two_instances_starts_one_run(bot) -> None:
    prompts: list[str] = []
    lock = threading.Lock()

    def script(bridge, session_id, text, sink):
        with lock:
            prompts.append(text)
        return "done"

    b = bot()
    one, two = b.instance(script), b.instance(script)
    payload = one.robot_payload("hello", msg_id="msg-shared-1")
    first = one.robot_request(payload)
    second = two.robot_request(payload)
    assert first.status == 200 and second.status == 200
    assert first.after and not second.after
    one.idle()
    two.idle()
    assert prompts == ["hello"]


def test_a_store_outage_acknowledges_a_robot_message_without_a_run(bot, caplog) -> None:
    b = bot(flaky=True)
    one = b.instance()
    b.store.down = True
    response = one.robot_request(one.robot_payload("hello", msg_id="msg-outage-1"))
    assert response.status == 200  # the ACK; its only work is the unavailable notice
    one.settle()
    assert b.api.texts() == [MSG_STORE_UNAVAILABLE]  # and no run: no echo
    assert any("dedup" in r.getMessage() for r in caplog.records if r.levelname == "ERROR")

"""Telegram: a queued person's notice is ONE message, edited in place (editMessageText)
as the runs ahead finish - at most once a second, on the fake clock - and to "Starting
now." when their run starts."""

from __future__ import annotations

import threading

from channelkit.agents.function import FunctionAgent
from channelkit.core import ChannelConfig
from channelkit.core.queue_notices import MSG_STARTING
from channelkit.core.text import format_queued
from channelkit.http import RetryPolicy
from channelkit.platforms.telegram import TelegramChannel, TelegramConfig
from channelkit.platforms.telegram.api import TelegramApi
from channelkit.testing import inbound, wait_until

from tests.platforms.telegram.tg_env import BASE, SECRET, TOKEN

WAIT = 10.0


def test_the_queue_notice_is_one_message_edited_as_the_queue_moves(rt, mock):
    names = ["1", "2", "3", "4"]  # chat ids (one person each)
    gates = {n: threading.Event() for n in names}
    started: list[str] = []
    lock = threading.Lock()

    def agent(turn):
        with lock:
            started.append(turn.text)
        assert gates[turn.text].wait(WAIT)
        return ""

    ch = TelegramChannel(
        TelegramConfig(
            bot_token=TOKEN, webhook_secret=SECRET, api_base_url=BASE, ingress="webhook"
        ),
        FunctionAgent(agent),
        channel_config=ChannelConfig(name="telegram", max_workers=8, max_concurrent_runs=1),
        api=TelegramApi(TOKEN, base_url=BASE, retry=RetryPolicy.never()),
        executor=rt.pool,
        run_executor=rt.run_pool,
        scheduler=rt.scheduler,
    )

    def calls(method: str) -> list[dict]:
        return [r.json() for r in mock.request_history if r.path.endswith("/" + method.lower())]

    def edits(chat: str) -> list[str]:
        return [e["text"] for e in calls("editMessageText") if str(e["chat_id"]) == chat]

    def finish(name: str, then: str) -> None:
        gates[name].set()
        wait_until(lambda: then in started, WAIT)
        assert rt.pool.wait_idle(WAIT)  # every move reached its notice

    try:
        handles = [
            ch.handle_inbound(inbound(n, sender_id=f"u{n}", chat_id=n, channel_name="telegram"))
            for n in names
        ]
        wait_until(lambda: len(calls("sendMessage")) == 3, WAIT)
        assert rt.pool.wait_idle(WAIT)
        notices = calls("sendMessage")
        assert sorted((str(m["chat_id"]), m["text"]) for m in notices) == [
            ("2", format_queued(0)),
            ("3", format_queued(1)),
            ("4", format_queued(2)),
        ]

        finish("1", then="2")
        assert edits("2") == [MSG_STARTING]  # its run started: finalized at once
        assert edits("3") == [] and edits("4") == []  # moved, but within the second
        rt.clock.advance(0.5)
        assert rt.pool.wait_idle(WAIT)
        assert edits("3") == [] and edits("4") == []
        rt.clock.advance(0.5)
        assert rt.pool.wait_idle(WAIT)
        assert edits("3") == [format_queued(0)] and edits("4") == [format_queued(1)]

        finish("2", then="3")
        finish("3", then="4")
        # 4 moved to 0 and then started within one second: no position edit between
        assert edits("3") == [format_queued(0), MSG_STARTING]
        assert edits("4") == [format_queued(1), MSG_STARTING]  # it started meanwhile
        gates["4"].set()
        assert [h.result(WAIT).status for h in handles] == ["completed"] * 4
        rt.clock.advance(2)
        rt.settle()
        assert edits("4") == [format_queued(1), MSG_STARTING]  # nothing after the final
        # each notice is edited in place: one message per chat, a different one each
        edited = {(str(e["chat_id"]), e["message_id"]) for e in calls("editMessageText")}
        assert len(edited) == 3 and {m for _, m in edited} <= {100, 101, 102}
        assert len({m for _, m in edited}) == 3
        assert len(calls("sendMessage")) == 3  # no second notice was sent
        assert ch.queue_notices.live == 0
    finally:
        for gate in gates.values():
            gate.set()
        ch.close(timeout=5)

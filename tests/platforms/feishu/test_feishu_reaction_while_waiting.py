"""Feishu's working (OnIt) reaction is removed while a run waits for the person and
added again once the request was answered (fake clock)."""

from __future__ import annotations

import threading
from typing import Any

import test_feishu_adapter as fa
from channelkit.platforms.feishu.api import FeishuApi
from channelkit.testing import wait_until
from feishu_helpers import FakeFeishu


def _ops(fake: FakeFeishu) -> list[str]:
    return [c.op for c in fake.calls if c.op in ("react", "unreact")]


def test_reaction_off_during_a_text_permission_prompt_and_back_after_approve(
    rt: Any, fake: FakeFeishu, api: FeishuApi
) -> None:
    release = threading.Event()
    script = fa.Script()

    def behaviour(turn: Any) -> str:
        turn.request_permission("Run ls")
        assert release.wait(5)
        return "done"

    script.behaviour = behaviour
    channel = fa.build(rt, api, script)
    try:
        handle = fa.inbound(channel)
        wait_until(lambda: channel.pending_request_ids() != [])
        wait_until(lambda: _ops(fake) == ["react", "unreact"])  # the person's turn
        for _ in range(3):
            rt.clock.advance(1.0)
            assert rt.pool.wait_idle(5.0)
        assert _ops(fake) == ["react", "unreact"]  # stays off while the prompt waits
        fa.inbound(channel, "/approve", message_id="om_in2")
        wait_until(lambda: channel.pending_request_ids() == [])
        rt.clock.advance(1.0)
        wait_until(lambda: _ops(fake) == ["react", "unreact", "react"])  # working again
        release.set()
        handle.result(5)
        rt.settle()
        assert _ops(fake) == ["react", "unreact", "react", "unreact"]
    finally:
        release.set()
        channel.close()

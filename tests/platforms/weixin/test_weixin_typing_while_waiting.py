"""Weixin typing is off while a permission prompt waits and on again after the answer."""

from __future__ import annotations

import threading

from channelkit.testing import ScriptedBridge, ask, chunk, gate, permission_request

from tests.platforms.weixin import test_weixin_adapter as wx

mock = wx.mock  # the iLink API on requests-mock (fixture)


def test_typing_off_while_a_prompt_waits_and_on_after_the_answer(rt, mock) -> None:  # type: ignore[no-untyped-def]
    release = threading.Event()
    steps = [ask(lambda s: permission_request("req-p", s)), chunk("Ran it."), gate(release)]
    env = wx.Env(rt, mock, ScriptedBridge(steps))
    env.channel.handle_weixin_message(wx.inbound("run it"))
    rt.wait_for(lambda: any("/approve" in t for t in env.texts()))
    rt.wait_for(lambda: env.statuses() == [1, 2])  # typing off: the person's turn
    for _ in range(3):
        rt.clock.advance(1.0)
        assert rt.pool.wait_idle(5.0)
    assert env.statuses() == [1, 2]  # stays off while the prompt waits
    env.channel.handle_weixin_message(wx.inbound("/approve"))
    rt.wait_for(lambda: env.channel.pending_request_ids() == [])
    rt.clock.advance(1.0)
    rt.wait_for(lambda: env.statuses() == [1, 2, 1])  # on again: the agent goes on
    release.set()
    rt.settle()
    assert env.statuses() == [1, 2, 1, 2]
    env.channel.close()

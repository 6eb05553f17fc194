"""The last segment's output card is finalized exactly once.

ChannelBase delivers the final response (``on_response_complete``) and then closes the
delivered segment through ``on_output_segment_end`` with reason ``completed``; the card
gets its terminal write from the first and nothing more from the second.
"""

from __future__ import annotations

from typing import Any

from channelkit.agents.function import FunctionAgent, Turn
from channelkit.core import InboundMessage, SegmentEndReason
from channelkit.platforms.feishu import FeishuChannel
from channelkit.platforms.feishu.api import FeishuApi
from channelkit.testing import wait_until
from feishu_helpers import FakeFeishu, channel_on


def build(rt: Any, api: FeishuApi, behaviour: Any, **overrides: Any) -> FeishuChannel:
    return channel_on(rt, api, FunctionAgent(behaviour, scheduler=rt.scheduler), **overrides)


def run_once(rt: Any, ch: FeishuChannel) -> list[Any]:
    ends: list[Any] = []
    original = ch.on_output_segment_end

    def recording(chat_id: str, session_id: str, segment: Any, reason: Any) -> None:
        ends.append(reason)
        original(chat_id, session_id, segment, reason)

    ch.on_output_segment_end = recording  # type: ignore[method-assign]
    handle = ch.handle_inbound(InboundMessage("feishu", "oc_chat", "ou_owner", "go", "om_in1"))
    assert handle.result(5.0).status == "completed"
    rt.settle()
    return ends


def terminal_writes(fake: FakeFeishu) -> list[Any]:
    """Every write that carries a terminal output card (CardKit update, PATCH, or a card
    sent already terminal)."""
    out = []
    for call in fake.calls:
        card = call.card
        if not card or call.op not in ("update_card", "patch", "send"):
            continue
        elements = card["body"]["elements"]
        if len(elements) < 2 or elements[1].get("element_id") != "ck_status":
            continue
        if any(e.get("tag") == "button" for e in elements):
            continue  # a running card
        out.append((call.op, elements[0]["content"], elements[1]["content"]))
    return out


def streaming(fake: FakeFeishu) -> Any:
    """An agent that says "Hello ", waits until its card is on screen, says "world"."""

    def behaviour(turn: Turn) -> str:
        turn.say("Hello ")
        wait_until(lambda: bool(fake.ops("send")))
        turn.say("world")
        return ""

    return behaviour


def test_cardkit_last_segment_is_finalized_once(rt: Any, api: FeishuApi, fake: FakeFeishu) -> None:
    ch = build(rt, api, streaming(fake))
    try:
        ends = run_once(rt, ch)
    finally:
        ch.close(timeout=2.0)
    assert ends == [SegmentEndReason.COMPLETED]
    assert terminal_writes(fake) == [("update_card", "Hello world", "*已完成*")]
    assert len(fake.ops("settings")) == 1  # streaming closed once


def test_patch_mode_last_segment_is_finalized_once(
    rt: Any, api: FeishuApi, fake: FakeFeishu
) -> None:
    fake.fail.add("create_card")  # no CardKit: the card is an IM message updated by PATCH
    ch = build(rt, api, streaming(fake))
    try:
        ends = run_once(rt, ch)
    finally:
        ch.close(timeout=2.0)
    assert ends == [SegmentEndReason.COMPLETED]
    assert terminal_writes(fake) == [("patch", "Hello world", "*已完成*")]


def test_a_response_given_only_at_the_end_is_one_completed_card(
    rt: Any, api: FeishuApi, fake: FakeFeishu
) -> None:
    ch = build(rt, api, lambda turn: "Only a final answer")
    try:
        run_once(rt, ch)
    finally:
        ch.close(timeout=2.0)
    # one terminal write, whichever way the card got there (streamed or sent terminal)
    ((_op, content, label),) = terminal_writes(fake)
    assert (content, label) == ("Only a final answer", "*已完成*")

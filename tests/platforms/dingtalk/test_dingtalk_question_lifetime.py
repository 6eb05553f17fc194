"""Question card lifetime = min(questionCard.timeoutMs, host permission lifetime).

The host lifetime is ``ChannelConfig.permission_timeout`` and, when the bridge exposes a
``permission_timeout`` (AcpBridge), the smaller of the two (core's
``permission_lifetime``). A card bound by the host lifetime ends ``EXPIRY_MARGIN``
before core's deadline (``context.expires_at``), so it is finalized expired first.
Fake clock, real ChannelBase.
"""

from __future__ import annotations

import pytest
from channelkit.core import ChannelConfig
from channelkit.platforms.common import EXPIRY_MARGIN
from dingtalk_helpers import ScriptBridge


def ask_script(bridge, sid, text, sink):
    bridge.ask(sink, sid, "req-1")
    return ""


def question_updates(h):
    return [c[1]["params"] for c in h.api.ops("update") if "card_status" in c[1]["params"]]


def live_card(h):
    def pending():
        record = h.channel.presenter.questions.record("req-1")
        return record is not None and record.state.state == "pending"

    h.send("ask")
    assert h.wait_for(pending)


def assert_expires_after(h, seconds):
    # The run is blocked in the question, so the pool is never idle: prove instead that
    # no timer became due (FakeClock.advance hands every due timer over before returning).
    timers = h.scheduler.pending_count()
    h.clock.advance(seconds - 0.5)
    assert h.scheduler.pending_count() == timers
    assert question_updates(h) == [] and h.bridge.responses == []
    h.clock.advance(0.5)
    assert h.wait_for(lambda: bool(h.bridge.responses) and bool(question_updates(h)))
    h.idle()
    assert question_updates(h) == [
        {
            "card_status": "expired",
            "question_desc": "This question expired. Please retry.",
            "form_btn_text": "Expired",
        }
    ]
    assert h.bridge.responses == [("req-1", {"outcome": {"outcome": "cancelled"}})]
    assert h.channel.map_sizes()["question_by_request"] == 0


def test_host_permission_timeout_shorter_than_card_timeout(adapter):
    config = ChannelConfig(name="dingtalk", model="qwen3.7-max", permission_timeout=60.0)
    h = adapter(ask_script, channel_config=config)
    assert h.channel.question_lifetime() == 60.0
    live_card(h)
    # the card expires (and cancels the request) before core's own 60 s timer fires
    assert_expires_after(h, 60.0 - EXPIRY_MARGIN)


def test_card_timeout_shorter_than_host(adapter):
    h = adapter(ask_script, cards={"questionCard": {"timeoutMs": 10_000}})
    assert h.channel.question_lifetime() == 10.0
    live_card(h)
    assert_expires_after(h, 10.0)


def test_bridge_permission_timeout_is_the_host_lifetime_when_smaller(adapter):
    bridge = ScriptBridge(ask_script)
    bridge.permission_timeout = 30.0  # like AcpBridge(permission_timeout=30)
    h = adapter(bridge=bridge)
    assert h.channel.question_lifetime() == 30.0
    live_card(h)
    assert_expires_after(h, 30.0 - EXPIRY_MARGIN)


@pytest.mark.parametrize(
    ("bridge_timeout", "expected"),
    [
        (None, 270.0),
        (1_000.0, 270.0),
        (45, 45.0),
        (0, 270.0),
        (-5, 270.0),
        (True, 270.0),
        (float("inf"), 270.0),
        (float("nan"), 270.0),
        ("30", 270.0),
    ],
)
def test_lifetime_ignores_unusable_bridge_values(adapter, bridge_timeout, expected):
    bridge = ScriptBridge(ask_script)
    if bridge_timeout is not None:
        bridge.permission_timeout = bridge_timeout
    h = adapter(bridge=bridge)  # ChannelConfig default permission_timeout: 300 s
    assert h.channel.question_lifetime() == expected


def test_replaced_bridge_counts_for_the_next_question(adapter):
    h = adapter(ask_script)
    assert h.channel.question_lifetime() == 270.0
    bridge = ScriptBridge(ask_script)
    bridge.permission_timeout = 20.0
    h.channel.set_bridge(bridge)
    h.bridge = bridge
    assert h.channel.question_lifetime() == 20.0


def test_card_deadline_comes_from_the_context_not_a_grace_window(adapter):
    """A neutral cancel just before the deadline is a cancellation, never relabelled."""
    config = ChannelConfig(name="dingtalk", model="qwen3.7-max", permission_timeout=60.0)
    h = adapter(ask_script, channel_config=config)
    live_card(h)
    record = h.channel.presenter.questions.record("req-1")
    pending = h.channel._requests.get("req-1")
    context = record.ctx
    assert context is not None and context.expires_at == pending.expires_at
    assert record.deadline == pending.expires_at - EXPIRY_MARGIN
    h.clock.advance(60.0 - EXPIRY_MARGIN - 0.25)  # 0.75 s before the card's own expiry
    assert h.wait_for(lambda: h.channel._requests.get("req-1") is pending)
    context.respond({"outcome": {"outcome": "cancelled"}})
    h.idle()
    assert [u["card_status"] for u in question_updates(h)] == ["cancelled"]

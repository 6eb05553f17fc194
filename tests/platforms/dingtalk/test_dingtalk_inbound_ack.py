"""DingTalk robot messages follow the shared ACK policy: busy -> 200, closed -> 503."""

from __future__ import annotations

from channelkit.core import ChannelBusy


def test_busy_channel_is_acknowledged_with_200(adapter, monkeypatch):
    h = adapter()

    def busy(*args, **kwargs):
        raise ChannelBusy("1000 runs already queued")

    monkeypatch.setattr(h.channel, "handle_inbound", busy)
    payload = h.robot_payload("hello", msg_id="msg-busy")
    response = h.robot_request(payload)
    assert response.status == 200
    assert h.channel.map_sizes()["owners"] == 0  # no run will consume the owner entry
    assert h.robot_request(payload).status == 200  # a redelivery is still a duplicate


def test_closed_channel_answers_503_and_forgets_the_message(adapter):
    h = adapter()
    h.channel.close(timeout=5)
    payload = h.robot_payload("hello", msg_id="msg-closed")
    assert h.robot_request(payload).status == 503
    sizes = h.channel.map_sizes()
    assert sizes["owners"] == 0 and sizes["seen"] == 0

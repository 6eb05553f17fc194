"""DingTalk: a queued person sees ONE queue card, updated in place as the runs ahead
finish (at most once a second, on the fake clock) and finalized "Starting now." when
their run starts; with status cards off the notice is one Markdown message."""

from __future__ import annotations

import threading

from channelkit.core import ChannelConfig
from channelkit.core.queue_notices import MSG_STARTING
from channelkit.core.text import format_queued
from channelkit.platforms.dingtalk import STATUS_CARD_TEMPLATE_ID
from dingtalk_helpers import AdapterHarness

WAIT = 10.0


class Gated:
    def __init__(self, names: list[str]) -> None:
        self.gates = {n: threading.Event() for n in names}
        self.started: list[str] = []
        self.lock = threading.Lock()

    def script(self, bridge, sid, text, sink):
        with self.lock:
            self.started.append(text)
        assert self.gates[text].wait(WAIT)
        return f"done {text}"

    def release_all(self) -> None:
        for gate in self.gates.values():
            gate.set()


def harness(gated: Gated, **kw) -> AdapterHarness:
    config = ChannelConfig(name="dingtalk", max_concurrent_runs=1)
    return AdapterHarness(gated.script, channel_config=config, **kw)


def queue_cards(h: AdapterHarness) -> dict[str, tuple[str, str]]:
    """chat -> (track, text at creation) of every queue card."""
    return {
        c[1]["target"].chat_id: (c[1]["out_track_id"], c[1]["params"]["content"])
        for c in h.api.ops("create")
        if c[1]["out_track_id"].startswith("ck-queue-")
    }


def card_writes(h: AdapterHarness, chat: str) -> list[tuple[str, object, str]]:
    """(content, flowStatus, statusLine) of the chat's queue card: creation, then updates."""
    track, _ = queue_cards(h)[chat]
    return [
        (c[1]["params"]["content"], c[1]["params"]["flowStatus"], c[1]["params"]["statusLine"])
        for c in h.api.ops()
        if c[0] in ("create", "update") and c[1]["out_track_id"] == track
    ]


def contents(h: AdapterHarness, chat: str) -> list[str]:
    return [content for content, _, _ in card_writes(h, chat)]


def test_the_queue_card_shows_the_position_going_down_and_then_starting_now():
    names = ["a", "b", "c", "d"]
    gated = Gated(names)
    h = harness(gated)

    def finish(name: str, then: str) -> None:
        gated.gates[name].set()
        h.wait_for(lambda: then in gated.started, WAIT)
        assert h.pool.wait_idle(WAIT)  # every move reached its card

    try:
        for n in names:
            h.send(n, sender=f"staff-{n}", chat=f"cid-{n}")
        h.wait_for(lambda: len(queue_cards(h)) == 3, WAIT)
        assert h.pool.wait_idle(WAIT)
        created = queue_cards(h)
        assert {chat: text for chat, (_, text) in created.items()} == {
            "cid-b": format_queued(0),
            "cid-c": format_queued(1),
            "cid-d": format_queued(2),
        }
        for call in h.api.ops("create"):
            if call[1]["out_track_id"].startswith("ck-queue-"):
                assert call[1]["template_id"] == STATUS_CARD_TEMPLATE_ID
                assert call[1]["params"]["flowStatus"] == 2
                assert call[1]["params"]["stop_action"] == "false"  # nothing to stop yet
        assert h.api.texts() == []  # no Markdown notice as well

        finish("a", then="b")
        assert card_writes(h, "cid-b")[-1] == (MSG_STARTING, 3, "Starting now")
        assert contents(h, "cid-c") == [format_queued(1)]  # moved within the second
        assert contents(h, "cid-d") == [format_queued(2)]
        h.clock.advance(0.5)
        assert h.pool.wait_idle(WAIT)
        assert contents(h, "cid-d") == [format_queued(2)]
        h.clock.advance(0.5)
        assert h.pool.wait_idle(WAIT)
        assert contents(h, "cid-c") == [format_queued(1), format_queued(0)]
        assert contents(h, "cid-d") == [format_queued(2), format_queued(1)]

        finish("b", then="c")
        assert contents(h, "cid-c")[-1] == MSG_STARTING
        assert contents(h, "cid-d") == [format_queued(2), format_queued(1)]
        h.clock.advance(1.0)
        assert h.pool.wait_idle(WAIT)
        assert contents(h, "cid-d") == [format_queued(2), format_queued(1), format_queued(0)]

        finish("c", then="d")
        gated.gates["d"].set()
        h.idle(WAIT)
        assert card_writes(h, "cid-d")[-1] == (MSG_STARTING, 3, "Starting now")
        # each run then streams on its own status card, as without a queue
        finals = [
            c[1]["params"]["content"]
            for c in h.api.finals()
            if not c[1]["out_track_id"].startswith("ck-queue-")
        ]
        assert sorted(finals) == [f"done {n}" for n in names]
        assert h.channel.queue_notices.live == 0
    finally:
        gated.release_all()
        h.close()


def test_with_status_cards_off_the_queue_notice_is_one_markdown_message():
    gated = Gated(["a", "b"])
    h = harness(gated, cards={"enabled": False})
    try:
        h.send("a", sender="staff-a", chat="cid-a")
        h.send("b", sender="staff-b", chat="cid-b")
        h.wait_for(lambda: format_queued(0) in h.api.texts(), WAIT)
        gated.release_all()
        h.idle(WAIT)
        h.clock.advance(2)
        h.idle(WAIT)
        assert h.api.texts().count(format_queued(0)) == 1
        assert MSG_STARTING not in h.api.texts()
        assert queue_cards(h) == {}
    finally:
        gated.release_all()
        h.close()

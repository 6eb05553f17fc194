"""The queue moves of one waiting run reach its notice as one call with the newest place.

Each run that starts moves every run behind it, so n people waiting make
n * (n + 1) / 2 moves, each a call of the channel's ``on_run_queued`` on the waiting
run's lane (2,080 calls for a burst of 64 people past the limit). A notice shows only
the newest place: while a call for a run is still waiting on (or running on) its lane,
later moves of that run are folded into one call that carries the place current when
it runs. Nothing is lost: the person's notice still ends at the right place.
"""

from __future__ import annotations

import threading

from channelkit.agents.function import FunctionAgent
from channelkit.core import ChannelConfig
from channelkit.core.types import RunQueuedEvent
from channelkit.runtime import FakeClock
from channelkit.testing import RecordingChannel, inbound, wait_until

WAIT = 10.0


class CountingChannel(RecordingChannel):
    """Records each ``on_run_queued`` call per chat; the first call for ``hold_chat``
    waits for ``release`` (its lane is busy while the queue moves)."""

    def __init__(self, *args, hold_chat: str, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.calls_lock = threading.Lock()
        self.calls: dict[str, list[tuple[bool, int]]] = {}
        self.hold_chat = hold_chat
        self.holding = threading.Event()
        self.release = threading.Event()

    def on_run_queued(self, event: RunQueuedEvent) -> None:
        with self.calls_lock:
            self.calls.setdefault(event.chat_id, []).append((event.first, event.ahead))
        if event.chat_id == self.hold_chat and event.first:
            self.holding.set()
            assert self.release.wait(WAIT)

    def seen(self, chat_id: str) -> list[tuple[bool, int]]:
        with self.calls_lock:
            return list(self.calls.get(chat_id, []))


def test_moves_made_while_the_notice_is_busy_arrive_as_one_call_with_the_newest_place():
    names = [f"p{i}" for i in range(6)]
    gates = {n: threading.Event() for n in names}
    started: list[str] = []
    lock = threading.Lock()

    def agent(turn):
        with lock:
            started.append(turn.text)
        assert gates[turn.text].wait(WAIT)
        return f"done {turn.text}"

    config = ChannelConfig(name="test", max_workers=4, max_concurrent_runs=1)
    ch = CountingChannel(config, FunctionAgent(agent), clock=FakeClock(), hold_chat="p5")
    try:
        handles = [ch.handle_inbound(inbound(n, sender_id=f"u-{n}", chat_id=n)) for n in names]
        assert ch.holding.wait(WAIT)  # p5's first notice (4 ahead) is on its lane
        for done, nxt in (("p0", "p1"), ("p1", "p2"), ("p2", "p3")):
            gates[done].set()
            wait_until(lambda nxt=nxt: nxt in started, WAIT)
        # p5 moved 4 -> 3 -> 2 -> 1 while its lane was busy
        ch.release.set()
        wait_until(lambda: len(ch.seen("p5")) >= 2, WAIT)
        assert ch.pool.wait_idle(WAIT)
        assert ch.seen("p5") == [(True, 4), (False, 1)]
        # p4, whose lane was free, saw its moves as they came
        assert ch.seen("p4")[0] == (True, 3) and ch.seen("p4")[-1] == (False, 0)
        for gate in gates.values():
            gate.set()
        assert [h.result(WAIT).status for h in handles] == ["completed"] * 6
    finally:
        for gate in gates.values():
            gate.set()
        ch.release.set()
        ch.close(timeout=5)

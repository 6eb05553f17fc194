"""A queued person's notice follows the queue: edited in place as runs ahead finish, at
most once a second (moves in between coalesced, on the scheduler's fake clock), and
finalized "Starting now." when the run starts."""

from __future__ import annotations

import threading
from itertools import pairwise
from types import SimpleNamespace

from channelkit.agents.function import FunctionAgent
from channelkit.core import ChannelConfig
from channelkit.core.queue_notices import MSG_STARTING, QueueNotices
from channelkit.core.text import MSG_QUEUE_DROPPED, format_queued
from channelkit.core.types import RunQueuedEvent
from channelkit.runtime import FakeClock, KeyedSerialQueue, Scheduler, WorkerPool
from channelkit.testing import RecordingChannel, inbound, wait_until

WAIT = 10.0


class EditingChannel(RecordingChannel):
    """A channel whose queue notice is a message it can edit (like Telegram's)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.notice_lock = threading.Lock()
        self.notices: dict[str, list[tuple[float, str]]] = {}  # chat -> (time, text)
        self.queue_notices: QueueNotices[str] = QueueNotices(
            self, show=self._show_notice, edit=self._edit_notice
        )

    def _show_notice(self, event: RunQueuedEvent, text: str) -> str:
        with self.notice_lock:
            self.notices[event.chat_id] = [(self.clock.now(), text)]
        return event.chat_id

    def _edit_notice(self, chat_id: str, text: str, final: bool) -> None:
        assert final == (text in (MSG_STARTING, MSG_QUEUE_DROPPED))
        with self.notice_lock:
            self.notices[chat_id].append((self.clock.now(), text))

    def texts(self, chat_id: str) -> list[str]:
        with self.notice_lock:
            return [text for _, text in self.notices.get(chat_id, [])]

    def on_run_queued(self, event: RunQueuedEvent) -> None:
        self.queue_notices.queued(event)

    def on_task_lifecycle(self, event) -> None:
        super().on_task_lifecycle(event)
        if event.type == "started":
            self.queue_notices.started(event.run_id)
        elif event.type.terminal:
            self.queue_notices.forget(event.run_id)


def gated(gates: dict[str, threading.Event], started: list[str], lock: threading.Lock):
    def agent(turn):
        with lock:
            started.append(turn.text)
        assert gates[turn.text].wait(WAIT)
        return f"done {turn.text}"

    return FunctionAgent(agent)


def test_the_position_shown_goes_down_at_most_once_a_second_then_says_starting():
    names = [f"p{i}" for i in range(5)]
    gates = {n: threading.Event() for n in names}
    started: list[str] = []
    lock = threading.Lock()
    clock = FakeClock()
    config = ChannelConfig(name="test", max_workers=4, max_concurrent_runs=1)
    ch = EditingChannel(config, gated(gates, started, lock), clock=clock)

    def finish(name: str, then: str) -> None:
        gates[name].set()
        wait_until(lambda: then in started, WAIT)
        assert ch.pool.wait_idle(WAIT)  # every move reached its notice

    try:
        handles = [ch.handle_inbound(inbound(n, sender_id=f"u-{n}", chat_id=n)) for n in names]
        wait_until(lambda: all(ch.texts(n) for n in names[1:]), WAIT)
        assert [ch.texts(n) for n in names[1:]] == [[format_queued(i)] for i in range(4)]
        assert ch.sent == []  # the default text notice was not sent as well

        finish("p0", then="p1")
        finish("p1", then="p2")
        assert ch.texts("p1")[-1] == MSG_STARTING and ch.texts("p2")[-1] == MSG_STARTING
        # p3 moved 2 -> 1 -> 0 and p4 3 -> 2 -> 1 in the same second as their notice
        assert ch.texts("p3") == [format_queued(2)]
        assert ch.texts("p4") == [format_queued(3)]
        clock.advance(0.5)
        assert ch.pool.wait_idle(WAIT)
        assert ch.texts("p4") == [format_queued(3)]
        clock.advance(0.5)
        assert ch.pool.wait_idle(WAIT)
        # one edit each, showing the newest position (the one in between coalesced)
        assert ch.texts("p3") == [format_queued(2), format_queued(0)]
        assert ch.texts("p4") == [format_queued(3), format_queued(1)]

        finish("p2", then="p3")
        assert ch.texts("p3")[-1] == MSG_STARTING  # finalized at once
        assert ch.texts("p4") == [format_queued(3), format_queued(1)]  # 1 s not over
        clock.advance(0.9)
        assert ch.pool.wait_idle(WAIT)
        assert ch.texts("p4") == [format_queued(3), format_queued(1)]
        clock.advance(0.1)
        assert ch.pool.wait_idle(WAIT)
        assert ch.texts("p4") == [format_queued(3), format_queued(1), format_queued(0)]

        finish("p3", then="p4")
        gates["p4"].set()
        assert [h.result(WAIT).status for h in handles] == ["completed"] * 5
        assert ch.texts("p4")[-1] == MSG_STARTING
        with ch.notice_lock:
            for chat, writes in ch.notices.items():
                updates = [t for t, text in writes if text != MSG_STARTING]
                gaps = [b - a for a, b in pairwise(updates)]
                assert all(gap >= 1.0 for gap in gaps), (chat, writes)
        assert ch.queue_notices.live == 0
    finally:
        for gate in gates.values():
            gate.set()
        ch.close(timeout=5)


def event(run_id: str, ahead: int, *, first: bool) -> RunQueuedEvent:
    return RunQueuedEvent("test", "chat", "s", run_id, None, None, ahead, first)


def notices_on_fake_clock():
    clock = FakeClock()
    pool = WorkerPool(2, name="notices-test")
    channel = SimpleNamespace(
        name="test",
        clock=clock,
        scheduler=Scheduler(pool, clock=clock),
        lanes=KeyedSerialQueue(pool),
    )
    writes: list[tuple[float, str]] = []

    def show(_event: RunQueuedEvent, text: str) -> str:
        writes.append((clock.now(), text))
        return "notice"

    def edit(_handle: str, text: str, final: bool) -> None:
        assert final == (text in (MSG_STARTING, MSG_QUEUE_DROPPED))
        writes.append((clock.now(), text))

    notices: QueueNotices[str] = QueueNotices(channel, show=show, edit=edit)  # type: ignore[arg-type]
    return notices, clock, pool, writes


def test_a_burst_of_moves_is_one_update_per_second_with_the_newest_position():
    notices, clock, pool, writes = notices_on_fake_clock()
    try:
        notices.queued(event("r", 500, first=True))
        for ahead in range(499, 99, -1):  # 400 runs ahead finish within the first second
            notices.queued(event("r", ahead, first=False))
        notices.queued(event("r", 300, first=False))  # stale (it arrived late): ignored
        assert [text for _, text in writes] == [format_queued(500)]
        clock.advance(1.0)
        assert pool.wait_idle(WAIT)
        assert [text for _, text in writes] == [format_queued(500), format_queued(100)]
        for second in range(1, 6):  # 20 more finish each second
            for step in range(20):
                notices.queued(event("r", 100 - 20 * (second - 1) - step - 1, first=False))
            clock.advance(0.25)
            assert pool.wait_idle(WAIT)
            clock.advance(0.75)
            assert pool.wait_idle(WAIT)
        shown = [text for _, text in writes]
        assert shown == [format_queued(500)] + [format_queued(n) for n in (100, 80, 60, 40, 20, 0)]
        times = [t for t, _ in writes]
        assert all(b - a >= 1.0 for a, b in pairwise(times))
        notices.started("r")
        assert writes[-1][1] == MSG_STARTING and notices.live == 0
        clock.advance(5)
        assert pool.wait_idle(WAIT)
        assert writes[-1][1] == MSG_STARTING  # nothing after the final text
    finally:
        notices.close()
        pool.shutdown(timeout=5)


def test_a_move_that_arrives_before_the_first_notice_is_not_lost():
    """With a deferred ACK the first notice is posted after the ACK: a run ahead may
    finish in between, and its move reaches the lane first."""
    notices, clock, pool, writes = notices_on_fake_clock()
    try:
        notices.queued(event("r", 2, first=False))
        notices.queued(event("r", 3, first=True))
        assert [text for _, text in writes] == [format_queued(2)]
        notices.forget("r")  # it ended without starting: the notice says so, once
        clock.advance(2)
        assert pool.wait_idle(WAIT)
        assert [text for _, text in writes] == [format_queued(2), MSG_QUEUE_DROPPED]
        assert notices.live == 0
    finally:
        notices.close()
        pool.shutdown(timeout=5)


def test_a_notice_that_could_only_be_sent_as_text_is_never_edited():
    clock = FakeClock()
    pool = WorkerPool(1, name="notices-test")
    channel = SimpleNamespace(
        name="test", clock=clock, scheduler=Scheduler(pool, clock=clock), lanes=None
    )
    edits: list[str] = []
    notices: QueueNotices[str] = QueueNotices(
        channel,  # type: ignore[arg-type]
        show=lambda _e, _t: None,
        edit=lambda _h, text, _final: edits.append(text),
    )
    try:
        notices.queued(event("r", 3, first=True))
        notices.queued(event("r", 1, first=False))
        clock.advance(2)
        notices.started("r")
        assert edits == [] and notices.live == 0
    finally:
        pool.shutdown(timeout=5)

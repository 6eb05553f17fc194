from __future__ import annotations

import threading

from channelkit.platforms.telegram.indicators import TypingKeepAlive


class Sends:
    def __init__(self, fail: bool = False) -> None:
        self.calls: list[tuple[object, object]] = []
        self.fail = fail
        self.lock = threading.Lock()

    def __call__(self, chat_id: object, thread_id: object) -> None:
        with self.lock:
            self.calls.append((chat_id, thread_id))
        if self.fail:
            raise RuntimeError("network down")


def make(rt, sends):  # type: ignore[no-untyped-def]
    return TypingKeepAlive(sends, scheduler=rt.scheduler, submit=rt.pool.post, interval_s=4.0)


def test_started_types_now_and_every_4s_until_stopped(rt) -> None:  # type: ignore[no-untyped-def]
    sends = Sends()
    ka = make(rt, sends)
    ka.start("c1", "run-1")
    rt.settle()
    assert sends.calls == [("c1", None)]
    rt.advance(3.9)
    assert len(sends.calls) == 1
    rt.advance(0.1)
    assert len(sends.calls) == 2
    rt.advance(4)
    assert len(sends.calls) == 3
    ka.stop("c1", "run-1")
    rt.advance(4)
    rt.advance(4)
    assert len(sends.calls) == 3
    assert ka.active_chats() == 0
    assert rt.scheduler.pending_count() == 0


def test_two_runs_in_one_chat_keep_one_keepalive(rt) -> None:  # type: ignore[no-untyped-def]
    sends = Sends()
    ka = make(rt, sends)
    ka.start("c1", "run-1")
    ka.start("c1", "run-2")
    rt.settle()
    assert len(sends.calls) == 1
    assert rt.scheduler.pending_count() == 1
    rt.advance(4)
    assert len(sends.calls) == 2  # one interval, not two
    ka.stop("c1", "run-1")
    rt.advance(4)
    assert len(sends.calls) == 3  # still typing: run-2 is active
    ka.stop("c1", "run-2")
    ka.stop("c1", "run-2")  # repeated terminal event: no-op
    rt.advance(4)
    assert len(sends.calls) == 3
    assert ka.active_chats() == 0


def test_chats_are_independent_and_close_cancels_all(rt) -> None:  # type: ignore[no-untyped-def]
    sends = Sends()
    ka = make(rt, sends)
    ka.start("c1", "r1")
    ka.start("c2", "r2", thread_id=9)
    rt.settle()
    assert sorted(map(str, sends.calls)) == sorted(map(str, [("c1", None), ("c2", 9)]))
    ka.close()
    rt.advance(8)
    assert len(sends.calls) == 2
    assert rt.scheduler.pending_count() == 0


def test_send_failures_never_stop_or_raise(rt) -> None:  # type: ignore[no-untyped-def]
    sends = Sends(fail=True)
    ka = make(rt, sends)
    ka.start("c1", "r1")
    rt.settle()
    rt.advance(4)
    assert len(sends.calls) == 2
    ka.stop("c1", "r1")

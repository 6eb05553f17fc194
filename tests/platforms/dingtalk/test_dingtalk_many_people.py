"""DingTalk under real concurrency: many people submitting question cards at once with a
Card API that takes real time, and the whole card contract with every pool at one worker.

A watchdog dumps every thread's stack and fails the test if a batch stalls: the old
model deadlocked here (all workers blocked on projection queues whose drain task was
queued behind them) and only the 45 s queue timeout got it moving again.
"""

from __future__ import annotations

import faulthandler
import sys
import threading
import time

import pytest
from dingtalk_helpers import AdapterHarness, stop_payload, submit_payload

STALL = 5.0  # a batch that is not done by then is a stall, not slowness


def question_script(bridge, sid, text, sink):
    sink.text_chunk(sid, f"checking {text}")
    bridge.ask(sink, sid, f"req-{text}")
    sink.text_chunk(sid, f"answer for {text}")
    return f"checking {text}answer for {text}"


def finals(h):
    """The content of every card put in its terminal state (a card shown running and
    then finished, or one created finished because its segment ended first)."""
    return [c[1]["params"].get("content") for c in h.api.finals()]


class Watchdog:
    """Fails (after dumping all stacks) when ``done`` is not set within ``STALL`` s."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.stalled = False
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        if not self.done.wait(STALL):
            self.stalled = True
            faulthandler.dump_traceback(file=sys.stderr, all_threads=True)

    def finish(self) -> None:
        self.done.set()
        self._thread.join(1)
        assert not self.stalled, "a batch stalled: see the stacks dumped above"


def submit_batch(people: int) -> float:
    """``people`` people with live question cards submit at the same moment; returns the
    batch's wall time. Asserts every answer is delivered once, on its own card."""
    h = AdapterHarness(question_script, run_pool_size=people + 8)
    h.api.latency = 0.02
    try:
        names = [f"p{i}" for i in range(people)]
        for name in names:
            h.send(name, sender=f"staff-{name}", chat=f"cid-{name}")
        assert h.wait_for(lambda: len(h.question_tracks()) == people, 30)
        tracks = set(h.question_tracks())
        owners = {}  # each card belongs to the person whose group chat it is in
        for call in h.api.ops("create"):
            if call[1]["out_track_id"] in tracks:
                chat = call[1]["target"].chat_id
                owners[call[1]["out_track_id"]] = "staff-" + chat.removeprefix("cid-")
        barrier = threading.Barrier(people)
        statuses: list[int] = []
        lock = threading.Lock()

        def submit(track: str) -> None:
            barrier.wait(10)
            resp = h.card_request(submit_payload(track, actor=owners[track]))
            with lock:
                statuses.append(resp.status)

        dog = Watchdog()
        start = time.monotonic()
        threads = [threading.Thread(target=submit, args=(t,)) for t in tracks]
        for t in threads:
            t.start()
        deadline = start + STALL  # one deadline for all: a hung ACK fails within 5 s
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))
        assert not any(t.is_alive() for t in threads), "a card ACK stalled"
        assert h.wait_for(lambda: len(h.bridge.responses) == people, STALL)
        assert h.wait_for(
            lambda: sum(1 for f in finals(h) if f and f.startswith("answer for")) == people,
            STALL,
        )
        elapsed = time.monotonic() - start
        dog.finish()
        h.idle(STALL)
        assert statuses == [200] * people
        delivered = [f for f in finals(h) if f and f.startswith("answer for")]
        assert sorted(delivered) == sorted(f"answer for {n}" for n in names)  # once each
        assert h.api.texts() == []  # no Markdown fallback, so nothing twice
        submitted = [
            c for c in h.api.ops("update") if c[1]["params"].get("card_status") == "submitted"
        ]
        assert len(submitted) == people
        return elapsed
    finally:
        h.close()


@pytest.mark.parametrize(("people", "batches"), [(8, 10), (32, 2), (128, 1)])
def test_simultaneous_question_submits_are_answered_once_on_their_cards(people, batches):
    times = [submit_batch(people) for _ in range(batches)]
    print(f"{people} simultaneous submits: worst batch {max(times):.3f}s of {batches}")


def stop_script(bridge, sid, text, sink):
    sink.text_chunk(sid, f"working on {text}")
    assert bridge.wait_cancel(sid, 10)
    return ""


def test_every_pool_at_one_worker_still_completes_the_card_contract():
    """Liveness: hook pool and run pool each have ONE worker. Streaming, a question and
    its continuation, Stop, expiry and close all complete."""

    def script(bridge, sid, text, sink):
        if text == "stop me":
            return stop_script(bridge, sid, text, sink)
        if text == "let it expire":
            sink.text_chunk(sid, "asking")
            bridge.ask(sink, sid, "req-expire", wait=False)
            assert bridge.answered["req-expire"].wait(10)
            return "asking"
        return question_script(bridge, sid, text, sink)

    h = AdapterHarness(script, pool_size=1, run_pool_size=1)
    try:
        dog = Watchdog()
        # stream -> question -> submit -> continuation card
        h.send("alpha")
        assert h.wait_for(lambda: len(h.question_tracks()) == 1, STALL)
        h.card_request(submit_payload(h.question_tracks()[0]))
        assert h.wait_for(lambda: "answer for alpha" in finals(h), STALL)
        # Stop cancels exactly its run
        h.send("stop me")
        assert h.wait_for(lambda: len(h.status_tracks()) == 3, STALL)
        h.card_request(stop_payload(h.status_tracks()[-1]))
        assert h.wait_for(lambda: bool(h.bridge.cancelled), STALL)
        # expiry on the fake clock
        h.send("let it expire")
        assert h.wait_for(lambda: len(h.question_tracks()) == 2, STALL)
        h.clock.advance(400)
        assert h.wait_for(lambda: any(r[0] == "req-expire" for r in h.bridge.responses), STALL)
        dog.finish()
        h.idle(STALL)
        statuses = [
            c[1]["params"].get("card_status")
            for c in h.api.ops("update")
            if "card_status" in c[1]["params"]
        ]
        assert statuses == ["submitted", "expired"]
        assert h.api.texts() == []
    finally:
        started = time.monotonic()
        h.close()
        assert time.monotonic() - started < STALL


def test_a_late_card_never_repeats_an_answer_already_sent_as_markdown():
    """The final card write waits behind a hung card call: after the wait gives up the
    answer goes out as Markdown, and the card, when it finally gets written, says the
    answer was sent below instead of repeating it."""
    from channelkit.platforms.dingtalk.output import ANSWER_SENT_BELOW

    def script(bridge, sid, text, sink):
        sink.text_chunk(sid, "the answer")
        # The card's opening write is in flight on a pool worker before the run ends: a
        # run thread that found the queue idle would otherwise run that write itself and
        # hang in it, which is a different fault than this test's.
        h.wait_for(lambda: any(op == "stream" for op, _ in h.api.calls), STALL)
        return "the answer"

    h = AdapterHarness(script)
    try:
        h.channel.presenter._wait_timeout = 0.2  # the fault path, made short
        hung = threading.Event()
        h.api.gates["stream"] = hung  # the card's stream writes hang
        h.send("go")
        assert h.wait_for(lambda: "the answer" in h.api.texts(), STALL)
        hung.set()
        h.idle(STALL)
        # the released card write lands on its own lane: wait for it, bounded
        h.wait_for(lambda: [c for c in finals(h) if c], STALL)
        assert h.api.texts() == ["the answer"]  # once, as Markdown
        final_contents = [c for c in finals(h) if c]
        assert "the answer" not in final_contents
        assert final_contents == [ANSWER_SENT_BELOW]
    finally:
        hung.set()
        h.close()

"""DingTalk adapter benchmarks (fake clock for writes, real threads for ACK latency).

1. Status-card writes per output segment versus chunk rate (10, 100, 1,000 chunks/s for
   10 s of fake time) beside a naive write-per-chunk baseline. Target: Card OpenAPI
   streaming writes <= ceil(T / 0.5 s) + 3 regardless of the chunk rate.
2. Card callback ACK latency (p50 / p99) of ``DingtalkChannel.handle_card_request``
   under 200 concurrent submit callbacks whose responder is slow (50 ms), served one at a
   time (1 web thread), by a 16-thread pool (a threaded WSGI server) and by 200 threads
   released at once. Target: p99 under 5 ms in process.

Run: ``python benchmarks/bench_dingtalk.py``
"""

from __future__ import annotations

import gc
import json
import math
import statistics
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from channelkit.ingress import Headers, IngressRequest
from channelkit.platforms.dingtalk import DingtalkChannel, DingtalkConfig
from channelkit.platforms.dingtalk.output import DingtalkPresenter
from channelkit.runtime import FakeClock, Scheduler, WorkerPool


class CountingApi:
    def __init__(self, latency: float = 0.0) -> None:
        self.counts: dict[str, int] = {}
        self.lock = threading.Lock()
        self.latency = latency

    def _hit(self, op: str) -> None:
        with self.lock:
            self.counts[op] = self.counts.get(op, 0) + 1
        if self.latency:
            time.sleep(self.latency)

    def create_and_deliver(self, *a: Any, **k: Any) -> None:
        self._hit("create")

    def stream(self, *a: Any, **k: Any) -> None:
        self._hit("stream")

    def update_instance(self, *a: Any, **k: Any) -> None:
        self._hit("update")

    def send_group_markdown(self, *a: Any, **k: Any) -> None:
        self._hit("group")

    def send_direct_markdown(self, *a: Any, **k: Any) -> None:
        self._hit("direct")

    def send_webhook_markdown(self, *a: Any, **k: Any) -> None:
        self._hit("webhook")


@dataclass(frozen=True)
class _Owner:
    id: str


@dataclass(frozen=True)
class _Target:
    chat_id: str
    sender_id: str
    is_group: bool = True
    channel_name: str = "dingtalk"
    thread_id: str | None = None


@dataclass(frozen=True)
class _Segment:
    session_id: str
    run_id: str
    segment_id: str
    owner: _Owner
    target: _Target


@dataclass(frozen=True)
class _Question:
    answer_key: str
    header: str
    question: str
    options: tuple[tuple[str, str], ...]
    multi_select: bool = False


_RESPONDED: list[str] = []
_RESPONDED_LOCK = threading.Lock()


@dataclass
class _Ctx:
    request_id: str
    session_id: str
    run_id: str
    owner: _Owner
    target: _Target
    delay: float
    questions: tuple[_Question, ...] = (
        _Question("0", "Region", "Which region?", (("Beijing", ""), ("Shanghai", ""))),
    )
    submit_option_id: str = "proceed_once"
    listeners: list[Any] = field(default_factory=list)

    def respond(self, response: Any) -> bool:
        time.sleep(self.delay)  # a slow agent bridge
        with _RESPONDED_LOCK:
            _RESPONDED.append(self.request_id)
        return True

    def on_settled(self, listener: Any) -> Any:
        self.listeners.append(listener)
        return lambda: None


def writes_per_segment(rate: int, seconds: float = 10.0) -> tuple[int, int]:
    clock = FakeClock()
    scheduler = Scheduler(None, clock=clock)  # timers fire inside clock.advance()
    api = CountingApi()
    presenter = DingtalkPresenter(
        api,  # type: ignore[arg-type]
        clock=clock,
        scheduler=scheduler,
        submit=lambda fn: fn(),
        send_fallback=lambda *a: None,
        cancel_run=lambda s, r: True,
        question_cards=False,
    )
    presenter.register_run("run", "session", "owner", "cid", True)
    segment = _Segment("session", "run", "segment", _Owner("owner"), _Target("cid", "owner"))
    total = int(rate * seconds)
    step = 1.0 / rate
    for i in range(total):
        presenter.append_output(segment, f"token-{i} ")
        clock.advance(step)
    presenter.close_output(segment, "", "completed")
    scheduler.stop()
    return api.counts.get("stream", 0), api.counts.get("stream", 0) + api.counts.get("update", 0)


def ack_latency(
    callbacks: int = 200, responder_delay: float = 0.05, web_threads: int | None = None
) -> tuple[float, float, float]:
    """ACK latency of ``callbacks`` concurrent submits.

    ``web_threads=None`` releases one thread per callback at once (a barrier); otherwise
    the callbacks are served by a pool of ``web_threads`` handler threads, like a
    threaded WSGI server (all enqueued at once; latency = handler time per request).
    """
    api = CountingApi(latency=0.005)
    pool = WorkerPool(16)

    class Bridge:
        def prompt(self, session_id: str, text: str, sink: Any) -> str:
            return ""

        def cancel_session(self, session_id: str) -> bool:
            return True

        def respond_to_permission(self, request_id: str, response: Any) -> bool:
            return True

        def close(self) -> None:
            pass

    channel = DingtalkChannel(
        DingtalkConfig("ding", "secret", interactive_cards={}),  # type: ignore[arg-type]
        Bridge(),
        api=api,  # type: ignore[arg-type]
        executor=pool,
    )
    presenter = channel.presenter
    assert presenter is not None
    tracks = []
    for i in range(callbacks):
        run, owner = f"run-{i}", f"user-{i}"
        presenter.register_run(run, f"s-{i}", owner, "cid", True)
        ctx = _Ctx(f"req-{i}", f"s-{i}", run, _Owner(owner), _Target("cid", owner), responder_delay)
        assert presenter.present_input(ctx) == "presented"  # type: ignore[arg-type]
        record = presenter.questions.record(f"req-{i}")  # type: ignore[union-attr]
        assert record is not None
        tracks.append((record.out_track_id, owner))
    barrier = threading.Barrier(callbacks if web_threads is None else 1)
    # Start the burst from a collected heap: a full (gen 2) collection of the benchmark
    # process's own objects costs ~12 ms and would land on whichever handler runs then.
    gc.collect()
    latencies: list[float] = []
    lock = threading.Lock()

    def deliver(track: str, owner: str) -> None:
        body = json.dumps(
            {
                "outTrackId": track,
                "userId": owner,
                "content": json.dumps(
                    {
                        "cardPrivateData": {
                            "actionIds": ["submit"],
                            "params": {"form": {"0": "Beijing"}},
                        }
                    }
                ),
            }
        ).encode()
        request = IngressRequest("POST", "/dingtalk/card", Headers({}), body)
        barrier.wait()
        start = time.perf_counter()
        response = channel.handle_card_request(request)
        elapsed = time.perf_counter() - start
        assert response.status == 200
        with lock:
            latencies.append(elapsed * 1000.0)
        # what a WSGI server does once the ACK is written: start the deferred work
        # (the slow responder and the card update run on the pool from here)
        response.run_after()

    if web_threads is None:
        threads = [threading.Thread(target=deliver, args=t) for t in tracks]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
    else:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(web_threads) as web:
            for future in [web.submit(deliver, *t) for t in tracks]:
                future.result(30)
    pool.wait_idle(60)
    with _RESPONDED_LOCK:
        responded = len(_RESPONDED)
        _RESPONDED.clear()
    assert responded == callbacks, f"{responded} of {callbacks} responders ran"
    channel.close(timeout=10)
    latencies.sort()
    p50 = statistics.median(latencies)
    p99 = latencies[max(0, math.ceil(0.99 * len(latencies)) - 1)]
    return p50, p99, max(latencies)


def main() -> None:
    seconds = 10.0
    bound = math.ceil(seconds / 0.5) + 3
    print("DingTalk status card: writes per segment (10 s of fake time)")
    print(
        f"{'chunks/s':>9} {'chunks':>7} {'naive writes':>13} {'stream writes':>14} "
        f"{'all card writes':>16} {'bound':>6}"
    )
    for rate in (10, 100, 1_000):
        streams, writes = writes_per_segment(rate, seconds)
        naive = int(rate * seconds)
        print(f"{rate:>9} {naive:>7} {naive:>13} {streams:>14} {writes:>16} {bound:>6}")
        assert streams <= bound, (rate, streams)
    print()
    print("DingTalk card callback ACK latency, 200 concurrent submits, 50 ms responder")
    for label, web_threads in (
        ("1 web thread", 1),
        ("16 web threads", 16),
        ("200 threads at once", None),
    ):
        p50, p99, worst = ack_latency(web_threads=web_threads)
        print(f"{label:>20}: p50 {p50:.3f} ms   p99 {p99:.3f} ms   max {worst:.3f} ms")


if __name__ == "__main__":
    main()

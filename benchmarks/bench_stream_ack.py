"""DingTalk Stream mode: callback ACK latency and reconnect time, beside the HTTP path.

1. Stream ACK latency (p50 / p99): 200 card submit callbacks sent at once as CALLBACK
   frames over a real WebSocket (the emulator's gateway on 127.0.0.1) to a Stream mode
   ``DingtalkChannel`` whose responders are slow (50 ms each). Measured on the client
   from "frame received" (the read returned) to "ACK written" (the send returned);
   frames are read one at a time on the connection's thread. Also the gateway's round
   trip (frame sent -> ACK read), which includes waiting behind the other 199 frames.
2. The HTTP path's figure in the same run: ``bench_dingtalk.ack_latency`` (the same 200
   slow-responder submits through ``handle_card_request`` on 16 web threads).
3. Reconnect time after a dropped socket (p50 / p99 of 20 drops): from the drop to the
   new connection accepted by the gateway (a new ``open`` call, ticket and handshake),
   with the backoff wait injected as zero; the default backoff adds 0.25-0.5 s to the
   first retry.

Run: ``python benchmarks/bench_stream_ack.py``
"""

from __future__ import annotations

import gc
import json
import math
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

from bench_dingtalk import _RESPONDED, _RESPONDED_LOCK, CountingApi, _Ctx, _Owner, _Target
from bench_dingtalk import ack_latency as http_ack_latency
from channelkit.platforms.dingtalk import DingtalkChannel, DingtalkConfig
from channelkit.platforms.dingtalk.stream import CARD_TOPIC
from channelkit.playground.stream_gateway import StreamGateway
from channelkit.runtime import WorkerPool

CALLBACKS = 200
RESPONDER_DELAY = 0.05


def _percentiles(values: list[float]) -> tuple[float, float]:
    ordered = sorted(values)
    return statistics.median(ordered), ordered[max(0, math.ceil(0.99 * len(ordered)) - 1)]


class StreamApi(CountingApi):
    """The benchmark's counting API plus the gateway's open call."""

    def __init__(self, gateway: StreamGateway) -> None:
        super().__init__(latency=0.005)
        self.gateway = gateway

    def open_stream_connection(self, client_secret: str, topics: Any) -> tuple[str, str]:
        return self.gateway.open(topics)


class _Bridge:
    def prompt(self, session_id: str, text: str, sink: Any) -> str:
        return ""

    def cancel_session(self, session_id: str) -> bool:
        return True

    def respond_to_permission(self, request_id: str, response: Any) -> bool:
        return True

    def close(self) -> None:
        pass


def _channel(gateway: StreamGateway, pool: WorkerPool) -> DingtalkChannel:
    return DingtalkChannel(
        DingtalkConfig("ding", "secret", interactive_cards={}),  # type: ignore[arg-type]
        _Bridge(),
        api=StreamApi(gateway),  # type: ignore[arg-type]
        executor=pool,
        stream_options={"wait": lambda stop, seconds: stop.is_set()},
    )


def stream_ack_latency() -> tuple[float, float, float, float]:
    """(client p50, client p99, gateway round trip p50, p99) in milliseconds."""
    gateway = StreamGateway("ding", ack_timeout=60.0)
    pool = WorkerPool(16)
    channel = _channel(gateway, pool)
    presenter = channel.presenter
    stream = channel.stream
    assert presenter is not None and stream is not None
    payloads = []
    for i in range(CALLBACKS):
        run, owner = f"run-{i}", f"user-{i}"
        presenter.register_run(run, f"s-{i}", owner, "cid", True)
        ctx = _Ctx(f"req-{i}", f"s-{i}", run, _Owner(owner), _Target("cid", owner), RESPONDER_DELAY)
        assert presenter.present_input(ctx) == "presented"  # type: ignore[arg-type]
        record = presenter.questions.record(f"req-{i}")  # type: ignore[union-attr]
        assert record is not None
        form = {"form": {"0": "Beijing"}}
        content = {"cardPrivateData": {"actionIds": ["submit"], "params": form}}
        payloads.append(
            {"outTrackId": record.out_track_id, "userId": owner, "content": json.dumps(content)}
        )
    started: dict[str, float] = {}
    latencies: list[float] = []
    lock = threading.Lock()
    handle, send_frame = stream.handle_frame, stream.send_frame

    def timed_handle(raw: str | bytes, send: Callable[[str], None]) -> str | None:
        frame = json.loads(raw)
        with lock:
            started[frame["headers"]["messageId"]] = time.perf_counter()
        return handle(raw, send)

    def timed_send(send: Callable[[str], None], message_id: str, text: str) -> None:
        send_frame(send, message_id, text)
        done = time.perf_counter()
        with lock:
            latencies.append((done - started[message_id]) * 1000.0)

    stream.handle_frame = timed_handle  # type: ignore[method-assign]
    stream.send_frame = timed_send  # type: ignore[method-assign]
    stream.start()
    assert gateway.wait_connected(10)
    barrier = threading.Barrier(CALLBACKS)
    round_trips: list[float] = []

    def deliver(payload: dict[str, Any]) -> None:
        barrier.wait()
        start = time.perf_counter()
        _, ack = gateway.deliver(CARD_TOPIC, payload)
        elapsed = (time.perf_counter() - start) * 1000.0
        assert ack is not None and ack.code == 200, ack
        with lock:
            round_trips.append(elapsed)

    gc.collect()
    threads = [threading.Thread(target=deliver, args=(p,)) for p in payloads]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    pool.wait_idle(60)
    with _RESPONDED_LOCK:
        responded = len(_RESPONDED)
        _RESPONDED.clear()
    assert responded == CALLBACKS, f"{responded} of {CALLBACKS} responders ran"
    assert len(latencies) == CALLBACKS
    channel.close(timeout=10)
    gateway.close()
    return (*_percentiles(latencies), *_percentiles(round_trips))


def reconnect_time(drops: int = 20) -> tuple[float, float]:
    """(p50, p99) milliseconds from a dropped socket to the new connection."""
    gateway = StreamGateway("ding")
    pool = WorkerPool(4)
    channel = _channel(gateway, pool)
    assert channel.stream is not None
    channel.stream.start()
    assert gateway.wait_connected(10)
    times: list[float] = []
    for n in range(2, drops + 2):
        start = time.perf_counter()
        assert gateway.drop()
        assert gateway.wait_connected(10, connections=n)
        times.append((time.perf_counter() - start) * 1000.0)
    channel.close(timeout=10)
    gateway.close()
    return _percentiles(times)


def main() -> None:
    print(f"DingTalk callback ACK latency: {CALLBACKS} card submits at once, 50 ms responders")
    s50, s99, r50, r99 = stream_ack_latency()
    h50, h99, _ = http_ack_latency(CALLBACKS, RESPONDER_DELAY, web_threads=16)
    print(f"{'path':<44} {'p50 ms':>8} {'p99 ms':>8}")
    print(f"{'Stream: frame received -> ACK written':<44} {s50:>8.2f} {s99:>8.2f}")
    print(f"{'Stream: gateway sent -> ACK read (queued)':<44} {r50:>8.2f} {r99:>8.2f}")
    print(f"{'HTTP: handle_card_request, 16 web threads':<44} {h50:>8.2f} {h99:>8.2f}")
    c50, c99 = reconnect_time()
    print(f"Reconnect after a dropped socket (20 drops, backoff wait 0): p50 {c50:.1f} ms, "
          f"p99 {c99:.1f} ms")


if __name__ == "__main__":
    main()

"""Two DingTalk instances of one bot sharing a state store: cross-instance Stop latency,
card callback ACK latency and the Redis round trips a callback makes before its ACK.

Usage::

    python benchmarks/bench_cross_instance.py [--stops 100] [--callbacks 200] [--url URL]

Two ``DingtalkChannel`` instances (A and B) in this process, each with its own
``RedisStore`` (its own connection pool, as two processes would have) on one local
``redis-server`` (started on 127.0.0.1 unless ``--url``), a fake Card API and an agent
that streams and runs until cancelled. Every run lives on A.

1. **cross-instance Stop**: the Stop button of A's status card is clicked on B; time
   from B receiving the callback to A's agent being cancelled (B claims and ACKs, then
   pushes the action to A's inbox; A's consumer pops it and cancels the run). p50/p99.
   Target: p99 < 50 ms.
2. **ACK latency**: 200 runs live on A; 200 Stop callbacks arrive at once, alternately
   on A and B (as a load balancer spreads them), served by 1 and by 16 handler threads
   (a threaded WSGI server) and by 200 threads released at once. Time spent in
   ``handle_card_request`` (the ACK). RedisStore beside a shared MemoryStore. Target:
   p99 < 10 ms with Redis on server threads.
3. **round trips**: Redis requests one callback writes before its ACK, counted on the
   calling thread's redis-py connection, on the instance that owns the run and on the
   other. Target: <= 2.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "sdk"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_state_store import local_redis  # noqa: E402
from channelkit.core.config import ChannelConfig  # noqa: E402
from channelkit.ingress import Headers, IngressRequest  # noqa: E402
from channelkit.platforms.dingtalk import (  # noqa: E402
    STATUS_CARD_TEMPLATE_ID,
    DingtalkChannel,
    DingtalkConfig,
    robot_signature,
)
from channelkit.runtime import WorkerPool  # noqa: E402
from channelkit.state import MemoryStore, StateStore  # noqa: E402

SECRET = "app-secret"
#: handler threads of the WSGI server in the "server threads" mode (serve's default: 8)
WEB_THREADS = 16


def _mode(web_threads: int | None) -> str:
    if web_threads is None:
        return "all at once"
    return "1 server thread" if web_threads == 1 else f"{web_threads} server threads"


class CardApi:
    """Records the status cards created; every other Card/robot API call is a no-op."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.tracks: dict[str, str] = {}  # chat id -> status card outTrackId

    def create_and_deliver(self, template_id: str, out_track_id: str, target: Any, *a: Any) -> None:
        if template_id == STATUS_CARD_TEMPLATE_ID:
            chat = str(getattr(target, "chat_id", target))
            with self.lock:
                self.tracks[chat] = out_track_id

    def __getattr__(self, name: str) -> Callable[..., None]:
        return lambda *a, **k: None


class HoldBridge:
    """Streams one chunk, then runs until cancelled; records when each cancel arrived."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.events: dict[str, threading.Event] = {}
        self.cancelled_at: dict[str, float] = {}
        self.sessions: dict[str, str] = {}  # prompt text -> session id

    def _event(self, session_id: str) -> threading.Event:
        with self.lock:
            return self.events.setdefault(session_id, threading.Event())

    def prompt(self, session_id: str, text: str, sink: Any) -> str:
        with self.lock:
            self.sessions[text] = session_id
        sink.text_chunk(session_id, "working")
        self._event(session_id).wait(60)
        return "stopped"

    def cancel_session(self, session_id: str) -> bool:
        now = time.perf_counter()
        with self.lock:
            self.cancelled_at.setdefault(session_id, now)
        self._event(session_id).set()
        return True

    def respond_to_permission(self, request_id: str, response: Any) -> bool:
        return True

    def close(self) -> None:
        pass


class Instance:
    def __init__(self, store: StateStore, api: CardApi, runs: int) -> None:
        self.bridge = HoldBridge()
        self.pool = WorkerPool(16)
        self.run_pool = WorkerPool(runs + 8)
        self.store = store
        self.channel = DingtalkChannel(
            DingtalkConfig(
                client_id="ding-robot",
                client_secret=SECRET,
                interactive_cards={},
                ingress="http",
                card_callback_route_key="bench",
            ),
            self.bridge,  # type: ignore[arg-type]
            channel_config=ChannelConfig(
                name="dingtalk", max_concurrent_runs=runs + 8, max_queued_per_owner=5
            ),
            api=api,  # type: ignore[arg-type]
            executor=self.pool,
            run_executor=self.run_pool,
            store=store,
            cluster_options={"leaseRenewS": 5.0, "leaseExpiryS": 30.0},
        )
        self._signed = 0

    def message(self, chat: str, sender: str) -> None:
        self._signed = max(int(time.time() * 1000), self._signed + 1)
        ts = str(self._signed)
        body = json.dumps(
            {
                "msgId": f"msg-{uuid.uuid4().hex}",
                "msgtype": "text",
                "text": {"content": f"hold {chat}"},
                "conversationId": chat,
                "conversationType": "2",
                "senderId": "$:LWCP_v1:$" + sender,
                "senderStaffId": sender,
                "senderNick": sender,
            }
        ).encode()
        headers = Headers({"timestamp": ts, "sign": robot_signature(ts, SECRET)})
        response = self.channel.handle_robot_request(
            IngressRequest("POST", "/dingtalk/robot", headers, body)
        )
        assert response.status == 200, response.status
        response.run_after()

    def stop(self, track: str, sender: str) -> tuple[float, Callable[[], None]]:
        """Deliver a Stop click; (ms to the ACK, the deferred work to run after it)."""
        body = json.dumps(
            {
                "userId": sender,
                "value": json.dumps({"outTrackId": track, "actionValue": "btn_stop"}),
            }
        ).encode()
        request = IngressRequest("POST", "/dingtalk/card", Headers({}), body)
        started = time.perf_counter()
        response = self.channel.handle_card_request(request)
        elapsed = (time.perf_counter() - started) * 1000.0
        assert response.status == 200, response.status
        return elapsed, response.run_after

    def close(self) -> None:
        self.channel.close(timeout=10)


def wait(predicate: Callable[[], Any], timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError("condition not met in time")
        time.sleep(0.002)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def start_runs(a: Instance, api: CardApi, chats: list[str]) -> dict[str, str]:
    """One held run per chat on A; chat -> its status card, once the store has it."""
    for chat in chats:
        a.message(chat, f"user-{chat}")
    cluster = a.channel.cluster
    assert cluster is not None
    tracks = wait(lambda: all(c in api.tracks for c in chats) and dict(api.tracks))
    for chat in chats:
        key = cluster.cluster.key("card", tracks[chat])
        wait(lambda key=key: a.store.get(key) is not None)
    return {chat: tracks[chat] for chat in chats}


@contextmanager
def pair(
    stores: tuple[StateStore, StateStore], runs: int
) -> Iterator[tuple[Instance, Instance, CardApi]]:
    api = CardApi()
    a, b = Instance(stores[0], api, runs), Instance(stores[1], api, runs)
    try:
        yield a, b, api
    finally:
        a.close()
        b.close()


def cross_instance_stop(stores: tuple[StateStore, StateStore], n: int) -> list[float]:
    """ms from B receiving a Stop of A's card to A's agent cancelled, n times."""
    out: list[float] = []
    with pair(stores, 8) as (a, b, api):
        for i in range(n):
            chat = f"stop-{i}"
            track = start_runs(a, api, [chat])[chat]
            session = wait(lambda chat=chat: a.bridge.sessions.get(f"hold {chat}"))
            started = time.perf_counter()
            _, after = b.stop(track, f"user-{chat}")
            after()  # the WSGI server has written the ACK
            wait(lambda session=session: session in a.bridge.cancelled_at, 10)
            out.append((a.bridge.cancelled_at[session] - started) * 1000.0)
    return out


def ack_latency(
    stores: tuple[StateStore, StateStore], n: int, web_threads: int | None = None
) -> tuple[list[float], int]:
    """ms to the ACK of n concurrent Stop callbacks (alternately on A and B); the
    number of runs they cancelled. ``web_threads=None``: one thread per callback,
    released at once; else all n are queued at once on ``web_threads`` handler threads,
    as a threaded WSGI server serves them (the time measured is the handler's)."""
    with pair(stores, n) as (a, b, api):
        chats = [f"ack-{i}" for i in range(n)]
        tracks = start_runs(a, api, chats)
        wait(lambda: len(a.bridge.sessions) >= n)
        barrier = threading.Barrier(n if web_threads is None else 1)
        latencies: list[float] = []
        lock = threading.Lock()

        def deliver(i: int, chat: str) -> None:
            target = a if i % 2 == 0 else b
            barrier.wait(30)
            elapsed, after = target.stop(tracks[chat], f"user-{chat}")
            with lock:
                latencies.append(elapsed)
            after()

        gc.collect()
        if web_threads is None:
            threads = [threading.Thread(target=deliver, args=(i, c)) for i, c in enumerate(chats)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
        else:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(web_threads) as web:
                for future in [web.submit(deliver, i, c) for i, c in enumerate(chats)]:
                    future.result(60)
        wait(lambda: len(a.bridge.cancelled_at) >= n, 30)
        return latencies, len(a.bridge.cancelled_at)


def round_trips(stores: tuple[StateStore, StateStore]) -> dict[str, int]:
    """Redis requests written by the calling thread during one callback's ACK."""
    from redis.connection import Connection

    me: list[threading.Thread | None] = [None]
    sent = [0]
    original = Connection.send_packed_command

    def counting(self: Connection, command: object, check_health: bool = True) -> None:
        if threading.current_thread() is me[0]:
            sent[0] += 1
        original(self, command, check_health)  # type: ignore[arg-type]

    out: dict[str, int] = {}
    with pair(stores, 8) as (a, b, api):
        tracks = start_runs(a, api, ["rt-owner", "rt-other"])
        Connection.send_packed_command = counting  # type: ignore[method-assign]
        try:
            for label, target, chat in (("owner (A)", a, "rt-owner"), ("other (B)", b, "rt-other")):
                me[0], sent[0] = threading.current_thread(), 0
                _, after = target.stop(tracks[chat], f"user-{chat}")
                out[f"Stop on the {label}"] = sent[0]
                me[0] = None
                after()
        finally:
            Connection.send_packed_command = original  # type: ignore[method-assign]
        wait(lambda: len(a.bridge.cancelled_at) >= 2, 10)
    return out


def line(name: str, values: list[float]) -> str:
    return (
        f"  {name:<34} p50 {statistics.median(values):7.2f} ms  p99 {pct(values, 0.99):7.2f} ms"
        f"  max {max(values):7.2f} ms"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--stops", type=int, default=100, help="cross-instance Stops timed")
    parser.add_argument("--callbacks", type=int, default=200, help="concurrent callbacks")
    parser.add_argument("--url", help="an existing Redis (default: start one)")
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}")
    try:
        from channelkit.state import RedisStore
    except ImportError:
        print("skipped: redis-py is not installed (pip install 'channelkit[redis]')")
        return 0

    def redis_pair(url: str) -> tuple[StateStore, StateStore]:
        ns = f"bench-x-{uuid.uuid4().hex[:8]}"
        return RedisStore(url, namespace=ns), RedisStore(url, namespace=ns)

    with local_redis() if args.url is None else _given(args.url) as url:
        if url is None:
            print("skipped: redis-server is not installed")
            return 0
        stores = redis_pair(url)
        try:
            stops = cross_instance_stop(stores, args.stops)
        finally:
            for s in stores:
                s.close()
        acks: dict[str, tuple[list[float], int]] = {}
        for threads in (1, WEB_THREADS, None):
            stores = redis_pair(url)
            try:
                acks[f"RedisStore, {_mode(threads)}"] = ack_latency(stores, args.callbacks, threads)
                if threads is None:
                    trips = round_trips(stores)
            finally:
                for s in stores:
                    s.close()
    for threads in (1, WEB_THREADS, None):
        memory = MemoryStore(namespace="bench-x")
        acks[f"MemoryStore, {_mode(threads)}"] = ack_latency(
            (memory, memory), args.callbacks, threads
        )

    print(f"\ncross-instance Stop (click on B -> cancel applied on A), {len(stops)} runs")
    print(line("RedisStore", stops))
    print(f"\nACK latency, {args.callbacks} concurrent Stop callbacks (half on A, half on B)")
    for name, (values, done) in acks.items():
        print(line(name, values) + f"  ({done} runs cancelled)")
    print("\nRedis round trips before the ACK")
    for name, count in trips.items():
        print(f"  {name:<34} {count}")
    ok = (
        pct(stops, 0.99) < 50
        and pct(acks[f"RedisStore, {_mode(WEB_THREADS)}"][0], 0.99) < 10
        and max(trips.values()) <= 2
        and all(done == args.callbacks for _, done in acks.values())
    )
    print(
        "\ntargets (Stop p99 < 50 ms, Redis ACK p99 < 10 ms on server threads, <= 2 round trips): "
        + ("met" if ok else "NOT met")
    )
    return 0 if ok else 1


@contextmanager
def _given(url: str) -> Iterator[str | None]:
    yield url


if __name__ == "__main__":
    sys.exit(main())

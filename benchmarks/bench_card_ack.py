"""Card ACK through the server: RedisStore beside MemoryStore, in the same run.

Usage::

    python benchmarks/bench_card_ack.py [--callbacks 200] [--threads 8] [--rounds 3] [--url URL]

Two ``DingtalkChannel`` instances (A and B) of one bot in this process, each behind its
own waitress server (``--threads`` handler threads, ``serve``'s default 8) on 127.0.0.1,
as two ``serve`` processes behind a load balancer; a fake Card API and an agent that runs
until cancelled (`bench_cross_instance`). 200 runs live on A; 200 Stop callbacks are
posted at once over HTTP, alternately to A and B, by a separate client process (the
platform's side: its sender threads do not compete with the server for the interpreter).
Figures, p50 / p99 in milliseconds:

* **ACK**: time in the WSGI application from the request reaching it to the response
  status (the platform's ACK); the work after the ACK (the store's correlation and
  claim, the cancel, the card update, the push to the owner's inbox) is not in it;
* **round trip**: the client's view, from sending the request to reading the response
  (includes waiting for a free handler thread behind the other 199);
* **Stop to cancel**: from the client sending the request to the agent's run being
  cancelled (the whole effect of the click, the work after the ACK included; one
  monotonic clock for both processes, as on Linux).

The same two figures with one MemoryStore shared by A and B, then the ratio of the p99s
(target: RedisStore at most 2x MemoryStore), each store measured ``--rounds`` times,
alternating, the median round reported. Also the Redis commands the web thread sends
before a callback's ACK, on the run's owner and on the other instance.

Without ``--url`` a throwaway ``redis-server`` is started on 127.0.0.1 (no persistence).
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import statistics
import subprocess
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

from bench_cross_instance import Instance, pair, pct, round_trips, start_runs, wait  # noqa: E402
from bench_state_store import local_redis  # noqa: E402
from channelkit.state import MemoryStore, StateStore  # noqa: E402
from channelkit.web.wsgi import create_wsgi_app  # noqa: E402


class TimedApp:
    """A WSGI app that records how long each request took to its response status."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.lock = threading.Lock()
        self.acks: list[float] = []

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        started = time.perf_counter()

        def timed_start(status: str, headers: Any, exc_info: Any = None) -> Any:
            elapsed = (time.perf_counter() - started) * 1000.0
            with self.lock:
                self.acks.append(elapsed)
            return start_response(status, headers, exc_info)

        return self.app(environ, timed_start)


@contextmanager
def served(instance: Instance, threads: int) -> Iterator[tuple[int, TimedApp]]:
    import waitress

    app = TimedApp(create_wsgi_app([instance.channel], healthz=False))
    server = waitress.create_server(
        app, host="127.0.0.1", port=0, threads=threads, backlog=1024, connection_limit=1000
    )
    port = int(server.effective_port)  # type: ignore[union-attr]
    thread = threading.Thread(target=server.run, name="bench-waitress", daemon=True)
    thread.start()
    try:
        yield port, app
    finally:
        server.close()
        thread.join(10)


# The platform's side: a separate process (as DingTalk's servers are), so its 200 sender
# threads do not share the server's interpreter lock. It reads one JSON list of
# [port, body] from stdin, posts them all at once and prints, in the same order, each
# post's start (time.perf_counter, s) and round trip (ms).
_CLIENT = r"""
import http.client, json, sys, threading, time
posts = json.loads(sys.stdin.readline())
barrier = threading.Barrier(len(posts))
trips = [None] * len(posts)
def post(i, port, body):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    connection.connect()
    barrier.wait(60)
    started = time.perf_counter()
    connection.request("POST", "/dingtalk/card", body, {"Content-Type": "application/json"})
    response = connection.getresponse()
    response.read()
    elapsed = (time.perf_counter() - started) * 1000.0
    connection.close()
    assert response.status == 200, response.status
    trips[i] = (started, elapsed)
threads = [threading.Thread(target=post, args=(i, p, b.encode())) for i, (p, b) in enumerate(posts)]
for t in threads:
    t.start()
for t in threads:
    t.join(120)
print(json.dumps(trips))
"""


def post_all(posts: list[tuple[int, str]]) -> list[tuple[float, float]]:
    """Post every ``(port, body)`` at once from a separate process; each post's start
    (``time.perf_counter()``, seconds) and round trip (ms), in order."""
    done = subprocess.run(
        [sys.executable, "-c", _CLIENT],
        input=json.dumps(posts) + "\n",
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return [(float(s), float(ms)) for s, ms in json.loads(done.stdout)]


def stop_body(track: str, sender: str) -> str:
    value = json.dumps({"outTrackId": track, "actionValue": "btn_stop"})
    return json.dumps({"userId": sender, "value": value})


Burst = tuple[list[float], list[float], list[float], int]


def burst(stores: tuple[StateStore, StateStore], n: int, threads: int) -> Burst:
    """(ACK ms, client round trip ms, Stop to cancel ms, runs cancelled) of n Stops
    posted at once."""
    with pair(stores, n) as (a, b, api):
        chats = [f"ack-{i}" for i in range(n)]
        tracks = start_runs(a, api, chats)
        wait(lambda: len(a.bridge.sessions) >= n)
        with served(a, threads) as (port_a, app_a), served(b, threads) as (port_b, app_b):
            posts = [
                (port_a if i % 2 == 0 else port_b, stop_body(tracks[c], f"user-{c}"))
                for i, c in enumerate(chats)
            ]
            gc.collect()
            sent = post_all(posts)
            wait(lambda: len(a.bridge.cancelled_at) >= n, 60)
            acks = app_a.acks + app_b.acks
        cancelled = a.bridge.cancelled_at
        effect = [
            (cancelled[a.bridge.sessions[f"hold {chat}"]] - start) * 1000.0
            for chat, (start, _) in zip(chats, sent, strict=True)
        ]
        return acks, [ms for _, ms in sent], effect, len(cancelled)


def line(name: str, values: list[float]) -> str:
    return (
        f"  {name:<38} p50 {statistics.median(values):7.2f} ms  p99 {pct(values, 0.99):7.2f} ms"
        f"  max {max(values):7.2f} ms"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--callbacks", type=int, default=200, help="Stops posted at once")
    parser.add_argument("--threads", type=int, default=8, help="handler threads per server")
    parser.add_argument("--rounds", type=int, default=3, help="bursts per store")
    parser.add_argument("--url", help="an existing Redis (default: start one)")
    args = parser.parse_args()
    logging.getLogger("waitress").setLevel(logging.ERROR)  # "Task queue depth" per burst
    print(f"python {sys.version.split()[0]}")
    try:
        from channelkit.state import RedisStore
    except ImportError:
        print("skipped: redis-py is not installed (pip install 'channelkit[redis]')")
        return 0

    def redis_pair(url: str) -> tuple[StateStore, StateStore]:
        ns = f"bench-ack-{uuid.uuid4().hex[:8]}"
        return RedisStore(url, namespace=ns), RedisStore(url, namespace=ns)

    results: dict[str, list[Burst]] = {"redis": [], "memory": []}
    with local_redis() if args.url is None else _given(args.url) as url:
        if url is None:
            print("skipped: redis-server is not installed")
            return 0
        for _ in range(args.rounds):
            stores = redis_pair(url)
            try:
                results["redis"].append(burst(stores, args.callbacks, args.threads))
            finally:
                for s in stores:
                    s.close()
            memory = MemoryStore(namespace="bench-ack")
            results["memory"].append(burst((memory, memory), args.callbacks, args.threads))
        stores = redis_pair(url)
        try:
            trips = round_trips(stores)
        finally:
            for s in stores:
                s.close()

    def median_round(kind: str) -> Burst:
        rounds = sorted(results[kind], key=lambda r: pct(r[0], 0.99))
        return rounds[len(rounds) // 2]

    redis_acks, redis_trips, redis_effect, redis_done = median_round("redis")
    memory_acks, memory_trips, memory_effect, memory_done = median_round("memory")
    print(
        f"\n{args.callbacks} Stop callbacks posted at once, half to A, half to B; "
        f"waitress, {args.threads} threads each; median of {args.rounds} rounds (by ACK p99)"
    )
    print(line("ACK, RedisStore", redis_acks) + f"  ({redis_done} runs cancelled)")
    print(line("ACK, MemoryStore", memory_acks) + f"  ({memory_done} runs cancelled)")
    print(line("client round trip, RedisStore", redis_trips))
    print(line("client round trip, MemoryStore", memory_trips))
    print(line("Stop to cancel, RedisStore", redis_effect))
    print(line("Stop to cancel, MemoryStore", memory_effect))
    print("  every round, ACK p99 (Redis / memory): " + ", ".join(
        f"{pct(r[0], 0.99):.2f} / {pct(m[0], 0.99):.2f}"
        for r, m in zip(results["redis"], results["memory"], strict=True)
    ))  # fmt: skip
    ratio = pct(redis_acks, 0.99) / max(pct(memory_acks, 0.99), 1e-9)
    print(f"\nACK p99 ratio RedisStore / MemoryStore: {ratio:.2f}x (target <= 2x)")
    print("Redis commands the web thread sends before the ACK")
    for name, count in trips.items():
        print(f"  {name:<38} {count}")
    return 0


@contextmanager
def _given(url: str) -> Iterator[str | None]:
    yield url


if __name__ == "__main__":
    sys.exit(main())

"""State store: per-operation latency of MemoryStore and RedisStore, and the round trips
of the claim a callback makes before its ACK.

Usage::

    python benchmarks/bench_state_store.py [--ops 2000] [--memory-ops 20000] [--url URL]

* **latency**: p50/p99 in microseconds of ``put``, ``get``, ``add`` (a new key and a
  taken one), ``replace``, ``delete``, ``push`` + ``pop``, ``scan`` (100 matching keys)
  and ``claim+get`` (``add`` of a one-shot claim with a TTL, then ``get`` of the record
  it guards: the pattern a callback runs before it acknowledges). One thread, warm.
* **round trips**: requests written to Redis for one ``claim+get`` (target: at most 2),
  counted on redis-py's connection; also for each single operation.

Without ``--url`` a throwaway ``redis-server`` is started on 127.0.0.1 (a free port, no
persistence) and stopped at the end; RedisStore figures are skipped when neither
redis-server nor redis-py is available.
"""

from __future__ import annotations

import argparse
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "sdk"))

from channelkit.state import MemoryStore, StateStore  # noqa: E402


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def timed(n: int, setup: Callable[[int], None], op: Callable[[int], object]) -> list[float]:
    """Microseconds of ``op(i)`` for i in range(n), ``setup(i)`` untimed before each."""
    out: list[float] = []
    for i in range(n):
        setup(i)
        started = time.perf_counter()
        op(i)
        out.append((time.perf_counter() - started) * 1e6)
    return out


def operations(store: StateStore, n: int) -> dict[str, list[float]]:
    v = {"owner": "proc-1", "card": "c-123", "state": "open", "n": 1}
    w = {**v, "state": "done"}
    nothing: Callable[[int], None] = lambda i: None  # noqa: E731
    for i in range(100):
        store.put(f"scan:{i:03d}", v)
    return {
        "put": timed(n, nothing, lambda i: store.put(f"k:{i}", v, ttl_s=600)),
        "get": timed(n, nothing, lambda i: store.get(f"k:{i}")),
        "add (new key)": timed(n, nothing, lambda i: store.add(f"c:{i}", v, ttl_s=600)),
        "add (taken)": timed(n, nothing, lambda i: store.add(f"c:{i}", v, ttl_s=600)),
        "replace": timed(
            n, lambda i: store.put(f"r:{i}", v), lambda i: store.replace(f"r:{i}", v, w)
        ),
        "delete": timed(n, nothing, lambda i: store.delete(f"k:{i}")),
        "push": timed(n, nothing, lambda i: store.push("q", v)),
        "pop": timed(n, nothing, lambda i: store.pop("q", 1.0)),
        "scan (100 keys)": timed(max(1, n // 10), nothing, lambda i: store.scan("scan:")),
        "claim+get": timed(
            n,
            lambda i: store.put(f"rec:{i}", v),
            lambda i: (store.add(f"claim:{i}", {"by": "p"}, ttl_s=60), store.get(f"rec:{i}")),
        ),
    }


def report(title: str, figures: dict[str, list[float]]) -> None:
    print(f"\n{title}")
    print(f"  {'operation':<18} {'p50 us':>9} {'p99 us':>9}")
    for name, values in figures.items():
        print(f"  {name:<18} {pct(values, 0.50):>9.1f} {pct(values, 0.99):>9.1f}")


def round_trips(store: StateStore) -> dict[str, int]:
    """Requests written to Redis per operation, counted on redis-py's connection."""
    from redis.connection import Connection

    sent = [0]
    original = Connection.send_packed_command

    def counting(self: Connection, command: object, check_health: bool = True) -> None:
        sent[0] += 1
        original(self, command, check_health)  # type: ignore[arg-type]

    def count(op: Callable[[], object]) -> int:
        sent[0] = 0
        op()
        return sent[0]

    v = {"state": "open"}
    store.put("rt:rec", v)
    store.replace("rt:rec", v, v)  # the script is loaded once, not on the measured call
    Connection.send_packed_command = counting  # type: ignore[method-assign]
    try:
        return {
            "claim+get": count(lambda: (store.add("rt:claim", {"by": "p"}, ttl_s=60),
                                        store.get("rt:rec"))),
            "add": count(lambda: store.add("rt:claim2", v, ttl_s=60)),
            "get": count(lambda: store.get("rt:rec")),
            "replace": count(lambda: store.replace("rt:rec", v, v)),
            "push": count(lambda: store.push("rt:q", v)),
            "pop": count(lambda: store.pop("rt:q", 1.0)),
        }  # fmt: skip
    finally:
        Connection.send_packed_command = original  # type: ignore[method-assign]


@contextmanager
def local_redis() -> Iterator[str | None]:
    executable = shutil.which("redis-server")
    if executable is None:
        yield None
        return
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with tempfile.TemporaryDirectory() as workdir:
        process = subprocess.Popen(
            [executable, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", workdir],
            stdout=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 10
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.02)
            yield f"redis://127.0.0.1:{port}/0"
        finally:
            process.terminate()
            process.wait(10)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ops", type=int, default=2000, help="operations per figure (Redis)")
    parser.add_argument("--memory-ops", type=int, default=20000)
    parser.add_argument("--url", help="an existing Redis (default: start one)")
    args = parser.parse_args()

    print(f"python {sys.version.split()[0]}")
    report("MemoryStore", operations(MemoryStore(namespace="bench"), args.memory_ops))

    try:
        from channelkit.state import RedisStore
    except ImportError:
        print("\nRedisStore: skipped (redis-py is not installed: pip install 'channelkit[redis]')")
        return 0
    with local_redis() if args.url is None else _given(args.url) as url:
        if url is None:
            print("\nRedisStore: skipped (redis-server is not installed)")
            return 0
        store = RedisStore(url, namespace=f"bench-{uuid.uuid4().hex[:8]}")
        try:
            report("RedisStore (local redis-server, 127.0.0.1)", operations(store, args.ops))
            trips = round_trips(store)
        finally:
            store.close()
    print("\nround trips to Redis")
    for name, count in trips.items():
        print(f"  {name:<18} {count}")
    ok = trips["claim+get"] <= 2
    print(f"\nclaim+get round trips <= 2: {'yes' if ok else 'NO'}")
    return 0 if ok else 1


@contextmanager
def _given(url: str) -> Iterator[str | None]:
    yield url


if __name__ == "__main__":
    sys.exit(main())

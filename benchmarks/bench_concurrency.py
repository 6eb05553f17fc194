"""Many people at once: first reaction, first chunk, simultaneous submits, cost per run.

Usage::

    python benchmarks/bench_concurrency.py [--people 1,8,32,128,512] [--run-seconds 1.0]
        [--batches 200] [--baseline REV] [--baseline-batches 3]

* **first reaction**: a person sends a message; the time until they see something (their
  run's ``started`` event, which shows the status card or indicator, or the queue
  notice). **first chunk**: the agent produces its first text; the time until the
  channel's chunk hook has it. Each person's agent streams at once, then works for
  ``--run-seconds``. p50/p99/max in milliseconds, on the default configuration.
* **submit batch**: N people with live DingTalk question cards submit at the same moment
  against a Card API that takes 20 ms per call; the time until every answer is on its
  continuation card; ``--batches`` batches of 8, the worst and the stall count (a batch
  over 5 s), then one batch of 32 and one of 128.
* **cost per live run**: threads and RSS with 200 runs blocked in the agent.

``--baseline REV`` runs the same figures on another revision (a temporary git worktree)
in the same session, so docs/performance.md can put both side by side.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def people_latency(people: int, run_seconds: float) -> dict[str, float]:
    from channelkit.agents.function import FunctionAgent
    from channelkit.testing import inbound, make_channel

    produced: dict[str, float] = {}
    lock = threading.Lock()
    stop = threading.Event()

    def agent(turn):
        with lock:
            produced[turn.text] = time.perf_counter()
        turn.say(f"first words for {turn.text}")
        stop.wait(run_seconds)
        return f"first words for {turn.text}"

    sent_at: dict[str, float] = {}
    reaction: dict[str, float] = {}
    first_chunk: dict[str, float] = {}
    ch = make_channel(FunctionAgent(agent), max_workers=16)
    original_lifecycle = ch.on_task_lifecycle
    original_send = ch.send_message

    def on_task_lifecycle(event):
        now = time.perf_counter()
        key = event.chat_id
        with lock:
            if event.type == "started":
                reaction.setdefault(key, now)
            if event.type == "text_chunk":
                first_chunk.setdefault(key, now)
        original_lifecycle(event)

    def send_message(chat_id, text, *, thread_id=None):
        if "Queued" in text:
            with lock:
                reaction.setdefault(chat_id, time.perf_counter())
        original_send(chat_id, text, thread_id=thread_id)

    ch.on_task_lifecycle = on_task_lifecycle  # type: ignore[method-assign]
    ch.send_message = send_message  # type: ignore[method-assign]
    handles = []
    try:
        for i in range(people):
            key = f"p{i}"
            sent_at[key] = time.perf_counter()
            handles.append(ch.handle_inbound(inbound(key, sender_id=f"u{i}", chat_id=key)))
        for h in handles:
            h.result(run_seconds * (people / 8 + 4) + 30)
    finally:
        stop.set()
        ch.close(timeout=10)
    reactions = [(reaction[k] - sent_at[k]) * 1000 for k in sent_at if k in reaction]
    chunks = [(first_chunk[k] - produced[k]) * 1000 for k in produced if k in first_chunk]
    return {
        "people": people,
        "reaction_p50_ms": statistics.median(reactions),
        "reaction_p99_ms": pct(reactions, 0.99),
        "reaction_max_ms": max(reactions),
        "chunk_p50_ms": statistics.median(chunks),
        "chunk_p99_ms": pct(chunks, 0.99),
        "chunk_max_ms": max(chunks),
    }


def submit_batch(people: int) -> float:
    sys.path.insert(0, str(ROOT / "tests" / "platforms" / "dingtalk"))
    sys.path.insert(0, str(ROOT))
    from dingtalk_helpers import AdapterHarness, submit_payload

    def script(bridge, sid, text, sink):
        sink.text_chunk(sid, f"checking {text}")
        bridge.ask(sink, sid, f"req-{text}", wait=False)
        bridge.answered[f"req-{text}"].wait(60)
        sink.text_chunk(sid, f"answer for {text}")
        return f"checking {text}answer for {text}"

    import inspect

    kwargs = {}
    if "run_pool_size" in inspect.signature(AdapterHarness).parameters:
        kwargs["run_pool_size"] = people + 8  # as the channel's own run pool would hold
    h = AdapterHarness(script, **kwargs)
    record = h.api._record

    def slow_record(op, **kw):
        time.sleep(0.02)  # a Card API round trip
        record(op, **kw)

    h.api._record = slow_record
    try:
        for i in range(people):
            h.send(f"p{i}", sender=f"staff-p{i}", chat=f"cid-p{i}")
        deadline = time.monotonic() + 60
        while len(h.question_tracks()) < people and time.monotonic() < deadline:
            time.sleep(0.005)
        owners = {
            c[1]["out_track_id"]: "staff-" + c[1]["target"].chat_id.removeprefix("cid-")
            for c in h.api.ops("create")
            if c[1]["out_track_id"] in set(h.question_tracks())
        }
        barrier = threading.Barrier(len(owners) + 1)

        def submit(track: str) -> None:
            barrier.wait(30)
            h.card_request(submit_payload(track, actor=owners[track]))

        threads = [threading.Thread(target=submit, args=(t,)) for t in owners]
        for t in threads:
            t.start()
        barrier.wait(30)
        start = time.perf_counter()

        def done() -> bool:
            finals = [
                c[1]["params"].get("content")
                for c in h.api.ops("update")
                if c[1]["params"].get("flowStatus") == 3
            ]
            return sum(1 for f in finals if f and f.startswith("answer for")) >= people

        while not done() and time.perf_counter() - start < 60:
            time.sleep(0.002)
        return time.perf_counter() - start
    finally:
        h.close()


def run_cost(runs: int) -> dict[str, float]:
    from channelkit.agents.function import FunctionAgent
    from channelkit.testing import inbound, make_channel

    release = threading.Event()
    started = threading.Semaphore(0)

    def agent(turn):
        started.release()
        release.wait(60)
        return "ok"

    # (older trees ran runs on the hook pool and needed max_workers > max_concurrent_runs)
    ch = make_channel(FunctionAgent(agent), max_workers=runs + 1, max_concurrent_runs=runs)
    threads0, rss0 = threading.active_count(), rss_kib()
    handles = [
        ch.handle_inbound(inbound(f"r{i}", sender_id=f"u{i}", chat_id=f"c{i}")) for i in range(runs)
    ]
    for _ in range(runs):
        started.acquire(timeout=30)
    threads1, rss1 = threading.active_count(), rss_kib()
    release.set()
    for h in handles:
        h.result(30)
    ch.close(timeout=10)
    return {
        "runs": runs,
        "threads_per_run": (threads1 - threads0) / runs,
        "rss_kib_per_run": (rss1 - rss0) / runs,
    }


def measure(people_list: list[int], run_seconds: float, batches: int) -> dict[str, object]:
    out: dict[str, object] = {}
    out["people"] = [people_latency(n, run_seconds) for n in people_list]
    times = [submit_batch(8) for _ in range(batches)]
    out["submit8"] = {
        "batches": batches,
        "p50_s": statistics.median(times),
        "max_s": max(times),
        "stalls_over_5s": sum(1 for t in times if t > 5.0),
    }
    out["submit32_s"] = submit_batch(32)
    out["submit128_s"] = submit_batch(128)
    out["cost"] = run_cost(200)
    return out


def print_figures(label: str, figures: dict[str, object]) -> None:
    print(f"== {label}")
    for row in figures["people"]:  # type: ignore[union-attr]
        print(
            "  {people:>4} people: first reaction p50 {reaction_p50_ms:8.1f} ms  p99 "
            "{reaction_p99_ms:8.1f} ms  max {reaction_max_ms:8.1f} ms | first chunk p50 "
            "{chunk_p50_ms:6.1f} ms  p99 {chunk_p99_ms:6.1f} ms  max {chunk_max_ms:6.1f} ms".format(
                **row
            )
        )
    s8 = figures["submit8"]
    print(
        "  submit batch of 8 x{batches}: p50 {p50_s:.3f} s  max {max_s:.3f} s  "
        "stalls {stalls_over_5s}".format(**s8)  # type: ignore[arg-type]
    )
    print(f"  submit batch of 32: {figures['submit32_s']:.3f} s")
    print(f"  submit batch of 128: {figures['submit128_s']:.3f} s")
    cost = figures["cost"]
    print(
        "  per live run: {threads_per_run:.2f} threads, {rss_kib_per_run:.0f} KiB RSS "
        "({runs} runs)".format(**cost)  # type: ignore[arg-type]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--people", default="1,8,32,128,512")
    parser.add_argument("--run-seconds", type=float, default=1.0)
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--baseline", help="git revision to measure the same way")
    parser.add_argument(
        "--baseline-batches", type=int, default=3, help="batches of 8 for the baseline"
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON only")
    args = parser.parse_args(argv)
    people = [int(x) for x in args.people.split(",")]
    if args.baseline:
        with tempfile.TemporaryDirectory() as tmp:
            tree = Path(tmp) / "baseline"
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), args.baseline],
                check=True,
                capture_output=True,
            )
            try:
                env = dict(os.environ, PYTHONPATH=str(tree / "sdk"))
                script = tree / "benchmarks" / "bench_concurrency_baseline.py"
                script.write_text(Path(__file__).read_text())
                cmd = [sys.executable, str(script), "--json", "--people", args.people]
                cmd += ["--run-seconds", str(args.run_seconds)]
                cmd += ["--batches", str(args.baseline_batches)]
                done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=3600)
                if done.returncode != 0:
                    print(done.stderr[-4000:], file=sys.stderr)
                    return 1
                print_figures(f"baseline {args.baseline}", json.loads(done.stdout))
            finally:
                subprocess.run(
                    ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
                    check=False,
                    capture_output=True,
                )
    figures = measure(people, args.run_seconds, args.batches)
    if args.json:
        print(json.dumps(figures))
    else:
        print_figures("this tree", figures)
    return 0


if __name__ == "__main__":
    import logging

    logging.disable(logging.WARNING)
    raise SystemExit(main())

"""Many people at once: first reaction, first chunk, simultaneous submits, cost per run.

Usage::

    python benchmarks/bench_concurrency.py [--people 1,8,32,128,512] [--run-seconds 1.0]
        [--long-people 128] [--long-seconds 5] [--batches 200] [--batches-32 N]
        [--batches-128 25] [--baseline REV] [--baseline-batches 3]

* **first reaction**: a person sends a message; the time until they see something (their
  run's ``started`` event, which shows the status card or indicator, or the queue
  notice). **first chunk**: the agent produces its first text; the time until the
  channel's chunk hook has it. Each person's agent streams at once, then works for
  ``--run-seconds``. p50/p99/max in milliseconds, on the default configuration.
  **long runs**: the same with ``--long-people`` people starting ``--long-seconds`` runs
  (default 128 people, 5 s runs; 64 run at once, 64 are queued), plus the peak thread
  count and RSS the channel added while they ran.
* **submit batch**: N people with live DingTalk question cards submit at the same moment
  against a Card API that takes 20 ms per call; the time until every answer is on its
  continuation card. ``--batches`` batches of 8 and of 32 (``--batches-32``), and
  ``--batches-128`` of 128: p50/p99/max. Every batch is checked: each answer delivered
  once, on its own person's card, every question card marked submitted, every ACK 200,
  no Markdown fallback. A watchdog thread dumps every thread's stack when a batch is not
  done 5 s after the submits (a stall); the script exits 1 after any stall or wrong
  batch (``--no-fail``: report them only, as the baseline run does).
* **cost per live run**: threads and RSS with 200 runs blocked in the agent.

``--baseline REV`` runs the same figures on another revision (a temporary git worktree)
in the same session, so docs/performance.md can put both side by side.
"""

from __future__ import annotations

import argparse
import faulthandler
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


class Sampler:
    """Samples the thread count and RSS every 20 ms; ``peak()`` is the most above the
    figures taken when it started."""

    def __init__(self) -> None:
        self.threads0, self.rss0 = threading.active_count(), rss_kib()
        self.threads, self.rss = self.threads0, self.rss0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            self.threads = max(self.threads, threading.active_count() - 1)
            self.rss = max(self.rss, rss_kib())

    def peak(self) -> tuple[int, int]:
        self._stop.set()
        self._thread.join(1)
        return self.threads - self.threads0, self.rss - self.rss0


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
    sampler = Sampler()
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
    threads, rss = sampler.peak()
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
        "run_seconds": run_seconds,
        "threads_peak": threads,
        "rss_peak_kib": rss,
    }


STALL_S = 5.0  # a batch whose answers are not all on their cards by then has stalled
CAP_S = 60.0  # how long a stalled batch is waited for before the next one


class Watchdog:
    """Dumps every thread's stack (``faulthandler``) when not finished within
    ``limit`` seconds; ``stalled`` tells whether it fired."""

    def __init__(self, limit: float, label: str, dump: bool = True) -> None:
        self.limit, self.label, self.dump = limit, label, dump
        self.stalled = False
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        if self._done.wait(self.limit):
            return
        self.stalled = True
        if self.dump:
            print(f"STALL: {self.label} not done after {self.limit:.0f} s", file=sys.stderr)
            faulthandler.dump_traceback(file=sys.stderr, all_threads=True)

    def finish(self) -> bool:
        """Stop watching; True when the watched work stalled."""
        self._done.set()
        self._thread.join(2)
        return self.stalled


def batch_problems(h, people: int, statuses: list[int]) -> list[str]:
    """What is wrong with a finished batch (nothing: every answer once, on its card)."""
    problems: list[str] = []
    if statuses != [200] * people:
        problems.append(f"card ACKs {sorted(statuses)}")
    chat_of = {c[1]["out_track_id"]: c[1]["target"].chat_id for c in h.api.ops("create")}
    answers = [
        (c[1]["out_track_id"], c[1]["params"].get("content"))
        for c in h.api.ops("update")
        if c[1]["params"].get("flowStatus") == 3
        and str(c[1]["params"].get("content") or "").startswith("answer for ")
    ]
    counts: dict[str, int] = {}
    for track, text in answers:
        name = text.removeprefix("answer for ")
        counts[name] = counts.get(name, 0) + 1
        if chat_of.get(track) != f"cid-{name}":
            problems.append(f"{name}'s answer on a card in {chat_of.get(track)!r}")
    for i in range(people):
        if counts.get(f"p{i}", 0) != 1:
            problems.append(f"p{i}'s answer delivered {counts.get(f'p{i}', 0)} times")
    submitted = sum(
        1 for c in h.api.ops("update") if c[1]["params"].get("card_status") == "submitted"
    )
    if submitted != people:
        problems.append(f"{submitted} of {people} question cards marked submitted")
    fallback = h.api.texts()
    if fallback:
        problems.append(f"{len(fallback)} Markdown fallback message(s)")
    return problems


def submit_batch(people: int, *, dump: bool = True) -> dict[str, object]:
    """One batch: ``seconds`` until every answer is on its card, ``stalled`` (the
    watchdog fired), ``problems`` (see :func:`batch_problems`)."""
    sys.path.insert(0, str(ROOT / "tests" / "platforms" / "dingtalk"))
    sys.path.insert(0, str(ROOT))
    from dingtalk_helpers import AdapterHarness, submit_payload

    def script(bridge, sid, text, sink):
        sink.text_chunk(sid, f"checking {text}")
        bridge.ask(sink, sid, f"req-{text}", wait=False)
        bridge.answered[f"req-{text}"].wait(CAP_S)
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
        setup = Watchdog(30.0, f"setting up {people} question cards", dump)
        for i in range(people):
            h.send(f"p{i}", sender=f"staff-p{i}", chat=f"cid-p{i}")
        deadline = time.monotonic() + CAP_S
        while len(h.question_tracks()) < people and time.monotonic() < deadline:
            time.sleep(0.005)
        if setup.finish():
            return {"seconds": CAP_S, "stalled": True, "problems": ["setup stalled"]}
        owners = {
            c[1]["out_track_id"]: "staff-" + c[1]["target"].chat_id.removeprefix("cid-")
            for c in h.api.ops("create")
            if c[1]["out_track_id"] in set(h.question_tracks())
        }
        barrier = threading.Barrier(len(owners) + 1)
        statuses: list[int] = []
        lock = threading.Lock()

        def submit(track: str) -> None:
            barrier.wait(30)
            status = h.card_request(submit_payload(track, actor=owners[track])).status
            with lock:
                statuses.append(status)

        threads = [threading.Thread(target=submit, args=(t,)) for t in owners]
        for t in threads:
            t.start()
        barrier.wait(30)
        start = time.perf_counter()
        dog = Watchdog(STALL_S, f"batch of {people} submits", dump)

        def done() -> bool:
            finals = [
                c[1]["params"].get("content")
                for c in h.api.ops("update")
                if c[1]["params"].get("flowStatus") == 3
            ]
            return sum(1 for f in finals if f and f.startswith("answer for")) >= people

        while not done() and time.perf_counter() - start < CAP_S:
            time.sleep(0.002)
        elapsed = time.perf_counter() - start
        stalled = dog.finish()
        for t in threads:
            t.join(CAP_S)
        try:
            h.idle(CAP_S)  # anything still to come (a second delivery) is counted
        except AssertionError:
            pass
        return {
            "seconds": elapsed,
            "stalled": stalled,
            "problems": batch_problems(h, people, statuses),
        }
    finally:
        h.close()


def submit_batches(people: int, batches: int, *, dump: bool = True) -> dict[str, object]:
    results = [submit_batch(people, dump=dump) for _ in range(batches)]
    times = [float(r["seconds"]) for r in results]  # type: ignore[arg-type]
    wrong = [r["problems"] for r in results if r["problems"]]
    for problems in wrong[:3]:
        print(f"WRONG batch of {people}: {problems[:5]}", file=sys.stderr)
    return {
        "people": people,
        "batches": batches,
        "p50_s": statistics.median(times),
        "p99_s": pct(times, 0.99),
        "max_s": max(times),
        "stalls": sum(1 for r in results if r["stalled"]),
        "wrong": len(wrong),
    }


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


def measure(args: argparse.Namespace) -> dict[str, object]:
    people_list = [int(x) for x in args.people.split(",") if x]
    out: dict[str, object] = {}
    out["people"] = [people_latency(n, args.run_seconds) for n in people_list]
    out["long"] = people_latency(args.long_people, args.long_seconds)
    dump = not args.no_fail
    batches_32 = args.batches if args.batches_32 is None else args.batches_32
    out["submit"] = [
        submit_batches(8, args.batches, dump=dump),
        submit_batches(32, batches_32, dump=dump),
        submit_batches(128, args.batches_128, dump=dump),
    ]
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
    long = figures["long"]
    print(
        "  {people} people, {run_seconds:.0f} s runs: first reaction p50 {reaction_p50_ms:.1f} ms"
        "  p99 {reaction_p99_ms:.1f} ms  max {reaction_max_ms:.1f} ms | first chunk p99 "
        "{chunk_p99_ms:.1f} ms | peak +{threads_peak} threads, +{rss_peak_kib} KiB RSS".format(
            **long  # type: ignore[arg-type]
        )
    )
    for row in figures["submit"]:  # type: ignore[union-attr]
        print(
            "  submit batch of {people} x{batches}: p50 {p50_s:.3f} s  p99 {p99_s:.3f} s  "
            "max {max_s:.3f} s  stalls {stalls}  wrong {wrong}".format(**row)
        )
    cost = figures["cost"]
    print(
        "  per live run: {threads_per_run:.2f} threads, {rss_kib_per_run:.0f} KiB RSS "
        "({runs} runs)".format(**cost)  # type: ignore[arg-type]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--people", default="1,8,32,128,512")
    parser.add_argument("--run-seconds", type=float, default=1.0)
    parser.add_argument("--long-people", type=int, default=128)
    parser.add_argument("--long-seconds", type=float, default=5.0)
    parser.add_argument("--batches", type=int, default=200, help="batches of 8 (and of 32)")
    parser.add_argument("--batches-32", type=int, help="batches of 32 (default: --batches)")
    parser.add_argument("--batches-128", type=int, default=25)
    parser.add_argument(
        "--no-fail", action="store_true", help="report stalls and wrong batches, exit 0"
    )
    parser.add_argument("--baseline", help="git revision to measure the same way")
    parser.add_argument(
        "--baseline-batches", type=int, default=3, help="batches of 8 for the baseline"
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON only")
    args = parser.parse_args(argv)
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
                cmd += ["--long-people", str(args.long_people)]
                cmd += ["--long-seconds", str(args.long_seconds)]
                cmd += ["--batches", str(args.baseline_batches), "--batches-32", "1"]
                cmd += ["--batches-128", "1", "--no-fail"]
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
    figures = measure(args)
    if args.json:
        print(json.dumps(figures))
    else:
        print_figures("this tree", figures)
    failed = [row for row in figures["submit"] if row["stalls"] or row["wrong"]]  # type: ignore[union-attr]
    if failed and not args.no_fail:
        print(f"FAILED: stalled or wrong batches: {failed}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    import logging

    logging.disable(logging.WARNING)
    raise SystemExit(main())

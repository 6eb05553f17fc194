"""A burst of people at once: time from the first message to the last answer, per platform.

Usage::

    python benchmarks/bench_burst.py [--people 64,128] [--platforms dingtalk,feishu,...]
        [--cap 75] [--baseline REV]

For each chat platform the playground runs (emulator + the real channel over HTTP on
127.0.0.1), N people (different user ids of the emulator's person) each send one
message at once; every run waits until all N were sent, then answers its person, so
all N answers leave the channel together. The figure is the time from the first message
to the moment the last person sees their answer in the emulator (and how many people
got none within ``--cap`` seconds). Each platform is measured with the default pools and
with every pool of the channel at one worker (hooks, card writes, timers and runs).

``--baseline REV`` measures the same on another revision (a temporary git worktree, its
``sdk`` on ``PYTHONPATH``) in the same session, so docs/performance.md can put both side
by side; a platform the revision's playground cannot run is shown as ``n/a``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PLATFORMS = ("dingtalk", "feishu", "telegram", "slack", "weixin")
#: the emulator attribute naming the person who sends
SENDER = {
    "dingtalk": "user_id",
    "feishu": "user_open_id",
    "telegram": "user_id",
    "slack": "user_id",
    "weixin": "user_id",
}
ANSWER = re.compile(r"answer for (p\d+)\.")


def person(platform: str, default: Any, index: int) -> Any:
    if isinstance(default, int):
        return 1_000_000 + index
    digits = str(70_000_000 + index)
    if platform == "feishu":
        return "ou_" + digits.rjust(len(default) - 3, "0")
    if platform == "slack":
        return f"U{digits}"
    return f"user{digits}"


def answered(pg: Any) -> set[str]:
    """The people whose answer the emulator shows (any bot message or card)."""
    import requests

    state = requests.get(f"{pg.url}/_emulator/state", timeout=10).json()
    found: set[str] = set()
    for view in state.get("views", {}).values():
        found.update(ANSWER.findall(json.dumps(view, ensure_ascii=False)))
    for entry in state.get("timeline", []):
        if entry.get("from") == "bot" and entry.get("text"):
            found.update(ANSWER.findall(str(entry["text"])))
    return found


def one_burst(platform: str, people: int, one_worker: bool, cap: float) -> dict[str, Any]:
    import requests
    from channelkit.agents import FunctionAgent
    from channelkit.playground import Playground
    from channelkit.runtime import FakeClock, WorkerPool

    everyone_sent = threading.Event()

    def agent(turn: Any) -> str:
        everyone_sent.wait(cap)
        return f"answer for {turn.text.strip()}."

    import channelkit.core.channel as channel_module

    real_pool = channel_module.WorkerPool
    if one_worker:
        channel_module.WorkerPool = lambda _n, **kw: WorkerPool(1, **kw)  # type: ignore[assignment,misc]
    clock = FakeClock(start=time.monotonic(), wall_start=time.time())
    options: dict[str, Any] = {"ingress": "webhook"} if platform == "telegram" else {}
    try:
        with Playground(
            platform=platform, agent=FunctionAgent(agent, name="burst"), clock=clock, **options
        ) as pg:
            for connection in getattr(pg.channel, "connections", ()) or ():
                deadline = time.monotonic() + 10
                while connection.state().status != "connected" and time.monotonic() < deadline:
                    time.sleep(0.01)
            emulator, attribute = pg.emulator, SENDER[platform]
            default = getattr(emulator, attribute)
            started = time.monotonic()
            try:
                for i in range(people):
                    setattr(emulator, attribute, person(platform, default, i))
                    requests.post(
                        f"{pg.url}/_emulator/send", json={"text": f"p{i}"}, timeout=10
                    ).raise_for_status()
            finally:
                setattr(emulator, attribute, default)
                everyone_sent.set()
            sent_s = time.monotonic() - started
            got: set[str] = set()
            last = started
            while time.monotonic() - started < cap:
                now_seen = answered(pg)
                if len(now_seen) > len(got):
                    last = time.monotonic()
                got = now_seen
                if len(got) >= people:
                    break
                clock.advance(0.25)
                time.sleep(0.02)
            return {
                "platform": platform,
                "people": people,
                "pools": "one worker" if one_worker else "default",
                "send_s": round(sent_s, 2),
                "last_answer_s": round(last - started, 2),
                "missing": people - len(got),
            }
    finally:
        channel_module.WorkerPool = real_pool


def measure(platforms: list[str], people: list[int], cap: float) -> list[dict[str, Any]]:
    try:
        from channelkit.playground.app import PLATFORMS as EMULATED
    except ImportError:
        EMULATED = ()
    try:  # a burst of card writes must queue at the emulator's socket, not be reset
        from channelkit.playground import server

        server._ThreadingWSGIServer.request_queue_size = 256
    except (ImportError, AttributeError):
        pass
    rows: list[dict[str, Any]] = []
    for platform in platforms:
        for n in people:
            for one_worker in (False, True):
                if platform not in EMULATED:
                    rows.append(
                        {
                            "platform": platform,
                            "people": n,
                            "pools": "one worker" if one_worker else "default",
                            "na": True,
                        }
                    )
                    continue
                rows.append(one_burst(platform, n, one_worker, cap))
                print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    return rows


def cell(row: dict[str, Any] | None, cap: float) -> str:
    if row is None or row.get("na"):
        return "n/a"
    if row["missing"]:
        return f">{cap:.0f} s ({row['missing']} unanswered)"
    return f"{row['last_answer_s']:.2f} s"


def print_table(
    mine: list[dict[str, Any]], base: list[dict[str, Any]] | None, rev: str, cap: float
) -> None:
    def key(r: dict[str, Any]) -> tuple[str, int, str]:
        return (r["platform"], r["people"], r["pools"])

    old = {key(r): r for r in base or []}
    header = "| platform | people | pools | time to the last answer |"
    if base is not None:
        header += f" {rev} |"
    print(header)
    print("|---" * (header.count("|") - 1) + "|")
    for row in mine:
        line = f"| {row['platform']} | {row['people']} | {row['pools']} | {cell(row, cap)} |"
        if base is not None:
            line += f" {cell(old.get(key(row)), cap)} |"
        print(line)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--people", default="64,128")
    parser.add_argument("--platforms", default=",".join(PLATFORMS))
    parser.add_argument("--cap", type=float, default=75.0, help="seconds to wait for answers")
    parser.add_argument("--baseline", help="git revision to measure the same way")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON only")
    args = parser.parse_args(argv)
    people = [int(p) for p in args.people.split(",")]
    platforms = [p for p in args.platforms.split(",") if p]
    base: list[dict[str, Any]] | None = None
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
                cmd = [sys.executable, str(Path(__file__).resolve()), "--json"]
                cmd += ["--people", args.people, "--platforms", args.platforms]
                cmd += ["--cap", str(args.cap)]
                done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=7200)
                if done.returncode != 0:
                    print(done.stderr[-4000:], file=sys.stderr)
                    return 1
                base = json.loads(done.stdout)
            finally:
                subprocess.run(
                    ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
                    check=False,
                    capture_output=True,
                )
    rows = measure(platforms, people, args.cap)
    if args.json:
        print(json.dumps(rows))
        return 0
    print_table(rows, base, args.baseline or "", args.cap)
    return 0


if __name__ == "__main__":
    sys.exit(main())

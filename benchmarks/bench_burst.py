"""A burst of people at once: time from the first message to the last answer, per platform.

Usage::

    python benchmarks/bench_burst.py [--people 64,128] [--platforms dingtalk,feishu,...]
        [--cap 75] [--baseline REV] [--one-chat] [--paced]

For each chat platform the playground runs (emulator + the real channel over HTTP on
127.0.0.1), N people (different user ids, in the emulator's one chat; on Telegram each
in their own private chat, see ``origin()``) each send one message at once: the
messages go out concurrently over 16 client threads, as many people typing at the
same moment would, so the figure is the channel's time rather than the
script's (sending them one after another added 0.4-2.8 s). Every run waits until all N
were sent, then answers its person, so all N answers leave the channel together. The
figure is the time from the first message to the moment the last person's answer
reaches the emulator (and how many people got none within ``--cap`` seconds): the
moment the emulator records the API call that carries it, noted as it happens; the
emulator's views are read once at the end to confirm every answer is shown. (Polling
the views instead deep-copies the whole emulator state under its lock several times a
second, which held the channel's card writes back.) The channel's fake clock keeps
pace with real time. Each platform is measured with the default pools and with every
pool of the channel at one worker (hooks, card writes, timers and runs).

The channel's outbound pacing (the platforms' documented per-chat and per-app limits) is
off unless ``--paced``: every person writes into the emulator's one chat of one app,
where for example DingTalk's 20 calls a second per app and API spread 128 people's
answers over about 20 s. That figure measures the limit, not a stall; the burst is
about stalls (as in the contract suite's burst rule, which turns pacing off the same
way).

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
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PLATFORMS = ("dingtalk", "feishu", "telegram", "slack", "weixin", "discord")
#: the emulator attribute naming the person who sends
SENDER = {
    "dingtalk": "user_id",
    "feishu": "user_open_id",
    "telegram": "user_id",
    "slack": "user_id",
    "weixin": "user_id",
    "discord": "user_id",
}
ANSWER = re.compile(r"answer for (p\d+)\.")
#: people typing at the same moment: the messages go out over this many client threads
SENDERS = 16


def person(platform: str, default: Any, index: int) -> Any:
    if isinstance(default, int):
        return 1_000_000 + index
    digits = str(70_000_000 + index)
    if platform == "feishu":
        return "ou_" + digits.rjust(len(default) - 3, "0")
    if platform == "slack":
        return f"U{digits}"
    return f"user{digits}"


def origin(
    platform: str, emulator: Any, default: Any, index: int, one_chat: bool = False
) -> dict[str, str]:
    """The extras of person ``index``'s ``/_emulator/send``: their user id, in the
    emulator's one chat (a Weixin chat is its person's). On Telegram each person writes
    from their own private chat, as people who message a bot do; ``one_chat`` names
    the emulator's one private chat instead, where Telegram allows about one message a
    second (the channel paces its answers to that: 128 answers take a minute there)."""
    extras = {"userId": str(person(platform, default, index))}
    if platform == "telegram" and one_chat:
        extras["chatId"] = str(emulator.chat_id)
    return extras


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


def one_burst(
    platform: str,
    people: int,
    one_worker: bool,
    cap: float,
    one_chat: bool = False,
    paced: bool = False,
) -> dict[str, Any]:
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
            pacer = getattr(pg.channel, "outbound_pacer", None)
            if pacer is not None and not paced:
                pacer.enabled = False
            for connection in getattr(pg.channel, "connections", ()) or ():
                deadline = time.monotonic() + 10
                while connection.state().status != "connected" and time.monotonic() < deadline:
                    time.sleep(0.01)
            emulator = pg.emulator
            # The moment each person's answer reaches the emulator: its API call that
            # carries the text, noted as the emulator records it (no polling, no lock
            # held on the emulator while the channel writes).
            seen: dict[str, float] = {}
            seen_lock = threading.Lock()
            record = emulator._record

            def noting(method: str, path: str, query: Any, body: Any, reply: Any) -> None:
                record(method, path, query, body, reply)
                if reply.status < 300:
                    found = ANSWER.findall(json.dumps(body, ensure_ascii=False, default=str))
                    if found:
                        at = time.monotonic()
                        with seen_lock:
                            for who in found:
                                seen.setdefault(who, at)

            emulator._record = noting
            default = getattr(emulator, SENDER[platform])
            origins = [origin(platform, emulator, default, i, one_chat) for i in range(people)]
            local = threading.local()

            def send(i: int) -> None:
                session = getattr(local, "session", None)
                if session is None:
                    session = local.session = requests.Session()
                body = {"text": f"p{i}", **origins[i]}
                response = session.post(f"{pg.url}/_emulator/send", json=body, timeout=10)
                response.raise_for_status()

            load = os.getloadavg()[0]
            cpu = time.process_time()
            started = time.monotonic()
            try:
                with ThreadPoolExecutor(SENDERS, thread_name_prefix="person") as people_pool:
                    for future in [people_pool.submit(send, i) for i in range(people)]:
                        future.result()
            finally:
                everyone_sent.set()
            sent_s = time.monotonic() - started
            got: set[str] = set()
            last = started
            synced = started
            while time.monotonic() - started < cap:
                with seen_lock:
                    got = set(seen)
                if len(got) >= people:
                    # the calls carried every answer: confirm the emulator shows them all
                    got = answered(pg)
                    last = max(seen.values()) if len(got) >= people else time.monotonic()
                if len(got) >= people:
                    break
                # the fake clock keeps pace with real time (timers fire as they would)
                now = time.monotonic()
                clock.advance(now - synced)
                synced = now
                time.sleep(0.02)
            return {
                "platform": platform,
                "people": people,
                "pools": "one worker" if one_worker else "default",
                "send_s": round(sent_s, 2),
                "last_answer_s": round(last - started, 2),
                "missing": people - len(got),
                # CPU seconds of the whole process (channel, emulator, people) over the
                # burst: what a loaded machine cannot inflate
                "cpu_s": round(time.process_time() - cpu, 2),
                "load": round(load, 1),
            }
    finally:
        channel_module.WorkerPool = real_pool


def measure(
    platforms: list[str],
    people: list[int],
    cap: float,
    one_chat: bool = False,
    paced: bool = False,
) -> list[dict[str, Any]]:
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
                rows.append(one_burst(platform, n, one_worker, cap, one_chat, paced))
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
    header += " CPU seconds |" if base is None else " CPU seconds: now / baseline |"
    header += " load average (1 min) |" if base is None else " load average: now / baseline |"
    print(header)
    print("|---" * (header.count("|") - 1) + "|")
    for row in mine:
        line = f"| {row['platform']} | {row['people']} | {row['pools']} | {cell(row, cap)} |"
        if base is not None:
            line += f" {cell(old.get(key(row)), cap)} |"
        pair = (row, old.get(key(row)))
        for field, digits in (("cpu_s", 2), ("load", 1)):
            values = [r[field] for r in pair if r is not None and r.get(field) is not None]
            line += f" {' / '.join(f'{x:.{digits}f}' for x in values)} |"
        print(line)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--people", default="64,128")
    parser.add_argument("--platforms", default=",".join(PLATFORMS))
    parser.add_argument("--cap", type=float, default=75.0, help="seconds to wait for answers")
    parser.add_argument("--baseline", help="git revision to measure the same way")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON only")
    parser.add_argument(
        "--one-chat",
        action="store_true",
        help="Telegram: everyone in the emulator's one private chat (paced to 1/s)",
    )
    parser.add_argument(
        "--paced",
        action="store_true",
        help="keep the platforms' outbound limits on (a measure of the limit, not a stall)",
    )
    args = parser.parse_args(argv)
    people = [int(p) for p in args.people.split(",")]
    platforms = [p for p in args.platforms.split(",") if p]
    base: list[dict[str, Any]] | None = None
    if args.baseline:
        # Each platform is measured on the baseline and then on this tree, one after the
        # other, each in a fresh interpreter: a change in the machine's load hits both.
        with tempfile.TemporaryDirectory() as tmp:
            tree = Path(tmp) / "baseline"
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), args.baseline],
                check=True,
                capture_output=True,
            )
            base, rows = [], []
            try:
                for platform in platforms:
                    for sdk, into in ((tree / "sdk", base), (ROOT / "sdk", rows)):
                        env = dict(os.environ, PYTHONPATH=str(sdk))
                        cmd = [sys.executable, str(Path(__file__).resolve()), "--json"]
                        cmd += ["--people", args.people, "--platforms", platform]
                        cmd += ["--cap", str(args.cap)] + (["--one-chat"] if args.one_chat else [])
                        cmd += ["--paced"] if args.paced else []
                        done = subprocess.run(
                            cmd, env=env, capture_output=True, text=True, timeout=7200
                        )
                        if done.returncode != 0:
                            print(done.stderr[-4000:], file=sys.stderr)
                            return 1
                        into.extend(json.loads(done.stdout))
                        print(done.stdout.strip(), file=sys.stderr, flush=True)
            finally:
                subprocess.run(
                    ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
                    check=False,
                    capture_output=True,
                )
        print_table(rows, base, args.baseline, args.cap)
        return 0
    rows = measure(platforms, people, args.cap, args.one_chat, args.paced)
    if args.json:
        print(json.dumps(rows))
        return 0
    print_table(rows, base, args.baseline or "", args.cap)
    return 0


if __name__ == "__main__":
    sys.exit(main())

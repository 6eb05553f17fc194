"""Telegram streaming: time from the agent's first chunk to the first visible output.

A real ``TelegramChannel`` (webhook ingress, default ``streaming="draft"``) talks over
HTTP to the Telegram emulator on 127.0.0.1 (the playground). For each of ``RUNS`` runs
the agent writes its first chunk, keeps writing for ``AGENT_SECONDS`` and completes.
Two figures per run, measured in the same run:

* **first draft**: from the first chunk to the first draft carrying text, as the
  emulator received it (``sendMessageDraft``; the empty thinking placeholder, sent when
  the segment opens, usually arrives just before);
* **first message** (today's first visible output, ``streaming="off"``): from the first
  chunk to the final ``sendMessage``.

Run: ``python benchmarks/bench_telegram_streaming.py`` (target: first draft p50/p99
< 300 ms).
"""

from __future__ import annotations

import statistics
import threading
import time

from channelkit.agents import FunctionAgent
from channelkit.agents.function import Turn
from channelkit.playground import Playground, TelegramEmulator

RUNS = 30
AGENT_SECONDS = 0.6
CHUNKS = 30


class TimedAgent:
    def __init__(self) -> None:
        self.first_chunk: list[float] = []  # time.monotonic() of each run's first chunk
        self.done = threading.Semaphore(0)

    def __call__(self, turn: Turn) -> str | None:
        for i in range(CHUNKS):
            if i == 0:
                self.first_chunk.append(time.monotonic())
            turn.say(f"word{i} ")
            time.sleep(AGENT_SECONDS / CHUNKS)  # the agent's own pace, not a test wait
        self.done.release()
        return None


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    agent = TimedAgent()
    with Playground(platform="telegram", agent=FunctionAgent(agent), ingress="webhook") as pg:
        emulator = pg.emulator
        assert isinstance(emulator, TelegramEmulator)
        firsts: list[float] = []
        finals: list[float] = []
        for run in range(RUNS):
            seen_drafts = len(emulator.drafts())
            seen_calls = len(emulator.calls())
            emulator.send_user_message(f"run {run}")
            assert agent.done.acquire(timeout=30)
            deadline = time.monotonic() + 10
            final_at = None
            while final_at is None and time.monotonic() < deadline:
                for call in list(emulator.calls())[seen_calls:]:
                    if call["path"].endswith("/sendMessage") and call["status"] == 200:
                        final_at = call["at"]
                time.sleep(0.005)
            start = agent.first_chunk[run]
            drafts = [d for d in emulator.drafts()[seen_drafts:] if d["text"]]
            firsts.append(drafts[0]["monotonic"] - start)
            assert final_at is not None
            # calls carry wall time: convert through the offset at this moment
            finals.append(final_at - (time.time() - time.monotonic()) - start)
            time.sleep(0.05)
    print(f"Telegram streaming, {RUNS} runs, agent writing {AGENT_SECONDS:.1f} s each")
    for name, values in (("first draft", firsts), ("first message (final)", finals)):
        print(
            f"  {name:24s} p50 {statistics.median(values) * 1000:7.1f} ms"
            f"   p99 {_pct(values, 0.99) * 1000:7.1f} ms"
        )


if __name__ == "__main__":
    main()

"""Core overhead benchmark.

1. Per-chunk overhead: a bridge streams text chunks into the ChannelBase sink; the
   adapter's hooks are no-ops. We time sink call -> lifecycle event -> segment
   bookkeeping -> lane -> on_task_lifecycle + on_response_chunk, per chunk, and report
   the median over several batches (pinned to one CPU when the OS allows it).
2. Thread count with 10,000 pending question timers: one run asks 10,000 questions
   (each registers a pending request with an expiry timer on the scheduler); we count
   live threads against the pool size.

Run: python benchmarks/bench_core.py
"""

from __future__ import annotations

import os
import statistics
import sys
import threading
import time

from channelkit.agents.base import AgentEventSink, PermissionResponse
from channelkit.core import (
    ChannelBase,
    ChannelConfig,
    InboundMessage,
    UserInputPresentationResult,
    UserInputRequestContext,
)
from channelkit.testing import question_request

CHUNKS = 10_000
BATCHES = 7
TIMERS = 10_000


class NoopChannel(ChannelBase):
    def send_message(self, chat_id: str, text: str, *, thread_id: str | None = None) -> None:
        pass

    def present_user_input_request(
        self, context: UserInputRequestContext
    ) -> UserInputPresentationResult:
        return UserInputPresentationResult.PRESENTED


class ChunkBridge:
    def __init__(self, chunks: int) -> None:
        self.chunks = chunks
        self.producer_seconds = 0.0

    def prompt(self, session_id: str, text: str, sink: AgentEventSink) -> str:
        emit = sink.text_chunk
        start = time.perf_counter()
        for _ in range(self.chunks):
            emit(session_id, "tok ")
        self.producer_seconds = time.perf_counter() - start
        return ""

    def cancel_session(self, session_id: str) -> bool:
        return True

    def respond_to_permission(self, request_id: str, response: PermissionResponse) -> bool:
        return True

    def close(self) -> None:
        pass


class QuestionBridge(ChunkBridge):
    def prompt(self, session_id: str, text: str, sink: AgentEventSink) -> str:
        for i in range(TIMERS):
            sink.permission_request(question_request(f"q-{i}", session_id))
        return ""


def bench_chunks() -> tuple[float, float]:
    bridge = ChunkBridge(CHUNKS)
    channel = NoopChannel(ChannelConfig(name="bench", max_workers=4), bridge)
    totals: list[float] = []
    producer: list[float] = []
    try:
        for i in range(BATCHES + 1):
            msg = InboundMessage("bench", "chat", "user", "go", message_id=f"m{i}")
            start = time.perf_counter()
            result = channel.handle_inbound(msg).result(120)
            elapsed = time.perf_counter() - start
            assert result.status == "completed"
            if i == 0:
                continue  # warm-up
            totals.append(elapsed / CHUNKS * 1e6)
            producer.append(bridge.producer_seconds / CHUNKS * 1e6)
    finally:
        channel.close()
    return statistics.median(totals), statistics.median(producer)


def bench_timers() -> tuple[int, int, int, int]:
    channel = NoopChannel(
        ChannelConfig(name="bench-timers", max_workers=8, max_pending_permissions=TIMERS),
        QuestionBridge(0),
    )
    baseline = threading.active_count()
    try:
        msg = InboundMessage("bench-timers", "chat", "user", "ask", message_id="m")
        channel.handle_inbound(msg).result(120)
        channel.wait_idle(60)
        pending = channel.scheduler.pending_count()
        threads = threading.active_count()
        return pending, threads - baseline, channel.pool.max_workers, threads
    finally:
        channel.close()


def main() -> None:
    pinned = False
    if hasattr(os, "sched_setaffinity"):
        try:
            os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
            pinned = True
        except OSError:
            pass
    per_chunk, producer = bench_chunks()
    print(f"python {sys.version.split()[0]}, pinned to one CPU: {pinned}")
    print(
        f"per-chunk overhead, sink -> no-op hooks (median of {BATCHES} x {CHUNKS} chunks): "
        f"{per_chunk:.2f} us (sink call alone: {producer:.2f} us)"
    )
    pending, added, pool_size, total = bench_timers()
    print(
        f"{pending} pending question timers: {added} threads added by the channel "
        f"(pool size {pool_size}, limit pool + 2 = {pool_size + 2}); {total} threads in process"
    )


if __name__ == "__main__":
    main()

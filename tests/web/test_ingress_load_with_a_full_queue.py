"""10,000 distinct signed messages with the run queue full about half the time: none lost.

Every message goes through the DingTalk robot ingress handler (signature check, parse,
dedup, admission) and its deferred work runs as the web layer runs it. The channel runs
at most 8 agent runs with 16 more queued; the agent blocks until the test releases a wave.
Waves of 12 to 72 messages (seeded) overfill the queue in most waves, so about half of
the messages meet a full queue. Message timestamps
come from a fake clock, 6 ms apart: 60 s of platform time, each message signed at its own
millisecond (DingTalk signs only the timestamp, and signatures are one-use: two requests
signed in the same millisecond would carry the same signature, see docs/security.md).

Every message is either started (the agent is called once with it, and its reply is sent
once) or answered in its chat with the busy notice, never both, never neither.
"""

from __future__ import annotations

import json
import logging
import random
import threading
from collections import Counter
from collections.abc import Iterator

import pytest
from channelkit.core import ChannelConfig
from channelkit.core.text import MSG_BUSY
from channelkit.ingress import Headers, IngressRequest
from channelkit.platforms.dingtalk import DingtalkChannel, DingtalkConfig, robot_signature

from tests.platforms._shared import Runtime, settle_pools, wait_until
from tests.platforms.dingtalk.dingtalk_helpers import FakeDingtalkApi

MESSAGES = 10_000
STEP_S = 0.006  # 10,000 messages x 6 ms = 60 s of platform time
MAX_RUNNING = 8
MAX_QUEUED = 16
SECRET = "ding-app-secret"
#: HTTP callbacks (where the config offers a choice of ingress, Stream mode is the default)
HTTP_INGRESS = {"ingress": "http"} if "ingress" in DingtalkConfig.__dataclass_fields__ else {}


class WaveAgent:
    """An agent bridge whose every run blocks until the current wave is released."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls: list[str] = []
        self.gate = threading.Event()

    def prompt(self, session_id: str, text: str, sink: object) -> str:
        with self.lock:
            self.calls.append(text)
            gate = self.gate
        assert gate.wait(10), "wave never released"
        return f"done {text}"

    def cancel_session(self, session_id: str) -> bool:
        return True

    def respond_to_permission(self, request_id: str, response: object) -> bool:
        return False

    def close(self) -> None:
        pass


@pytest.fixture
def setup() -> Iterator[tuple[Runtime, DingtalkChannel, FakeDingtalkApi, WaveAgent]]:
    # ~5,000 "refusing a run" warnings are expected here: not formatted and captured
    quiet = logging.getLogger("channelkit")
    previous = quiet.level
    quiet.setLevel(logging.ERROR)
    rt = Runtime()
    api = FakeDingtalkApi()
    agent = WaveAgent()
    channel = DingtalkChannel(
        DingtalkConfig(
            client_id="ding-robot",
            client_secret=SECRET,
            interactive_cards={"enabled": False},  # replies and notices as Markdown
            **HTTP_INGRESS,
        ),
        agent,  # type: ignore[arg-type]
        api=api,
        channel_config=ChannelConfig(
            name="dingtalk", max_concurrent_runs=MAX_RUNNING, max_queued_runs=MAX_QUEUED
        ),
        executor=rt.pool,
        run_executor=rt.run_pool,
        scheduler=rt.scheduler,
        clock=rt.clock,
    )
    yield rt, channel, api, agent
    agent.gate.set()
    channel.close(timeout=5)
    rt.close()
    quiet.setLevel(previous)


def _body(n: int) -> bytes:
    return json.dumps(
        {
            "msgId": f"msg-{n}",
            "msgtype": "text",
            "text": {"content": f"m-{n}"},
            "conversationId": f"cid-{n}",  # one chat and one person per message
            "conversationType": "2",
            "senderId": f"$:LWCP_v1:$staff-{n}",
            "senderStaffId": f"staff-{n}",
            "senderNick": f"staff-{n}",
        }
    ).encode()


@pytest.mark.slow
def test_every_message_is_started_or_answered_busy_exactly_once(
    setup: tuple[Runtime, DingtalkChannel, FakeDingtalkApi, WaveAgent],
) -> None:
    rt, channel, api, agent = setup
    waves = random.Random(20240601)
    sizes: list[int] = []
    while sum(sizes) < MESSAGES:
        sizes.append(min(waves.randint(12, 72), MESSAGES - sum(sizes)))
    signed_ms: set[int] = set()
    n = 0
    for size in sizes:
        agent.gate = threading.Event()  # this wave's runs block until released
        for _ in range(size):
            rt.clock.advance(STEP_S)
            ts = int(rt.clock.time() * 1000)
            assert ts not in signed_ms  # its own millisecond: its own one-use signature
            signed_ms.add(ts)
            headers = Headers({"timestamp": str(ts), "sign": robot_signature(str(ts), SECRET)})
            response = channel.handle_robot_request(
                IngressRequest("POST", "/dingtalk/robot", headers, _body(n))
            )
            assert response.status == 200, (n, response.status)
            response.run_after()  # the web layer's part, once the ACK is written
            n += 1
        started = min(size, MAX_RUNNING)
        wait_until(lambda s=started: channel.run_stats["active"] == s)
        agent.gate.set()
        wait_until(lambda: channel.run_stats == {"active": 0, "waiting": 0, "queued": 0})
        settle_pools(rt.run_pool, rt.pool)
    assert n == MESSAGES
    assert rt.clock.time() * 1000 - min(signed_ms) >= 59_990  # 60 s of platform time

    called = Counter(agent.calls)
    replies: Counter[str] = Counter()
    busy: Counter[str] = Counter()
    for op, kw in api.ops():
        if op.startswith("emotion_"):
            continue  # the "thinking" reaction on the inbound message
        assert op == "group", op  # Markdown only: no webhook, no card, no direct message
        text, chat = kw["text"], kw["chat_id"]
        if text == MSG_BUSY:
            busy[chat] += 1
        elif text.startswith("done m-"):
            assert text == f"done m-{chat.removeprefix('cid-')}"  # each reply in its own chat
            replies[chat] += 1
    for i in range(MESSAGES):
        chat, text = f"cid-{i}", f"m-{i}"
        outcome = (called[text], replies[chat], busy[chat])
        assert outcome in ((1, 1, 0), (0, 0, 1)), (i, outcome)  # started xor busy, once
    # the admission arithmetic: each wave starts 8, queues 16, refuses the rest
    expected_busy = sum(max(0, size - MAX_RUNNING - MAX_QUEUED) for size in sizes)
    assert sum(busy.values()) == expected_busy
    assert len(called) == MESSAGES - expected_busy
    full_waves = sum(1 for size in sizes if size > MAX_RUNNING + MAX_QUEUED)
    assert 0.5 < full_waves / len(sizes) < 0.9  # the queue overflowed in most waves, not all
    assert 0.3 < expected_busy / MESSAGES < 0.6  # about half the messages met a full queue

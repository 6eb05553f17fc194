"""Two TelegramChannels of one bot sharing one real Redis store stream into ONE group on
the Telegram emulator with its per-chat limits enforced (20 messages a minute, burst 20;
edits count): each agent streams about 1,000 chunks a second for 6 s, a response boundary
every 1,000 chunks (a new message each: unpaced, the two instances' posts and edits get
about ten 429s). The shared token bucket paces both instances together: the emulator
answered no 429, and both answers arrived complete, every segment in order (issue 28)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from channelkit.core import ChannelConfig
from channelkit.platforms.telegram import TelegramChannel, TelegramConfig
from channelkit.playground.emulator import Origin
from channelkit.playground.server import EmulatorServer
from channelkit.playground.telegram import GROUP_CHAT_ID
from channelkit.testing import ScriptContext, ScriptedBridge, wait_until

pytestmark = pytest.mark.slow  # many seconds of real time: its file starts first

TOKEN = "123456:rate-limit-token"
BOT = "channelkit_limits_bot"
SECRET = "rate-limit-secret"
STREAM_S = 6.0  # each agent streams this long
SEGMENT = 1_000  # chunks between two response boundaries (a new message each)
CHUNKS_PER_S = 1_000
WAIT = 60.0  # bounded wait for both answers (a final may wait ~3.3 s for a group token)


def _flood(seconds: float, alphabet: str, finals: list[str]) -> Any:
    """Stream one-character chunks at about `CHUNKS_PER_S` for ``seconds``; the final
    answer is everything streamed (also appended to ``finals``)."""

    def step(ctx: ScriptContext) -> None:
        deadline = time.monotonic() + seconds
        n = 0
        while time.monotonic() < deadline:
            text = alphabet[n % len(alphabet)]
            ctx.said.append(text)
            ctx.sink.text_chunk(ctx.session_id, text)
            n += 1
            if n % SEGMENT == 0:
                ctx.sink.response_boundary(ctx.session_id)
            if n % 10 == 0:
                time.sleep(10 / CHUNKS_PER_S)  # the agent's pace: ~1,000 chunks a second
        ctx.final = "".join(ctx.said)
        finals.append(ctx.final)

    return step


@pytest.fixture
def emulator() -> Iterator[EmulatorServer]:
    with EmulatorServer(platform="telegram", bot_token=TOKEN, bot_username=BOT) as emu:
        yield emu


def _channel(emu: EmulatorServer, bridge: ScriptedBridge, store: Any) -> TelegramChannel:
    config = TelegramConfig(
        bot_token=TOKEN,
        webhook_secret=SECRET,
        api_base_url=emu.url,
        ingress="webhook",
        bot_username=BOT,
        streaming="edit",
    )
    return TelegramChannel(
        config, bridge, channel_config=ChannelConfig(name="telegram", max_workers=8), store=store
    )


def _group_update(emu: EmulatorServer, user: str, thread: str, text: str) -> dict[str, Any]:
    origin = Origin(user_id=user, group=True, mentions_bot=True, thread_id=thread)
    emu.emulator.send_user_message(text, origin=origin)  # no webhook: queued for us
    return emu.emulator.pending_updates()[-1]


def test_two_instances_streaming_into_one_group_get_no_429_and_lose_no_answer(  # type: ignore[no-untyped-def]
    emulator, redis_server
) -> None:
    from channelkit.state import RedisStore

    limits = emulator.emulator.limits.control("POST", "/_emulator/limits", {"enabled": True})
    assert limits.payload["group_per_minute"] == 20 and limits.payload["enabled"] is True
    namespace = f"tg-limits-{uuid.uuid4().hex[:8]}"
    stores = [RedisStore(redis_server.url, namespace=namespace) for _ in range(2)]
    answers: list[str] = []
    alphabets = ("0123456789", "abcdefghij")
    bridges = [ScriptedBridge([_flood(STREAM_S, a, answers)]) for a in alphabets]
    channels = [_channel(emulator, b, s) for b, s in zip(bridges, stores, strict=True)]
    try:
        updates = [
            _group_update(emulator, "1001", "11", "first question"),
            _group_update(emulator, "1002", "12", "second question"),
        ]
        for channel, update in zip(channels, updates, strict=True):
            response = channel.receive_update(update)
            assert response.status == 200
            response.run_after()

        def shown(alphabet: str) -> str:
            """The group messages of one answer, in order, joined."""
            views = emulator.emulator.state()["views"]
            ordered = [views[k].get("text") or "" for k in sorted(views, key=int)]
            return "".join(t for t in ordered if t and set(t) <= set(alphabet))

        def finished() -> bool:
            if len(answers) < 2:
                return False
            return sorted(shown(a) for a in alphabets) == sorted(answers)

        assert wait_until(finished, timeout=WAIT), (len(answers), emulator.emulator.limits.view())
        assert all(len(a) > 3 * SEGMENT for a in answers)  # several segments each
        state = emulator.emulator.state()
        assert state["rejected_429"] == 0
        group_writes = [
            c
            for c in emulator.emulator.calls()
            if c["path"].rsplit("/", 1)[-1] in ("sendMessage", "editMessageText")
            and str((c.get("body") or {}).get("chat_id")) == str(GROUP_CHAT_ID)
        ]
        elapsed = group_writes[-1]["at"] - group_writes[0]["at"]
        assert len(group_writes) <= 20 + elapsed * 20 / 60  # inside the group's budget
    finally:
        for channel in channels:
            channel.close()
        for store in stores:
            store.close()

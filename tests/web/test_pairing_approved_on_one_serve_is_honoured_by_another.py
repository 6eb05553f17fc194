"""Pairing across processes with a real ``redis-server`` on 127.0.0.1: two ``channelkit
serve`` processes run one Telegram bot (its emulator on 127.0.0.1) and share one Redis.

A stranger's direct message to process 1 gets a one-time code in that chat and reaches no
agent; ``channelkit pairing approve CODE`` answers it in Redis; the stranger's next message,
delivered to process 2, reaches the agent. A used code cannot be used again. Codes and
each person's live code expire in Redis (an hour; the test lets the hour pass by
shortening the keys' expiry instead of waiting), after which the code is refused and the
person gets a new one. At most ``MAX_PAIRING_CODES`` codes wait at once.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from channelkit.cli import main
from channelkit.core.pairing import MAX_PAIRING_CODES, PAIRING_CODE_TTL_S, PairingBook
from channelkit.platforms import PLATFORMS
from channelkit.playground import EmulatorServer
from channelkit.playground.emulator import Origin
from channelkit.testing import wait_until
from serve_process import CommandProcess

HERE = Path(__file__).resolve().parent
WAIT = 45.0  # two serve processes starting on a loaded 2-core machine
CHANNEL = "bot"
#: a pairing code as the bot shows it (8 characters, no 0/O or 1/I)
CODE_RE = re.compile(r"\b[A-HJ-NP-Z2-9]{8}\b")


@pytest.fixture
def telegram() -> Iterator[EmulatorServer]:
    server = EmulatorServer(platform="telegram")
    try:
        yield server
    finally:
        server.close()


def _config(tmp_path: Path, telegram: EmulatorServer, redis_url: str, namespace: str) -> str:
    playground = PLATFORMS["telegram"].playground
    assert playground is not None
    document = {
        "channels": [
            {
                "platform": "telegram",
                "name": CHANNEL,
                "credentials": dict(playground.credentials),
                "options": {"ingress": "webhook", playground.api_base_url_option: telegram.url},
                "access": {"dm": "pairing"},
            }
        ],
        "state": {"redis": {"url": redis_url, "namespace": namespace}},
        "agent": {"type": "function", "function": "recording_serve_agent:agent"},
        "options": {"logLevel": "WARNING"},
        "server": {"host": "127.0.0.1", "port": 0},
    }
    path = tmp_path / "bot.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return str(path)


def _prompts(record: Path) -> list[str]:
    if not record.exists():
        return []
    lines = record.read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["text"] for line in lines if line.strip()]


def _said_to(telegram: EmulatorServer, chat: str) -> list[str]:
    """The texts the bot sent to ``chat`` so far."""
    return [
        str(call["body"].get("text", ""))
        for call in telegram.emulator.calls()
        if call["path"].endswith("/sendMessage") and str(call["body"].get("chat_id")) == chat
    ]


def _write(telegram: EmulatorServer, serve_url: str, person: str, text: str) -> None:
    """``person`` writes ``text`` to the bot directly; Telegram delivers it to the serve
    process at ``serve_url`` (the webhook of the emulator points there)."""
    telegram.emulator.webhook_url = f"{serve_url}/telegram/webhook"
    _, delivery = telegram.emulator.send_user_message(text, origin=Origin(user_id=person))
    assert delivery.status == 200, delivery


def _new_code(telegram: EmulatorServer, person: str, told_before: int) -> str:
    """The code in the bot's next message to ``person`` (after ``told_before`` texts)."""
    text = wait_until(
        lambda: _said_to(telegram, person)[told_before:],
        WAIT,
        0.05,
        what=f"a pairing code in {person}'s chat",
    )[0]
    found = CODE_RE.search(text)
    assert found is not None, text
    return found.group(0)


def test_a_code_approved_in_redis_admits_the_person_on_the_other_process(
    tmp_path: Path,
    telegram: EmulatorServer,
    redis_server: Any,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import redis

    namespace = "pairing-" + uuid.uuid4().hex[:8]
    config = _config(tmp_path, telegram, redis_server.url, namespace)
    record = tmp_path / "prompts.jsonl"
    monkeypatch.setenv("CHANNELKIT_TEST_RECORD", str(record))
    raw = redis.Redis.from_url(redis_server.url)
    one = CommandProcess(["serve", "--config", config], pythonpath=[HERE])
    two = CommandProcess(["serve", "--config", config], pythonpath=[HERE])
    try:
        listening = r"listening on (http://127\.0\.0\.1:\d+)"
        url_one = one.wait_for_line(listening, WAIT).group(1)
        url_two = two.wait_for_line(listening, WAIT).group(1)
        cli = ["pairing", "--config", config]

        # a stranger writes to process 1: a code in their chat, nothing reaches the agent
        _write(telegram, url_one, "7771", "hello?")
        code = _new_code(telegram, "7771", 0)
        assert main([*cli, "list"]) == 0
        assert f"{code}  user=7771" in capsys.readouterr().out
        assert _prompts(record) == []

        # the code and the person's live code expire in Redis within the hour
        keys = {
            "code": f"{namespace}:k:pairing:{CHANNEL}:code:{code}",
            "user": f"{namespace}:k:pairing:{CHANNEL}:user:7771",
        }
        for key in keys.values():
            assert 0 < raw.pttl(key) <= PAIRING_CODE_TTL_S * 1000, key

        # approved through Redis; process 2 admits the person at once
        assert main([*cli, "approve", code]) == 0
        assert f"approved {code}: user 7771" in capsys.readouterr().out
        assert all(raw.exists(key) == 0 for key in keys.values())
        _write(telegram, url_two, "7771", "let me in")
        wait_until(
            lambda: _prompts(record) == ["let me in"], WAIT, 0.05, what="the agent on process 2"
        )
        wait_until(
            lambda: any("ni em tel" in t for t in _said_to(telegram, "7771")),
            WAIT,
            0.05,
            what="the agent's answer in the person's chat",
        )

        # a used code works once
        assert main([*cli, "approve", code]) == 1
        assert "no such code" in capsys.readouterr().err

        # another stranger, through process 2; the hour passes (Redis expires the keys
        # now instead of in an hour): the code is refused and they get a fresh one
        _write(telegram, url_two, "8881", "hi")
        late = _new_code(telegram, "8881", 0)
        for key in ("code:" + late, "user:8881"):
            assert raw.pexpire(f"{namespace}:k:pairing:{CHANNEL}:{key}", 1)
        wait_until(
            lambda: not raw.exists(f"{namespace}:k:pairing:{CHANNEL}:code:{late}"),
            WAIT,
            0.01,
            what="Redis to expire the code",
        )
        assert main([*cli, "approve", late]) == 1
        assert "no such code" in capsys.readouterr().err
        _write(telegram, url_one, "8881", "hi again")
        fresh = _new_code(telegram, "8881", 1)
        assert fresh != late
        assert _prompts(record) == ["let me in"]  # the stranger never reached the agent
    finally:
        raw.close()
        for process in (one, two):
            process.kill()


def test_at_most_max_pairing_codes_wait_in_redis_each_with_an_expiry(redis_server: Any) -> None:
    import redis
    from channelkit.state.redis import RedisStore

    namespace = "pairing-" + uuid.uuid4().hex[:8]
    store = RedisStore(redis_server.url, namespace=namespace)
    raw = redis.Redis.from_url(redis_server.url)
    try:
        book = PairingBook(CHANNEL, store)
        pipe = raw.pipeline(transaction=False)
        for n in range(MAX_PAIRING_CODES):  # the codes of as many strangers, waiting
            record = json.dumps({"user": f"u{n}", "chat": f"u{n}", "at": 0.0})
            key = f"{namespace}:k:pairing:{CHANNEL}:code:C{n:07d}"
            pipe.set(key, record, px=int(PAIRING_CODE_TTL_S * 1000))
        pipe.execute()
        assert book.request("one-too-many", "one-too-many") is None
        assert raw.exists(f"{namespace}:k:pairing:{CHANNEL}:user:one-too-many") == 0

        raw.delete(f"{namespace}:k:pairing:{CHANNEL}:code:C0000000")  # one answered
        code = book.request("next", "next")
        assert code is not None
        pairing_keys = list(raw.scan_iter(f"{namespace}:k:pairing:*", count=500))
        assert len(pairing_keys) == MAX_PAIRING_CODES + 1  # the codes and one live code
        # every waiting record expires (the approved list is the operator's allowlist)
        ttls = raw.pipeline(transaction=False)
        for key in pairing_keys:
            ttls.pttl(key)
        assert all(0 < ttl <= PAIRING_CODE_TTL_S * 1000 for ttl in ttls.execute())
    finally:
        raw.close()
        store.close()

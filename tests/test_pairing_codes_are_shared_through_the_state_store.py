"""Pairing (``access.dm = "pairing"``) keeps its records in the channel's state store:
two processes sharing a store agree (a code issued by one is approved through the other,
once), codes expire after an hour, and ``channelkit pairing`` answers them in Redis."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from channelkit.cli import main
from channelkit.core import InboundMessage
from channelkit.core.access import AccessConfig, AccessGate
from channelkit.core.pairing import PAIRING_CODE_TTL_S, PairingBook
from channelkit.runtime import FakeClock
from channelkit.state.memory import MemoryStore

PAIRING = AccessConfig(dm="pairing")


def dm(sender: str) -> InboundMessage:
    return InboundMessage("bot", chat_id=f"dm-{sender}", sender_id=sender, text="hi")


def gate(store: Any, clock: FakeClock) -> AccessGate:
    return AccessGate(PAIRING, clock=clock, channel_name="bot", store=lambda: store)


def test_a_code_issued_by_one_process_is_approved_once_through_another() -> None:
    clock = FakeClock()
    shared = MemoryStore(clock=clock)
    first, second = gate(shared, clock), gate(shared, clock)
    notice = first.check(dm("newbie")).notice
    assert notice is not None
    (request,) = second.pairing_codes()
    assert request.code in notice and request.user_id == "newbie"
    assert second.check(dm("newbie")).notice is None  # the live code was told already
    assert second.approve(request.code.lower()) == request
    assert first.check(dm("newbie")).admitted
    assert first.approve(request.code) is None  # used once, anywhere
    assert first.revoke("newbie")
    assert not second.check(dm("newbie")).admitted


def test_codes_expire_after_an_hour() -> None:
    clock = FakeClock()
    store = MemoryStore(clock=clock)
    g = gate(store, clock)
    g.check(dm("late"))
    (request,) = g.pairing_codes()
    clock.advance(PAIRING_CODE_TTL_S + 1)
    assert g.pairing_codes() == []
    assert g.approve(request.code) is None
    assert g.check(dm("late")).notice is not None  # a fresh code


def test_a_channel_without_a_store_of_its_own_pairs_in_process() -> None:
    clock = FakeClock()
    g = AccessGate(PAIRING, clock=clock)
    g.check(dm("solo"))
    (request,) = g.pairing_codes()
    assert g.deny(request.code) == request
    assert g.pairing_codes() == [] and not g.check(dm("solo")).admitted


def _config(tmp_path: Path, url: str, namespace: str) -> str:
    document = {
        "channels": [
            {
                "platform": "telegram",
                "name": "bot",
                "credentials": {"botToken": "123456:ABC"},
                "options": {"ingress": "webhook", "apiBaseUrl": "http://127.0.0.1:9"},
                "access": {"dm": "pairing"},
            }
        ],
        "state": {"redis": {"url": url, "namespace": namespace}},
    }
    path = tmp_path / "bot.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return str(path)


def test_the_cli_answers_codes_in_redis_seen_by_every_process(
    tmp_path: Path, redis_server: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from channelkit.state.redis import RedisStore

    namespace = "pairing-" + uuid.uuid4().hex[:8]
    one = RedisStore(redis_server.url, namespace=namespace)
    two = RedisStore(redis_server.url, namespace=namespace)
    config = _config(tmp_path, redis_server.url, namespace)
    try:
        clock = FakeClock()
        process_a, process_b = gate(one, clock), gate(two, clock)
        assert process_a.check(dm("newbie")).notice is not None
        (request,) = PairingBook("bot", two).codes()

        assert main(["pairing", "--config", config, "list"]) == 0
        assert request.code in capsys.readouterr().out
        assert main(["pairing", "--config", config, "approve", request.code]) == 0
        assert f"approved {request.code}" in capsys.readouterr().out
        assert process_b.check(dm("newbie")).admitted  # the other process honours it
        assert main(["pairing", "--config", config, "approve", request.code]) == 1
        assert "no such code" in capsys.readouterr().err
        assert main(["pairing", "--config", config, "revoke", "newbie"]) == 0
        assert not process_a.check(dm("newbie")).admitted
    finally:
        one.close()
        two.close()


def test_the_cli_refuses_the_in_memory_store_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document = json.loads(Path(_config(tmp_path, "redis://127.0.0.1:1/0", "x")).read_text())
    del document["state"]
    path = tmp_path / "memory.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    assert main(["pairing", "--config", str(path), "list"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "needs state.redis" in err
    assert main(["pairing", "--config", str(path), "approve"]) == 2
    assert "approve: needs a CODE" in capsys.readouterr().err

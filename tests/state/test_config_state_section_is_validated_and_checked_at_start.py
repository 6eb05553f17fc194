"""The configuration's ``state`` section: schema and validation naming the path, the
store it builds, and check-config / serve refusing to start with one line when Redis is
unreachable (the URL's password never shown)."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest
from channelkit import cli
from channelkit.config import build_state_store, parse_config
from channelkit.errors import ConfigurationError
from channelkit.state import MemoryStore

CHANNEL = {"platform": "telegram", "name": "helpdesk", "credentials": {"botToken": "1:abc"}}


def document(state: Any = None) -> dict[str, Any]:
    doc: dict[str, Any] = {"channels": [CHANNEL], "agent": {"type": "demo"}}
    if state is not None:
        doc["state"] = state
    return doc


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # nothing listens once the socket closes


@pytest.mark.parametrize(
    ("state", "path"),
    [
        ({"redis": {}}, "state.redis.url"),
        ({"redis": {"url": ""}}, "state.redis.url"),
        ({"redis": {"url": "http://localhost:6379"}}, "state.redis.url"),
        ({"redis": {"url": {"env": "CK_TEST_UNSET_REDIS_URL"}}}, "state.redis.url"),
        ({"redis": {"url": "redis://h", "namespace": "a:b"}}, "state.redis.namespace"),
        ({"redis": {"url": "redis://h", "socketTimeoutSeconds": 0}}, "state.redis"),
        ({"redis": {"url": "redis://h", "pasword": "x"}}, "state.redis.pasword"),
        ({"memcached": {}}, "state.memcached"),
        ({"redis": "redis://h"}, "state.redis"),
    ],
)
def test_a_bad_state_section_is_rejected_naming_its_path(state: Any, path: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        parse_config(document(state), environ={})
    assert caught.value.path is not None
    assert caught.value.path.startswith(path), (caught.value.path, str(caught.value))


def test_without_a_state_section_the_bot_keeps_its_state_in_memory_under_its_name() -> None:
    store = build_state_store(parse_config(document(), environ={}))
    assert isinstance(store, MemoryStore)
    assert store.namespace == "helpdesk"


def test_a_redis_section_builds_a_redis_store_with_its_namespace_and_hides_the_password() -> None:
    pytest.importorskip("redis", reason="redis-py is not installed (the redis extra)")
    from channelkit.state import RedisStore

    state = {"redis": {"url": {"env": "CK_REDIS_URL"}, "namespace": "bot-a"}}
    config = parse_config(document(state), environ={"CK_REDIS_URL": "redis://:pw-xyz@h:1/0"})
    assert "pw-xyz" not in repr(config)
    store = build_state_store(config)  # building does not contact Redis
    assert isinstance(store, RedisStore)
    assert store.namespace == "bot-a"
    assert "pw-xyz" not in repr(store)
    store.close()
    default = build_state_store(parse_config(document({"redis": {"url": "redis://h"}})))
    assert default.namespace == "helpdesk", "the bot's (first channel's) name"
    default.close()


def write(tmp_path: Path, doc: dict[str, Any]) -> str:
    path = tmp_path / "channelkit.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return str(path)


def test_check_config_and_serve_refuse_to_start_in_one_line_when_redis_is_unreachable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("redis", reason="redis-py is not installed (the redis extra)")
    url = f"redis://:hunter2-secret@127.0.0.1:{closed_port()}/0"
    config = write(tmp_path, document({"redis": {"url": url, "socketTimeoutSeconds": 0.5}}))
    assert cli.main(["check-config", config]) == 2
    check = capsys.readouterr()
    assert cli.main(["serve", "--check", "--config", config]) == 2
    serve = capsys.readouterr()
    for out in (check, serve):
        lines = out.err.strip().splitlines()
        assert len(lines) == 1, out.err
        assert "state.redis.url" in lines[0]
        assert "refuses to start" in lines[0]
        assert "hunter2-secret" not in out.err + out.out
        assert "Traceback" not in out.err


def test_check_config_passes_when_redis_answers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], redis_server: Any
) -> None:
    pytest.importorskip("redis", reason="redis-py is not installed (the redis extra)")
    config = write(tmp_path, document({"redis": {"url": redis_server.url}}))
    assert cli.main(["check-config", config]) == 0
    assert capsys.readouterr().out.startswith("ok:")

"""Weixin long polling against a fake iLink server on 127.0.0.1.

Messages arrive across two ``getupdates`` calls, the second sent with the first's
``get_updates_buf`` cursor; a redelivered message is ignored; a transient ``errcode``
backs off (the injected wait records the delay); ``errcode`` -14 (session expired)
stops polling with exactly one error log; stopping cuts a long poll in progress.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from channelkit.agents import FunctionAgent
from channelkit.platforms.common.connection import Backoff
from channelkit.platforms.weixin import WeixinChannel, WeixinConfig
from channelkit.platforms.weixin.polling import WeixinPolling
from channelkit.testing import wait_until

LONG = 20.0  # generous bound for a loaded 2-core CI machine
HOLD_S = 30.0


def _msg(message_id: int, user: str, text: str) -> dict[str, Any]:
    return {
        "message_id": message_id,
        "from_user_id": user,
        "to_user_id": "bot",
        "message_type": 1,
        "message_state": 2,
        "context_token": f"ctx-{message_id}",
        "item_list": [{"type": 1, "text_item": {"text": text}}],
    }


class FakeIlink(ThreadingHTTPServer):
    """``getupdates`` answers from ``script``; every other call answers ``{ret: 0}``."""

    daemon_threads = True

    def __init__(self, script: list[Any]) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.url = f"http://127.0.0.1:{self.server_address[1]}"
        self.script = list(script)
        self.polls: list[dict[str, Any]] = []
        self.sent: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.closing = threading.Event()
        self.holding = threading.Event()


class _Handler(BaseHTTPRequestHandler):
    server: FakeIlink
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        assert self.headers.get("Authorization") == "Bearer wx-token"
        step: Any = {"ret": 0}
        if self.path == "/ilink/bot/getupdates":
            with self.server.lock:
                self.server.polls.append(body)
                step = self.server.script.pop(0) if self.server.script else None
            if step is None:
                self.server.holding.set()
                self.server.closing.wait(HOLD_S)
                step = {"ret": 0, "msgs": [], "get_updates_buf": body["get_updates_buf"]}
        elif self.path == "/ilink/bot/sendmessage":
            with self.server.lock:
                self.server.sent.append(body)
        data = json.dumps(step).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def ilink() -> Iterator[Any]:
    servers: list[FakeIlink] = []

    def make(script: list[Any]) -> FakeIlink:
        server = FakeIlink(script)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.closing.set()
        server.shutdown()
        server.server_close()


class Recorder:
    def __init__(self) -> None:
        self.delays: list[float] = []

    def __call__(self, stop: threading.Event, seconds: float) -> bool:
        self.delays.append(seconds)
        return stop.is_set()


def _setup(server: FakeIlink, seen: list[str]) -> tuple[WeixinChannel, WeixinPolling, Recorder]:
    lock = threading.Lock()

    def agent(turn: Any) -> str:
        with lock:
            seen.append(turn.text)
        return f"echo {turn.text}"

    config = WeixinConfig(bot_token="wx-token", base_url=server.url, typing=False)
    channel = WeixinChannel(config, FunctionAgent(agent))
    wait = Recorder()
    poller = WeixinPolling(
        config,
        channel.handle_weixin_message,
        backoff=Backoff(0.5, 4.0, jitter=lambda: 1.0),
        wait=wait,
    )
    return channel, poller, wait


@pytest.mark.parametrize(
    "expired",
    [{"ret": 0, "errcode": -14, "errmsg": "session timeout"}, {"ret": -14, "errmsg": "expired"}],
    ids=["errcode", "ret"],
)
def test_messages_follow_the_cursor_once_each_until_the_session_expires(
    ilink: Any, expired: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    server = ilink(
        [
            {
                "ret": 0,
                "msgs": [_msg(1, "alice", "one"), _msg(2, "bob", "two")],
                "get_updates_buf": "cursor-1",
                "longpolling_timeout_ms": 30000,
            },
            {
                "ret": 0,
                "msgs": [_msg(2, "bob", "two"), _msg(3, "carol", "three")],  # 2 again
                "get_updates_buf": "cursor-2",
            },
            {"ret": 0, "errcode": -1, "errmsg": "system busy"},  # transient: back off
            expired,
        ]
    )
    seen: list[str] = []
    channel, poller, wait = _setup(server, seen)
    caplog.set_level(logging.INFO, logger="channelkit.platforms.weixin.polling")
    poller.start()
    try:
        wait_until(lambda: poller.state().status == "stopped", LONG, what="polling to stop")
        wait_until(lambda: len(server.sent) == 3, LONG, what="three replies")
        assert sorted(seen) == ["one", "three", "two"]  # the redelivered 'two' ignored
        assert [p["get_updates_buf"] for p in server.polls] == [
            "",
            "cursor-1",
            "cursor-2",
            "cursor-2",
        ]
        assert all(p["base_info"] == {"channel_version": "2.1.3"} for p in server.polls)
        assert wait.delays == [0.5]  # only the transient errcode backed off
        assert poller.expired and poller.cursor == "cursor-2"
        assert poller.read_timeout_s == 35.0  # the server's 30 s hold plus a margin
        errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
        assert len(errors) == 1 and "session expired" in errors[0].getMessage()
        assert "wx-token" not in caplog.text
        state = poller.state()
        assert state.status == "stopped" and "-14" in str(state.last_error)
        assert poller._thread is not None
        poller._thread.join(LONG)
        assert not poller._thread.is_alive()
        assert len(server.polls) == 4  # no poll after the session expired
        replies = {m["msg"]["to_user_id"]: m["msg"] for m in server.sent}
        assert replies["alice"]["context_token"] == "ctx-1"  # the message's token is used
    finally:
        poller.stop(10)
        channel.close()


def test_stop_cuts_a_long_poll_in_progress(ilink: Any) -> None:
    server = ilink([])
    channel, poller, _ = _setup(server, [])
    poller.start()
    try:
        wait_until(lambda: server.holding.is_set(), LONG, what="a long poll in progress")
    finally:
        stopped = poller.stop(10)  # the server would hold the poll for 30 s
        channel.close()
    assert stopped and poller.state().status == "stopped" and not poller.expired


def test_the_channel_owns_its_poller_and_close_stops_it(ilink: Any) -> None:
    server = ilink([])
    config = WeixinConfig(bot_token="wx-token", base_url=server.url, typing=False)
    channel = WeixinChannel(config, FunctionAgent(lambda turn: "ok"))
    (connection,) = channel.connections
    assert connection is channel.polling
    connection.start()
    wait_until(lambda: server.holding.is_set(), LONG, what="a long poll in progress")
    channel.close()
    assert connection.state().status == "stopped"


def test_ingress_is_polling_only() -> None:
    from channelkit.errors import ConfigurationError

    assert WeixinConfig(bot_token="t").ingress == "polling"
    assert WeixinConfig.from_dict({"botToken": "t", "ingress": "polling"}).ingress == "polling"
    with pytest.raises(ConfigurationError, match=r"weixin\.ingress"):
        WeixinConfig(bot_token="t", ingress="webhook")
    with pytest.raises(ConfigurationError, match=r"weixin\.polling_timeout_s"):
        WeixinConfig(bot_token="t", polling_timeout_s=0)

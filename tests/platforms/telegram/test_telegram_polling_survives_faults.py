"""Telegram long polling survives faults without losing or repeating an update.

A scripted Bot API on 127.0.0.1 answers ``getUpdates`` with 409 Conflict, 429 with
``retry_after``, 500, a dropped connection, a body that is not JSON, a redelivered
update and a malformed one. The poller backs off (the injected wait records every delay,
nothing sleeps for real), calls ``deleteWebhook`` before every new connection, moves the
offset only past updates it handed on, and every message reaches the agent exactly once.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from channelkit.agents import FunctionAgent
from channelkit.core import ChannelConfig
from channelkit.errors import ChannelClosed
from channelkit.ingress import IngressResponse
from channelkit.platforms.common.connection import Backoff
from channelkit.platforms.telegram import TelegramChannel, TelegramConfig
from channelkit.platforms.telegram.polling import ALLOWED_UPDATES, TelegramPolling
from channelkit.testing import wait_until

TOKEN = "123456:poll-test-token"
LONG = 20.0  # generous bound for a loaded 2-core CI machine
HOLD_S = 30.0  # a poll with nothing scripted is held until the server closes


def _message(update_id: int, text: str) -> dict[str, Any]:
    chat = 1000 + update_id  # one private chat per message: no queueing between them
    return {
        "update_id": update_id,
        "message": {
            "message_id": update_id,
            "date": 1,
            "chat": {"id": chat, "type": "private"},
            "from": {"id": chat, "is_bot": False, "first_name": "P"},
            "text": text,
        },
    }


class FakeBotApi(ThreadingHTTPServer):
    """Answers ``getUpdates`` from ``script`` (one step per call), everything else ok."""

    daemon_threads = True

    def __init__(self, script: list[Any]) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.url = f"http://127.0.0.1:{self.server_address[1]}"
        self.script = list(script)
        self.polls: list[dict[str, Any]] = []  # every getUpdates body, in order
        self.methods: list[str] = []
        self.lock = threading.Lock()
        self.closing = threading.Event()
        self.holding = threading.Event()  # a poll is held (nothing scripted)

    def next_step(self, body: dict[str, Any]) -> Any:
        with self.lock:
            self.polls.append(body)
            return self.script.pop(0) if self.script else None


class _Handler(BaseHTTPRequestHandler):
    server: FakeBotApi
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _reply(self, status: int, payload: Any, raw: bytes | None = None) -> None:
        data = raw if raw is not None else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        method = self.path.rsplit("/", 1)[1]
        with self.server.lock:
            self.server.methods.append(method)
        if method != "getUpdates":
            result: Any = True
            if method == "sendMessage":
                result = {"message_id": 1, "date": 1, "chat": {"id": body["chat_id"]}}
            self._reply(200, {"ok": True, "result": result})
            return
        step = self.server.next_step(body)
        if step is None:
            self.server.holding.set()
            self.server.closing.wait(min(float(body.get("timeout", 0)), HOLD_S))
            self._reply(200, {"ok": True, "result": []})
        elif step == "drop":
            self.close_connection = True
            self.connection.shutdown(2)  # no answer at all
        elif step == "garbage":
            self._reply(200, None, raw=b"<html>bad gateway{")
        elif isinstance(step, tuple):
            status, description, parameters = step
            error = {"ok": False, "error_code": status, "description": description}
            if parameters:
                error["parameters"] = parameters
            self._reply(status, error)
        else:
            self._reply(200, {"ok": True, "result": step})


@pytest.fixture
def server_factory() -> Iterator[Any]:
    servers: list[FakeBotApi] = []

    def make(script: list[Any]) -> FakeBotApi:
        server = FakeBotApi(script)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.closing.set()
        server.shutdown()
        server.server_close()


class Recorder:
    """The injected backoff wait: records each delay, returns at once (never stopped)."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    def __call__(self, stop: threading.Event, seconds: float) -> bool:
        self.delays.append(seconds)
        return stop.is_set()


def _channel(server: FakeBotApi, agent: Any) -> TelegramChannel:
    config = TelegramConfig(bot_token=TOKEN, api_base_url=server.url, bot_username="poll_bot")
    return TelegramChannel(
        config, FunctionAgent(agent), channel_config=ChannelConfig(name="telegram")
    )


def _poller(channel: TelegramChannel, wait: Recorder) -> TelegramPolling:
    return TelegramPolling(
        channel.telegram_config,
        channel.receive_update,
        backoff=Backoff(0.5, 4.0, jitter=lambda: 1.0),  # jitter 1.0: the full ceiling
        wait=wait,
    )


def test_faults_back_off_and_every_update_is_handled_exactly_once(server_factory: Any) -> None:
    script = [
        (409, "Conflict: terminated by setWebhook request", None),
        [_message(1, "m1"), _message(2, "m2")],
        (429, "Too Many Requests: retry after 7", {"retry_after": 7}),
        (500, "Internal Server Error", None),
        "drop",
        "garbage",
        [_message(2, "m2"), _message(3, "m3"), _message(4, "m4")],  # 2 is a redelivery
        [{"update_id": 5, "message": "not an object"}, _message(6, "m6")],
    ]
    server = server_factory(script)
    seen: list[str] = []
    lock = threading.Lock()

    def agent(turn: Any) -> str:
        with lock:
            seen.append(turn.text)
        return "ok"

    channel = _channel(server, agent)
    wait = Recorder()
    poller = _poller(channel, wait)
    poller.start()
    try:
        wait_until(lambda: server.holding.is_set(), LONG, what="the script to run out")
        wait_until(lambda: len(seen) == 5, LONG, what="five messages handled")
        assert sorted(seen) == ["m1", "m2", "m3", "m4", "m6"]  # none lost, none twice
        # 409 -> backoff; 429 -> its retry_after; 500, drop, garbage -> growing backoff
        assert wait.delays == [0.5, 7.0, 0.5, 1.0, 2.0]
        offsets = [p.get("offset") for p in server.polls]
        assert offsets == [None, None, 3, 3, 3, 3, 3, 5, 7]
        timeouts = [p["timeout"] for p in server.polls]
        # a new connection's first poll does not wait (it reports connected at once)
        assert timeouts == [0, 0, 25, 0, 0, 0, 0, 25, 25]
        assert all(p["allowed_updates"] == list(ALLOWED_UPDATES) for p in server.polls)
        # deleteWebhook once per connection, before its first getUpdates
        with server.lock:
            methods = [m for m in server.methods if m in ("deleteWebhook", "getUpdates")]
        assert methods[:2] == ["deleteWebhook", "getUpdates"]
        assert methods.count("deleteWebhook") == 6
        assert poller.offset == 7
        state = poller.state()
        assert state.status == "connected" and state.attempt == 0
    finally:
        assert poller.stop(10)
        channel.close()
    with lock:
        assert len(seen) == 5


def test_stop_cuts_a_long_poll_in_progress(server_factory: Any) -> None:
    server = server_factory([[]])  # the first (short) poll is empty, then a held one
    channel = _channel(server, lambda turn: "ok")
    poller = _poller(channel, Recorder())
    poller.start()
    try:
        wait_until(lambda: server.holding.is_set(), LONG, what="a long poll in progress")
    finally:
        stopped = poller.stop(10)  # the server would hold the poll for 25 s
        channel.close()
    assert stopped and poller.state().status == "stopped"
    assert poller._thread is not None and not poller._thread.is_alive()


def test_closing_the_channel_stops_its_own_poller(server_factory: Any) -> None:
    server = server_factory([])
    channel = _channel(server, lambda turn: "ok")
    (connection,) = channel.connections
    assert connection is channel.polling
    connection.start()
    wait_until(lambda: server.holding.is_set(), LONG, what="a long poll in progress")
    channel.close()
    assert connection.state().status == "stopped"


def test_an_update_a_closed_channel_refuses_stays_unconfirmed() -> None:
    config = TelegramConfig(bot_token=TOKEN, api_base_url="http://127.0.0.1:9")
    refused = IngressResponse.json(503, {"ok": False})
    poller = TelegramPolling(config, lambda raw: refused, wait=Recorder())
    poller.offset = 10
    with pytest.raises(ChannelClosed):
        poller._hand_on(_message(10, "late"))
    assert poller.offset == 10  # the next start fetches it again


def test_webhook_ingress_owns_no_connection() -> None:
    config = TelegramConfig(bot_token=TOKEN, ingress="webhook", webhook_secret="s")
    channel = TelegramChannel(config, FunctionAgent(lambda turn: "ok"))
    try:
        assert channel.connections == [] and channel.polling is None
        assert [r.path for r in channel.ingress_routes()] == ["/telegram/webhook"]
    finally:
        channel.close()

"""Hostile requests over a real HTTP server change nothing without a valid, unused signature.

A threaded ``wsgiref`` server on 127.0.0.1 serves ``create_wsgi_app`` for a DingTalk
(robot + card), a Feishu (events + card, Encrypt Key set) and a Telegram (webhook)
channel. Hypothesis sends arbitrary headers (signature, timestamp, nonce and secret
headers with any text, non-ASCII included) and bodies with ``requests``; the web layer
runs every response's deferred work after its ACK, as in production. For every request:
no 5xx, no channelkit log record with a traceback, and no state change (no agent call,
no run, no platform API call, nothing remembered) unless the request carried a valid,
unused signature (the Telegram secret token). Replaying an accepted request changes
nothing either.
"""

from __future__ import annotations

import json
import logging
import socketserver
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import pytest
import requests
import requests_mock
from channelkit.clients.feishu import FeishuClient
from channelkit.core import ChannelConfig
from channelkit.http import RetryPolicy
from channelkit.platforms.dingtalk import (
    DingtalkChannel,
    DingtalkConfig,
    card_signature,
    robot_signature,
)
from channelkit.platforms.feishu import FeishuChannel, FeishuConfig
from channelkit.platforms.feishu.api import FeishuApi
from channelkit.platforms.feishu.crypto import encrypt_event, feishu_signature
from channelkit.platforms.telegram import TelegramChannel, TelegramConfig
from channelkit.platforms.telegram.api import TelegramApi
from channelkit.platforms.telegram.ingress import SECRET_HEADER
from channelkit.testing import ScriptedBridge, final, wait_until
from channelkit.web import create_wsgi_app
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.platforms._shared import Runtime, settle_pools
from tests.platforms.dingtalk.dingtalk_helpers import FakeDingtalkApi
from tests.platforms.feishu.feishu_helpers import FakeFeishu, card_action, message_event

DING_SECRET = "ding-app-secret"
DING_CARD_SECRET = "ding-card-secret"
FS_TOKEN = "fs-verify-token"
FS_KEY = "fs-encrypt-key-123"
FS_BASE = "https://feishu.test"
TG_TOKEN = "123:tg-bot-token"
TG_SECRET = "tg-hook-secret"
TG_BASE = "http://tg.test"
PLATFORM_HOSTS = {urlsplit(FS_BASE).netloc, urlsplit(TG_BASE).netloc}
#: HTTP callbacks (where the config offers a choice of ingress, Stream mode is the default)
HTTP_INGRESS = {"ingress": "http"} if "ingress" in DingtalkConfig.__dataclass_fields__ else {}
#: the webhook (where the config offers a choice of ingress, long polling is the default)
WEBHOOK_INGRESS = {"ingress": "webhook"} if "ingress" in TelegramConfig.__dataclass_fields__ else {}

ROUTES = (
    "/dingtalk/robot",
    "/dingtalk/card",
    "/feishu/events",
    "/feishu/card",
    "/telegram/webhook",
)

FUZZ = settings(
    max_examples=75,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


class _ThreadingServer(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _Closing:
    """The app's body; counts the server's ``close()`` (after which deferred work ran)."""

    def __init__(self, result: Iterable[bytes], done: Callable[[], None]) -> None:
        self._result = result
        self._done = done

    def __iter__(self) -> Iterator[bytes]:
        return iter(self._result)

    def close(self) -> None:
        try:
            close = getattr(self._result, "close", None)
            if close is not None:
                close()  # channelkit's body: runs the response's deferred work
        finally:
            self._done()


class _Recorder(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def tracebacks(self) -> list[str]:
        return [
            f"{r.name}: {r.getMessage()}"
            for r in self.records
            if r.exc_info or r.exc_text or "Traceback" in r.getMessage()
        ]


def _tg_routes(mocker: requests_mock.Mocker) -> None:
    ids = iter(range(100, 10**6))
    base = f"{TG_BASE}/bot{TG_TOKEN}/"
    mocker.post(
        base + "sendMessage",
        json=lambda r, c: {
            "ok": True,
            "result": {"message_id": next(ids), "date": 0, "chat": {"id": 1, "type": "private"}},
        },
    )
    for method in ("editMessageText", "sendChatAction", "answerCallbackQuery", "setMyCommands"):
        mocker.post(base + method, json={"ok": True, "result": True})


@dataclass
class Stack:
    """Three channels behind one real server, and every piece of state they could change."""

    rt: Runtime
    url: str
    ding: DingtalkChannel
    ding_api: FakeDingtalkApi
    feishu: FeishuChannel
    telegram: TelegramChannel
    bridges: dict[str, ScriptedBridge]
    mocker: requests_mock.Mocker
    logs: _Recorder
    closed: list[int] = field(default_factory=lambda: [0])
    sent: int = 0

    def post(self, path: str, headers: dict[str, Any], body: bytes) -> requests.Response:
        """POST over HTTP; returns once the server ran the deferred work and pools idle."""
        response = requests.post(self.url + path, data=body, headers=headers, timeout=10)
        self.sent += 1
        wait_until(lambda: self.closed[0] >= self.sent, 10, what="the server closed the body")
        settle_pools(self.rt.run_pool, self.rt.pool)
        return response

    def platform_calls(self) -> int:
        return len(self.ding_api.calls) + sum(
            1 for r in self.mocker.request_history if r.netloc in PLATFORM_HOSTS
        )

    def state(self) -> tuple[Any, ...]:
        return (
            {name: len(b.prompts) for name, b in self.bridges.items()},
            self.platform_calls(),
            dict(self.ding.map_sizes()),
            len(self.ding._signatures),
            len(self.feishu._events_seen),
            len(self.feishu.verifier.replay),
            len(self.telegram._seen_updates),
            [ch.run_stats for ch in (self.ding, self.feishu, self.telegram)],
        )


@pytest.fixture
def stack() -> Iterator[Stack]:
    rt = Runtime()
    bridges = {name: ScriptedBridge([final("ok")]) for name in ("ding", "feishu", "tg")}
    ding_api = FakeDingtalkApi()
    ding = DingtalkChannel(
        DingtalkConfig(
            client_id="ding-robot",
            client_secret=DING_SECRET,
            card_callback_secret=DING_CARD_SECRET,
            card_callback_route_key="channelkit-test",
            interactive_cards={},
            **HTTP_INGRESS,
        ),
        bridges["ding"],
        api=ding_api,
        executor=rt.pool,
        run_executor=rt.run_pool,
        scheduler=rt.scheduler,
        clock=rt.clock,
    )
    fake_feishu = FakeFeishu(clock=rt.clock)
    feishu = FeishuChannel(
        FeishuConfig.from_dict(
            {
                "app_id": "cli_1",
                "app_secret": "s",
                "verification_token": FS_TOKEN,
                "encrypt_key": FS_KEY,
            }
        ),
        bridges["feishu"],
        channel_config=ChannelConfig(name="feishu"),
        api=FeishuApi(
            FeishuClient(token="t-test", base_url=FS_BASE, retry=RetryPolicy(max_attempts=1))
        ),
        executor=rt.pool,
        run_executor=rt.run_pool,
        scheduler=rt.scheduler,
        clock=rt.clock,
    )
    telegram = TelegramChannel(
        TelegramConfig(
            bot_token=TG_TOKEN,
            webhook_secret=TG_SECRET,
            api_base_url=TG_BASE,
            **WEBHOOK_INGRESS,
            bot_username="ck_bot",
        ),
        bridges["tg"],
        channel_config=ChannelConfig(name="telegram"),
        api=TelegramApi(TG_TOKEN, base_url=TG_BASE, retry=RetryPolicy.never()),
        executor=rt.pool,
        run_executor=rt.run_pool,
        scheduler=rt.scheduler,
        clock=rt.clock,
    )
    closed = [0]
    lock = threading.Lock()

    def done() -> None:
        with lock:
            closed[0] += 1

    app = create_wsgi_app([ding, feishu, telegram])

    def counted(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        return _Closing(app(environ, start_response), done)

    logs = _Recorder()
    ck_logger = logging.getLogger("channelkit")
    previous_level = ck_logger.level
    ck_logger.addHandler(logs)
    ck_logger.setLevel(logging.DEBUG)
    server = make_server(
        "127.0.0.1", 0, counted, server_class=_ThreadingServer, handler_class=_Quiet
    )
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    # the platform APIs are mocked; requests to our own 127.0.0.1 server pass through
    with requests_mock.Mocker(real_http=True) as mocker:
        fake_feishu.install(mocker)
        _tg_routes(mocker)
        try:
            yield Stack(
                rt=rt,
                url=f"http://127.0.0.1:{server.server_port}",
                ding=ding,
                ding_api=ding_api,
                feishu=feishu,
                telegram=telegram,
                bridges=bridges,
                mocker=mocker,
                logs=logs,
                closed=closed,
            )
        finally:
            server.shutdown()
            server.server_close()
            thread.join(5)
            for channel in (ding, feishu, telegram):
                channel.close(timeout=2.0)
            rt.close()
            ck_logger.removeHandler(logs)
            ck_logger.setLevel(previous_level)


# -- what a valid request looks like (used for near misses, replays and the control) ------


def _now_ms(s: Stack) -> int:
    return int(s.rt.clock.time() * 1000)


def ding_robot_body(n: int, text: str = "hello") -> bytes:
    return json.dumps(
        {
            "msgId": f"msg-{n}",
            "msgtype": "text",
            "text": {"content": text},
            "conversationId": f"cid-{n}",
            "conversationType": "2",
            "senderId": f"$:LWCP_v1:$staff-{n}",
            "senderStaffId": f"staff-{n}",
            "senderNick": "someone",
        }
    ).encode()


def ding_card_body(n: int) -> bytes:
    return json.dumps(
        {"userId": f"staff-{n}", "value": json.dumps({"outTrackId": f"t-{n}", "actionValue": "x"})}
    ).encode()


def feishu_body(n: int, card: bool = False) -> bytes:
    payload = (
        card_action({"ck": "x"}, token=FS_TOKEN, message_id=f"om-{n}")
        if card
        else message_event("hello", token=FS_TOKEN, event_id=f"ev-{n}", message_id=f"om-{n}")
    )
    return json.dumps({"encrypt": encrypt_event(FS_KEY, payload)}).encode()


def feishu_headers(ts: str, nonce: str, body: bytes, key: str = FS_KEY) -> dict[str, str]:
    return {
        "X-Lark-Request-Timestamp": ts,
        "X-Lark-Request-Nonce": nonce,
        "X-Lark-Signature": feishu_signature(ts, nonce, key, body),
        "Content-Type": "application/json",
    }


def tg_body(update_id: int, text: str = "hello") -> bytes:
    return json.dumps(
        {
            "update_id": update_id,
            "message": {
                "message_id": update_id,
                "date": 0,
                "chat": {"id": 7000 + update_id, "type": "private"},
                "from": {"id": 7000 + update_id, "is_bot": False, "first_name": "o"},
                "text": text,
            },
        }
    ).encode()


# -- strategies ----------------------------------------------------------------------------

_text = st.text(max_size=60)  # any code point: non-ASCII, controls, surrogates excluded
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner),
    max_leaves=20,
)
_header_names = st.one_of(
    st.sampled_from(
        [
            "timestamp",
            "sign",
            "x-ddpaas-signature-timestamp",
            "x-ddpaas-signature",
            "X-Lark-Request-Timestamp",
            "X-Lark-Request-Nonce",
            "X-Lark-Signature",
            SECRET_HEADER,
            "Content-Type",
        ]
    ),
    st.from_regex(r"X-[A-Za-z0-9-]{1,16}", fullmatch=True),
)


def _mangle(valid: str, noise: str) -> str:
    """A near miss of ``valid``: never equal to it, also after HTTP trims whitespace."""
    candidate = (valid[:-1] + noise) if noise.strip() else valid[::-1] + "x"
    return candidate if candidate.strip() != valid else valid + "x"


def _as_header(value: str) -> bytes:
    """``value`` as raw header bytes (UTF-8: non-ASCII goes on the wire as is)."""
    raw = value.encode("utf-8", "surrogatepass").replace(b"\r", b"").replace(b"\n", b"")
    return raw.lstrip(b" \t\x0b\x0c")


def _bodies(stack: Stack) -> st.SearchStrategy[bytes]:
    return st.one_of(
        st.binary(max_size=300),
        _json.map(lambda v: json.dumps(v).encode()),
        st.integers(1, 10**6).map(ding_robot_body),
        st.integers(1, 10**6).map(ding_card_body),
        st.builds(feishu_body, st.integers(1, 10**6), st.booleans()),
        st.builds(lambda v: json.dumps({"encrypt": v}).encode(), _text),
        st.builds(lambda v: json.dumps({"encrypt": encrypt_event(FS_KEY, v)}).encode(), _json),
        st.integers(1, 10**6).map(tg_body),
    )


def _valid_bodies(path: str) -> st.SearchStrategy[bytes]:
    """Bodies the route would accept with a valid signature."""
    ids = st.integers(1, 10**6)
    return {
        "/dingtalk/robot": st.builds(ding_robot_body, ids, _text),
        "/dingtalk/card": ids.map(ding_card_body),
        "/feishu/events": ids.map(feishu_body),
        "/feishu/card": ids.map(lambda n: feishu_body(n, card=True)),
        "/telegram/webhook": st.builds(tg_body, ids, _text.filter(str.strip)),
    }[path]


def _near_misses(stack: Stack, path: str, body: bytes) -> st.SearchStrategy[dict[str, str]]:
    """Headers that look right for ``path`` and ``body`` but are not a valid, unused
    signature (or secret token)."""
    ms = str(_now_ms(stack))
    s = str(int(stack.rt.clock.time()))
    stale_ms = str(_now_ms(stack) - 3_601_000)  # beyond DingTalk's 1 h window
    stale_s = str(int(stack.rt.clock.time()) - 301)  # beyond Feishu's 5 min window
    robot = st.one_of(
        _text.filter(lambda k: k != DING_SECRET).map(
            lambda k: {"timestamp": ms, "sign": robot_signature(ms, k)}
        ),
        _text.map(
            lambda x: {"timestamp": ms, "sign": _mangle(robot_signature(ms, DING_SECRET), x)}
        ),
        st.just({"timestamp": stale_ms, "sign": robot_signature(stale_ms, DING_SECRET)}),
        _text.map(lambda t: {"timestamp": t, "sign": robot_signature(t, DING_SECRET)}).filter(
            lambda h: not (h["timestamp"].strip().isascii() and h["timestamp"].strip().isdigit())
        ),  # any text but a plain-digit timestamp (which might be fresh)
    )
    card = st.one_of(
        _text.map(
            lambda x: {
                "x-ddpaas-signature-timestamp": ms,
                "x-ddpaas-signature": _mangle(card_signature(ms, DING_CARD_SECRET), x),
            }
        ),
        _text.filter(lambda k: k != DING_CARD_SECRET).map(
            lambda k: {
                "x-ddpaas-signature-timestamp": ms,
                "x-ddpaas-signature": card_signature(ms, k),
            }
        ),
        st.just(
            {
                "x-ddpaas-signature-timestamp": stale_ms,
                "x-ddpaas-signature": card_signature(stale_ms, DING_CARD_SECRET),
            }
        ),
        # the robot's valid signature is not a card signature (and the other way round)
        st.just({"timestamp": ms, "sign": card_signature(ms, DING_CARD_SECRET)}),
    )
    feishu = st.one_of(
        _text.filter(lambda k: k != FS_KEY).map(lambda k: feishu_headers(s, "n", body, key=k)),
        st.just(feishu_headers(s, "n", body + b" ")),
        _text.map(
            lambda x: {
                **feishu_headers(s, "n", body),
                "X-Lark-Signature": _mangle(feishu_signature(s, "n", FS_KEY, body), x),
            }
        ),
        _text.map(lambda n: {**feishu_headers(s, "n", body), "X-Lark-Request-Nonce": n}).filter(
            lambda h: h["X-Lark-Request-Nonce"].strip() != "n"
        ),
        st.just(feishu_headers(stale_s, "n", body)),
    )
    telegram = st.one_of(
        _text.map(lambda x: {SECRET_HEADER: _mangle(TG_SECRET, x)}),
        st.sampled_from([TG_SECRET.upper(), TG_SECRET[:-1], TG_SECRET + "\u00e9", ""]).map(
            lambda v: {SECRET_HEADER: v}
        ),
        st.just({"X-Telegram-Bot-Api-Secret": TG_SECRET}),
    )
    own = {
        "/dingtalk/robot": robot,
        "/dingtalk/card": card,
        "/feishu/events": feishu,
        "/feishu/card": feishu,
        "/telegram/webhook": telegram,
    }[path]
    return st.one_of(own, own, own, robot, card, feishu, telegram)  # mostly the route's own


def _send(stack: Stack, path: str, headers: dict[str, str], body: bytes) -> requests.Response:
    raw = {name: _as_header(value) for name, value in headers.items()}
    return stack.post(path, raw, body)


def _assert_clean(stack: Stack) -> None:
    assert stack.logs.tracebacks() == []


# -- the tests -----------------------------------------------------------------------------


def test_fuzzed_headers_and_bodies_change_nothing(stack: Stack) -> None:
    before = stack.state()

    @FUZZ
    @given(
        path=st.sampled_from(ROUTES),
        headers=st.dictionaries(_header_names, _text, max_size=6),
        body=_bodies(stack),
    )
    def check(path: str, headers: dict[str, str], body: bytes) -> None:
        response = _send(stack, path, headers, body)
        assert response.status_code < 500, (response.status_code, response.text)
        assert stack.state() == before
        _assert_clean(stack)

    check()


def test_near_miss_signatures_change_nothing(stack: Stack) -> None:
    before = stack.state()

    @FUZZ
    @given(data=st.data(), path=st.sampled_from(ROUTES))
    def check(data: st.DataObject, path: str) -> None:
        body = data.draw(st.one_of(_valid_bodies(path), _valid_bodies(path), _bodies(stack)))
        headers = data.draw(_near_misses(stack, path, body))
        response = _send(stack, path, headers, body)
        assert response.status_code < 500, (response.status_code, response.text)
        assert stack.state() == before
        _assert_clean(stack)

    check()


def test_valid_requests_run_after_the_ack_and_their_replays_change_nothing(stack: Stack) -> None:
    ms = str(_now_ms(stack))
    s = str(int(stack.rt.clock.time()))
    robot = ding_robot_body(1)
    card = ding_card_body(2)
    fs_event = feishu_body(3)
    fs_card = feishu_body(4, card=True)
    tg = tg_body(5)
    requests_ = [
        ("/dingtalk/robot", {"timestamp": ms, "sign": robot_signature(ms, DING_SECRET)}, robot),
        (
            "/dingtalk/card",
            {
                "x-ddpaas-signature-timestamp": ms,
                "x-ddpaas-signature": card_signature(ms, DING_CARD_SECRET),
            },
            card,
        ),
        ("/feishu/events", feishu_headers(s, "n-1", fs_event), fs_event),
        ("/feishu/card", feishu_headers(s, "n-2", fs_card), fs_card),
        ("/telegram/webhook", {SECRET_HEADER: TG_SECRET}, tg),
    ]
    for path, headers, body in requests_:
        assert _send(stack, path, headers, body).status_code == 200, path
    # the deferred work ran behind the real server: each message reached its agent once
    wait_until(
        lambda: all(len(b.prompts) == 1 for b in stack.bridges.values()),
        10,
        what="one agent call per platform",
    )
    settle_pools(stack.rt.run_pool, stack.rt.pool)
    assert stack.platform_calls() > 0  # the replies went out
    accepted = stack.state()

    replays = {}
    for path, headers, body in requests_:
        replays[path] = _send(stack, path, headers, body).status_code
    # a used signature is refused; Telegram has none: the update id is acknowledged, once
    assert replays == {
        "/dingtalk/robot": 403,
        "/dingtalk/card": 403,
        "/feishu/events": 403,
        "/feishu/card": 403,
        "/telegram/webhook": 200,
    }
    # the same signature on another body: refused too (DingTalk signs only the timestamp)
    other = ding_robot_body(6, "forged")
    assert _send(stack, "/dingtalk/robot", requests_[0][1], other).status_code == 403
    assert stack.state() == accepted
    assert [text for _, text in stack.bridges["ding"].prompts] == ["hello"]
    _assert_clean(stack)
    # each refusal is logged with its reason, never with the header values
    refusals = [r.getMessage() for r in stack.logs.records if "already used" in r.getMessage()]
    assert len(refusals) == 5  # DingTalk robot x2, card, Feishu events, card
    assert sum("DingTalk robot" in m for m in refusals) == 2
    signatures = [h[k] for _, h, _ in requests_ for k in h if "sign" in k.lower()]
    logged = "\n".join(r.getMessage() for r in stack.logs.records)
    assert signatures and not any(sig in logged for sig in signatures)

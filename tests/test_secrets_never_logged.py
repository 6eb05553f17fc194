"""Configured secrets never appear in the repr() or str() of a platform config."""

from __future__ import annotations

import contextlib
import http.server
import logging
import socket
import threading
from collections.abc import Iterator

import pytest
import requests
import urllib3
from channelkit.platforms.dingtalk import DingtalkConfig
from channelkit.platforms.feishu import FeishuConfig
from channelkit.platforms.telegram.config import TelegramConfig
from channelkit.platforms.weixin.config import WeixinConfig


def test_config_objects_show_secrets_as_stars() -> None:
    configs = [
        (
            DingtalkConfig(
                client_id="ding-id", client_secret="S3CRET-app", card_callback_secret="S3CRET-card"
            ),
            ["S3CRET-app", "S3CRET-card"],
        ),
        (
            FeishuConfig.from_dict(
                {
                    "app_id": "cli_1",
                    "app_secret": "S3CRET-fs",
                    "verification_token": "S3CRET-tok",
                    "encrypt_key": "S3CRET-key",
                }
            ),
            ["S3CRET-fs", "S3CRET-tok", "S3CRET-key"],
        ),
        (
            TelegramConfig(bot_token="123:S3CRET-bot", webhook_secret="S3CRET-hook"),
            ["S3CRET-bot", "S3CRET-hook"],
        ),
        (WeixinConfig(bot_token="wx-bot@im.bot:S3CRET-wx"), ["S3CRET-wx"]),
        (WeixinConfig.from_dict({"botToken": "S3CRET-wx-dict"}), ["S3CRET-wx-dict"]),
    ]
    for config, secrets in configs:
        for text in (repr(config), str(config)):
            for secret in secrets:
                assert secret not in text
    assert "ding-id" in repr(configs[0][0]) and "***" in repr(configs[0][0])


def test_logs_of_channelkit_and_urllib3_are_redacted_by_default() -> None:
    import logging

    from channelkit.http.redact import REDACTOR

    REDACTOR.add("S3CRET-registered")
    records: list[str] = []

    class Capture(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(self.format(record))

    handler = Capture()
    handler.setFormatter(logging.Formatter("%(message)s"))
    loggers = [logging.getLogger("urllib3.connectionpool"), logging.getLogger("channelkit.x")]
    for logger in loggers:
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG)
    try:
        loggers[0].debug('"POST /bot123:S3CRET-bot/sendMessage HTTP/1.1" 200 10')
        loggers[1].debug("webhook %s", "https://oapi.dingtalk.com/robot/x?session=S3CRET-sess")
        try:
            raise RuntimeError("platform echoed S3CRET-registered")
        except RuntimeError:
            loggers[1].exception("call failed")
    finally:
        for logger in loggers:
            logger.removeHandler(handler)
            logger.setLevel(logging.NOTSET)
    text = "\n".join(records)
    assert "RuntimeError" in text
    for secret in ("S3CRET-bot", "S3CRET-sess", "S3CRET-registered"):
        assert secret not in text


# -- a real HTTP round trip with DEBUG logging on ---------------------------------------


class _BotApi(http.server.BaseHTTPRequestHandler):
    """A Bot API lookalike on 127.0.0.1: getMe answers, everything else fails with 500."""

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        if self.path.endswith("/getMe"):
            body = b'{"ok":true,"result":{"id":1,"is_bot":true,"first_name":"b","username":"b"}}'
            self.send_response(200)
        else:
            body = b'{"ok":false,"error_code":500,"description":"Internal Server Error"}'
            self.send_response(500)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, format: str, *args: object) -> None:
        pass  # the server's own access log is not under test


@contextlib.contextmanager
def _capture_all_logs() -> Iterator[list[str]]:
    """Every record of every logger at DEBUG, formatted with its traceback."""
    texts: list[str] = []

    class Capture(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            texts.append(self.format(record))

    handler = Capture(logging.DEBUG)
    handler.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))
    root = logging.getLogger()
    previous = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield texts
    finally:
        root.removeHandler(handler)
        root.setLevel(previous)


@contextlib.contextmanager
def _bot_api() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _BotApi)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # closed again on exit: nothing listens there


def test_a_real_requests_and_urllib3_round_trip_never_logs_a_bot_token() -> None:
    # Never registered with the redactor: only the /bot<token>/ rule can hide it.
    token = "5550001:PLAIN-S3CRET-tok"
    with _bot_api() as base, _capture_all_logs() as texts:
        response = requests.get(f"{base}/bot{token}/getMe", timeout=5)
        assert response.status_code == 200
        response = requests.post(f"{base}/bot{token}/sendMessage", json={"text": "x"}, timeout=5)
        assert response.status_code == 500
        with urllib3.PoolManager() as pool:
            assert pool.request("GET", f"{base}/bot{token}/getMe", timeout=5).status == 200
            # a refused connection with one retry: urllib3 warns, naming the URL
            dead = f"http://127.0.0.1:{_closed_port()}/bot{token}/getMe"
            with pytest.raises(urllib3.exceptions.MaxRetryError):
                pool.request("GET", dead, timeout=2, retries=urllib3.Retry(1, backoff_factor=0))
    text = "\n".join(texts)
    assert "/getMe" in text and "/sendMessage" in text  # DEBUG logging really was on
    assert "Retrying" in text  # the retry warning was emitted
    assert "PLAIN-S3CRET-tok" not in text
    assert "5550001:" not in text


def test_the_telegram_client_over_real_http_never_logs_its_token() -> None:
    from channelkit.errors import ChannelKitError
    from channelkit.http import RetryPolicy
    from channelkit.platforms.telegram.api import TelegramApi

    token = "5550002:CLIENT-S3CRET-tok"
    with _bot_api() as base, _capture_all_logs() as texts:
        api = TelegramApi(token, base_url=base, retry=RetryPolicy(max_attempts=2))
        assert api.get_me_username() == "b"
        with pytest.raises(ChannelKitError) as failed:
            api.send_message(1, "hello")
        logging.getLogger("channelkit.platforms.telegram").warning(
            "send failed: %s", failed.value, exc_info=failed.value
        )
    text = "\n".join(texts)
    assert "/getMe" in text and "send failed" in text
    assert "CLIENT-S3CRET-tok" not in text
    assert "5550002:" not in text

"""A secret a platform echoes back in an error body never reaches the exception or logs.

Configured secrets (bot tokens, app secrets, signing secrets) are registered with the
redactor when their config is built. A platform answering an error with one of them in
its message, code or any body field raises an error whose text, ``message``, ``code``,
``body`` and ``repr`` are scrubbed, and nothing logged meanwhile shows it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator

import pytest
import requests_mock as rm
from channelkit.errors import ApiError, AuthError
from channelkit.http import RetryPolicy
from channelkit.http.auth import DingTalkTokenProvider
from channelkit.platforms.dingtalk import DingtalkConfig
from channelkit.platforms.slack import SlackConfig
from channelkit.platforms.slack.api import SlackApi
from channelkit.platforms.telegram.api import TelegramApi
from channelkit.platforms.telegram.config import TelegramConfig

SLACK_TOKEN = "xoxb-1111-2222-echoedBotTokenValue"
SLACK_SIGNING = "8f14e45fceea167a5a36dedd4bea2543echo"
DING_SECRET = "dingAppSecretEchoedBack-0123456789"
TG_TOKEN = "123456:AAEchoedTelegramBotToken-xyz"
SLACK_BASE = "http://127.0.0.1:9/api"
DING_BASE = "http://127.0.0.1:9"
TG_BASE = "http://127.0.0.1:9"


@pytest.fixture
def logged() -> Iterator[list[str]]:
    """Every channelkit / urllib3 / requests record, formatted with its traceback."""
    lines: list[str] = []
    formatter = logging.Formatter("%(name)s %(levelname)s %(message)s")

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(formatter.format(record))

    handler = Keep(logging.DEBUG)
    loggers = [logging.getLogger(n) for n in ("channelkit", "urllib3", "requests")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.addHandler(handler)
        lg.setLevel(logging.DEBUG)
    try:
        yield lines
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.removeHandler(handler)
            lg.setLevel(level)


def _raised(call: Callable[[], object]) -> ApiError:
    with pytest.raises(ApiError) as info:
        call()
    error = info.value
    logging.getLogger("channelkit.tests").error("the call failed: %s", error, exc_info=error)
    return error


def _assert_clean(error: ApiError, secrets: tuple[str, ...], lines: list[str]) -> None:
    shown = " ".join(
        [str(error), repr(error), str(error.message), str(error.code), str(error.body)]
    )
    for secret in secrets:
        assert secret not in shown
        assert not any(secret in line for line in lines)


def test_slack_error_echoing_the_bot_token_and_signing_secret(logged: list[str]) -> None:
    SlackConfig(bot_token=SLACK_TOKEN, signing_secret=SLACK_SIGNING)
    api = SlackApi(SLACK_TOKEN, base_url=SLACK_BASE, retry=RetryPolicy.never())
    with rm.Mocker() as m:
        m.post(
            f"{SLACK_BASE}/chat.postMessage",
            status_code=401,
            json={
                "ok": False,
                "error": f"invalid_auth: {SLACK_TOKEN} (signed with {SLACK_SIGNING})",
                "echo": {"token": SLACK_TOKEN, "note": [f"secret={SLACK_SIGNING}"]},
            },
        )
        error = _raised(lambda: api.post("C1", "hi"))
    assert isinstance(error, AuthError) and error.status == 401
    assert "invalid_auth" in str(error)  # the platform's words stay, the secrets go
    _assert_clean(error, (SLACK_TOKEN, SLACK_SIGNING), logged)


def test_dingtalk_token_endpoint_echoing_the_app_secret(logged: list[str]) -> None:
    DingtalkConfig(client_id="ding-app-key", client_secret=DING_SECRET)
    provider = DingTalkTokenProvider("ding-app-key", DING_SECRET, base_url=DING_BASE)
    with rm.Mocker() as m:
        m.post(
            f"{DING_BASE}/v1.0/oauth2/accessToken",
            status_code=400,
            json={
                "code": "invalidClientSecret",
                "message": f"appSecret {DING_SECRET} does not match",
                "requestid": f"req-{DING_SECRET}",
            },
        )
        error = _raised(provider.get_token)
    assert isinstance(error, AuthError)
    assert "does not match" in str(error)
    _assert_clean(error, (DING_SECRET,), logged)


def test_telegram_error_echoing_the_bot_token(logged: list[str]) -> None:
    TelegramConfig(bot_token=TG_TOKEN)
    api = TelegramApi(TG_TOKEN, base_url=TG_BASE, retry=RetryPolicy.never())
    with rm.Mocker() as m:
        m.post(
            f"{TG_BASE}/bot{TG_TOKEN}/sendMessage",
            status_code=401,
            json={"ok": False, "error_code": 401, "description": f"Unauthorized bot{TG_TOKEN}"},
        )
        error = _raised(lambda: api.send_message("42", "hi"))
    assert isinstance(error, AuthError)
    _assert_clean(error, (TG_TOKEN,), logged)

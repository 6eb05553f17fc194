"""Configured secrets never appear in the repr() or str() of a platform config."""

from __future__ import annotations

from channelkit.platforms.dingtalk import DingtalkConfig
from channelkit.platforms.feishu import FeishuConfig
from channelkit.platforms.telegram.config import TelegramConfig


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

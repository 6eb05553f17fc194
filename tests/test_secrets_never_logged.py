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

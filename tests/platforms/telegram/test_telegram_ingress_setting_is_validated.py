"""``TelegramConfig.ingress``: long polling by default, or the webhook; validated by name."""

from __future__ import annotations

import pytest
from channelkit.errors import ConfigurationError
from channelkit.platforms.telegram import TelegramConfig

TOKEN = "123456:ABC-def_ghi"


def test_polling_is_the_default_and_webhook_is_explicit() -> None:
    assert TelegramConfig(bot_token=TOKEN).ingress == "polling"
    assert TelegramConfig(bot_token=TOKEN).polling_timeout_s == 25
    cfg = TelegramConfig.from_dict(
        {"botToken": TOKEN, "ingress": "webhook", "webhookSecret": "s", "pollingTimeoutS": 10}
    )
    assert cfg.ingress == "webhook" and cfg.polling_timeout_s == 10


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("ingress", "websocket"),
        ("ingress", ""),
        ("ingress", None),
        ("polling_timeout_s", 0),
        ("polling_timeout_s", 51),
        ("polling_timeout_s", 2.5),
        ("polling_timeout_s", True),
    ],
)
def test_bad_values_name_the_field(field: str, value: object) -> None:
    with pytest.raises(ConfigurationError, match=rf"telegram\.{field}"):
        TelegramConfig(bot_token=TOKEN, **{field: value})  # type: ignore[arg-type]

"""Python speaks seconds: every platform config exposes its durations as ``*_s``
seconds, whatever unit the platform's JSON uses."""

from __future__ import annotations

from channelkit.platforms.dingtalk import DingtalkConfig
from channelkit.platforms.feishu import FeishuConfig
from channelkit.platforms.telegram import TelegramConfig
from channelkit.platforms.weixin import WeixinConfig


def test_dingtalk_durations_in_seconds():
    cfg = DingtalkConfig.from_dict(
        {
            "clientId": "a",
            "clientSecret": "b",
            "interactiveCards": {"enabled": True, "questionCard": {"timeoutMs": 90_000}},
        }
    )
    assert cfg.interactive_cards.question_card.timeout_s == 90.0
    assert cfg.request_timeout_s == 10.0
    assert cfg.robot_max_skew_s == 3600.0
    assert cfg.host_permission_timeout_s == cfg.host_permission_timeout_ms / 1000.0


def test_feishu_telegram_weixin_durations_in_seconds():
    feishu = FeishuConfig.from_dict(
        {"app_id": "cli_x", "app_secret": "s", "verification_token": "t"}
    )
    assert feishu.forms.timeout_s == feishu.forms.timeout_ms / 1000.0
    names = {f for f in vars(TelegramConfig).get("__dataclass_fields__", {}) if "timeout" in f}
    names |= {f for f in vars(WeixinConfig).get("__dataclass_fields__", {}) if "timeout" in f}
    assert names and all(n.endswith("_s") for n in names)

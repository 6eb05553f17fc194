"""SlackConfig: every invalid setting is refused naming its field; secrets stay hidden."""

from __future__ import annotations

from typing import Any

import pytest
from channelkit.errors import ConfigurationError
from channelkit.platforms.slack import SlackConfig

GOOD: dict[str, Any] = {"bot_token": "xoxb-1-abc", "signing_secret": "s3cret-value"}


@pytest.mark.parametrize(
    ("changes", "path"),
    [
        ({"bot_token": "xoxp-user-token"}, "slack.bot_token"),
        ({"bot_token": ""}, "slack.bot_token"),
        ({"ingress": "webhook"}, "slack.ingress"),
        ({"signing_secret": None}, "slack.signing_secret"),
        ({"signing_secret": " "}, "slack.signing_secret"),
        ({"ingress": "socket"}, "slack.app_token"),
        ({"app_token": "xoxb-not-app"}, "slack.app_token"),
        ({"streaming": "fast"}, "slack.streaming"),
        ({"stream_interval_s": 0}, "slack.stream_interval_s"),
        ({"question_timeout_s": -1}, "slack.question_timeout_s"),
        ({"api_base_url": "ftp://x"}, "slack.api_base_url"),
        ({"native_questions": "yes"}, "slack.native_questions"),
    ],
)
def test_invalid_setting_names_its_field(changes: dict[str, Any], path: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        SlackConfig(**{**GOOD, **changes})
    assert path in str(info.value)


def test_socket_mode_needs_only_the_app_token() -> None:
    config = SlackConfig(bot_token="xoxb-1-abc", app_token="xapp-1-abc", ingress="socket")
    assert config.ingress == "socket" and config.signing_secret is None


def test_repr_hides_every_secret() -> None:
    config = SlackConfig(**GOOD, app_token="xapp-1-secretapp")
    text = repr(config) + str(config)
    for secret in ("xoxb-1-abc", "s3cret-value", "xapp-1-secretapp"):
        assert secret not in text

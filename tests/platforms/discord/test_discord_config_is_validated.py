"""DiscordConfig: every invalid setting is refused naming its field; the token never shows;
a deployment document's camelCase channel entry builds it through the registry."""

from __future__ import annotations

from typing import Any

import pytest
from channelkit import DiscordChannel, DiscordConfig
from channelkit.errors import ConfigurationError
from channelkit.platforms import get_platform

KEY = "ab" * 32
GOOD: dict[str, Any] = {
    "bot_token": "MTEx.secret-bot-token.part",
    "application_id": "1100000000000000001",
}


@pytest.mark.parametrize(
    ("changes", "path"),
    [
        ({"bot_token": ""}, "discord.bot_token"),
        ({"bot_token": "Bot MTEx.abc.def"}, "discord.bot_token"),
        ({"bot_token": "has space"}, "discord.bot_token"),
        ({"application_id": "my-app"}, "discord.application_id"),
        ({"application_id": 1100}, "discord.application_id"),
        ({"ingress": "webhook"}, "discord.ingress"),
        ({"ingress": "interactions"}, "discord.public_key"),
        ({"public_key": "not-hex"}, "discord.public_key"),
        ({"channel_name": " "}, "discord.channel_name"),
        ({"run_journal": " "}, "discord.run_journal"),
        ({"api_base_url": "ftp://x"}, "discord.api_base_url"),
        ({"gateway_url": "https://gateway"}, "discord.gateway_url"),
        ({"edit_interval_s": 0}, "discord.edit_interval_s"),
        ({"typing_interval_s": 10}, "discord.typing_interval_s"),
        ({"question_timeout_s": -1}, "discord.question_timeout_s"),
        ({"request_timeout_s": "10"}, "discord.request_timeout_s"),
        ({"native_questions": "yes"}, "discord.native_questions"),
    ],
)
def test_invalid_setting_names_its_field(changes: dict[str, Any], path: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        DiscordConfig(**{**GOOD, **changes})
    assert path in str(info.value)


def test_the_token_never_shows_in_repr() -> None:
    config = DiscordConfig(**GOOD)
    assert GOOD["bot_token"] not in repr(config) and GOOD["bot_token"] not in str(config)


def test_the_interactions_endpoint_needs_the_public_key() -> None:
    config = DiscordConfig(**GOOD, ingress="interactions", public_key=KEY)
    assert config.ingress == "interactions" and config.public_key == KEY


def test_the_registry_builds_it_from_a_channel_entry_and_the_front_door_exports_it() -> None:
    spec = get_platform("discord")
    assert spec.is_chat and spec.ingress == ("gateway", "interactions")
    config = spec.build_config(
        {
            "botToken": GOOD["bot_token"],
            "applicationId": GOOD["application_id"],
            "editIntervalS": 2,
        },
        name="community",
    )
    assert isinstance(config, DiscordConfig)
    assert config.channel_name == "community" and config.edit_interval_s == 2
    assert spec.channel_class is not None and spec.channel_class.load() is DiscordChannel
    with pytest.raises(ConfigurationError) as info:
        spec.build_config({"botToken": GOOD["bot_token"]})
    assert "application_id" in str(info.value)

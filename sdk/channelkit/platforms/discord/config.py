"""Configuration of the Discord agent channel.

`DiscordConfig` holds the Discord-only settings: the bot token, the application id, the
application's public key (the HTTP interactions endpoint), the ingress, the API and
Gateway URLs and the output and question options. It is validated on construction;
every error is a `ConfigurationError` whose path names the field (`discord.bot_token`).
Secrets never appear in `repr`.

Who may talk to the bot, what a message does while a run is going and how sessions are
scoped are the channel-wide settings of `channelkit.core.ChannelConfig` (`access`,
`busy`, `session_scope`), the same for every platform.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from channelkit.errors import ConfigurationError
from channelkit.platforms.common.config import (
    check_http_url,
    check_non_empty,
    check_positive_seconds,
    register_secrets,
    secret_repr,
)
from channelkit.platforms.discord.gateway import DEFAULT_GATEWAY_URL

__all__ = ["DEFAULT_API_BASE_URL", "INGRESS_MODES", "DiscordConfig"]

#: Production REST base URL (API v10).
DEFAULT_API_BASE_URL = "https://discord.com/api/v10"
#: How events reach the channel: the Gateway WebSocket (the default; messages and
#: component clicks), or the Gateway for messages plus the HTTP interactions endpoint
#: for component clicks.
INGRESS_MODES = ("gateway", "interactions")

_SNOWFLAKE = re.compile(r"^[0-9]{1,20}$", re.ASCII)
_PUBLIC_KEY = re.compile(r"^[0-9a-fA-F]{64}$", re.ASCII)


@dataclass(frozen=True)
class DiscordConfig:
    """Discord agent channel settings.

    `bot_token`: the bot's token (developer portal, Bot > Reset Token), without the
    `Bot ` prefix.
    `application_id`: the application's id (a snowflake: digits; General Information);
    interaction follow-ups are sent under it, and it is the bot user's id until the
    Gateway's `READY` names the bot user.
    `public_key`: the application's public key (64 hex characters, General Information);
    required with `ingress="interactions"`: every request to the interactions endpoint
    must carry a valid Ed25519 signature made with the matching private key.
    `ingress`: `"gateway"` (default: messages and component clicks over the Gateway) or
    `"interactions"` (messages over the Gateway, component clicks POSTed to
    `DiscordChannel.ingress_routes()`; set the Interactions Endpoint URL in the portal).
    `channel_name`: the channel name used in sessions and lifecycle events.
    `api_base_url`: REST base URL (tests and the playground point it at 127.0.0.1).
    `gateway_url`: the Gateway WebSocket URL.
    `edit_interval_s`: minimum seconds between two edits of a streamed message (1 s by
    default: Discord allows about five message edits per five seconds in a channel; the
    REST rate limiter also waits out whatever the bucket headers say).
    `typing_interval_s`: seconds between two typing indicators while a run works
    (Discord shows one for about 10 s; 8 s by default).
    `native_questions`: present structured questions and tool approvals as message
    components (buttons, select menus, a modal for "Other").
    `question_timeout_s`: lifetime of a question before it expires.
    `request_timeout_s`: read timeout of every REST call.
    `run_journal`: a file recording the people's runs in progress when no state store is
    shared: after a crash (`kill -9`) the restarted process tells each person whose run
    was cut off that it was interrupted (`channelkit.platforms.common.run_journal`; with
    `state.redis` the store records them). `None` (default): without a store nothing is
    recorded, and such a person is not told.
    """

    bot_token: str = field(repr=False)
    application_id: str
    public_key: str | None = None
    ingress: str = "gateway"
    channel_name: str = "discord"
    api_base_url: str = DEFAULT_API_BASE_URL
    gateway_url: str = DEFAULT_GATEWAY_URL
    edit_interval_s: float = 1.0
    typing_interval_s: float = 8.0
    native_questions: bool = True
    question_timeout_s: float = 270.0
    request_timeout_s: float = 10.0
    run_journal: str | None = None

    def __post_init__(self) -> None:
        register_secrets(self.bot_token)
        token = self.bot_token
        if not isinstance(token, str) or not token.strip():
            raise ConfigurationError("must be the bot's token", path="discord.bot_token")
        if token.lower().startswith("bot "):
            raise ConfigurationError(
                "must be the token alone, without the 'Bot ' prefix", path="discord.bot_token"
            )
        if any(c.isspace() for c in token):
            raise ConfigurationError("must not contain whitespace", path="discord.bot_token")
        if not isinstance(self.application_id, str) or not _SNOWFLAKE.match(self.application_id):
            raise ConfigurationError(
                "must be the application id: digits (developer portal, General Information)",
                path="discord.application_id",
            )
        if self.ingress not in INGRESS_MODES:
            raise ConfigurationError(
                f"must be one of {', '.join(repr(m) for m in INGRESS_MODES)}",
                path="discord.ingress",
            )
        if self.public_key is not None and (
            not isinstance(self.public_key, str) or not _PUBLIC_KEY.match(self.public_key)
        ):
            raise ConfigurationError(
                "must be the application's public key: 64 hex characters",
                path="discord.public_key",
            )
        if self.ingress == "interactions" and self.public_key is None:
            raise ConfigurationError(
                'is required with ingress "interactions"', path="discord.public_key"
            )
        check_non_empty(self.channel_name, "discord.channel_name")
        if self.run_journal is not None:
            check_non_empty(self.run_journal, "discord.run_journal")
        check_http_url(self.api_base_url, "discord.api_base_url")
        if not isinstance(self.gateway_url, str) or not self.gateway_url.startswith(
            ("ws://", "wss://")
        ):
            raise ConfigurationError("must be a ws:// or wss:// URL", path="discord.gateway_url")
        check_positive_seconds(self.edit_interval_s, "discord.edit_interval_s", maximum=60.0)
        check_positive_seconds(self.typing_interval_s, "discord.typing_interval_s", maximum=9.5)
        check_positive_seconds(self.question_timeout_s, "discord.question_timeout_s")
        check_positive_seconds(self.request_timeout_s, "discord.request_timeout_s")
        if not isinstance(self.native_questions, bool):
            raise ConfigurationError("must be a boolean", path="discord.native_questions")

    def __repr__(self) -> str:
        """The settings with every secret shown as `***` (or left out)."""
        return secret_repr(self, ("bot_token",))

    __str__ = __repr__

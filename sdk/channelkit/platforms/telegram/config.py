"""Configuration of the Telegram adapter.

`TelegramConfig` holds the Telegram-only settings: the bot token, the ingress
(long polling or webhook), the webhook secret, the typing keep-alive interval and the
native-question options. It is validated on construction; every error is a
`ConfigurationError` naming the offending field. Secrets never
appear in ``repr``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from channelkit.errors import ConfigurationError
from channelkit.platforms.common.config import (
    check_http_url,
    check_non_empty,
    check_positive_seconds,
    register_secrets,
    secret_repr,
    settings_kwargs,
)
from channelkit.platforms.telegram.groups import GROUP_POLICIES, USERNAME_RE

__all__ = ["DEFAULT_API_BASE_URL", "INGRESS_MODES", "STREAMING_MODES", "TelegramConfig"]

#: Production Bot API base URL (``https://api.telegram.org/bot<token>/<method>``).
DEFAULT_API_BASE_URL = "https://api.telegram.org"

#: How updates reach the channel: ``getUpdates`` long polling (the default: no public
#: URL needed) or the ``/telegram/webhook`` route.
INGRESS_MODES = ("polling", "webhook")
#: How a run's text is shown while it streams (``TelegramConfig.streaming``).
STREAMING_MODES = ("draft", "edit", "off")
#: Longest ``getUpdates`` timeout accepted (seconds).
MAX_POLLING_TIMEOUT_S = 50

_BOT_TOKEN_RE = re.compile(r"^[0-9]+:[A-Za-z0-9_-]+$")
_SECRET_RE = re.compile(r"^[A-Za-z0-9_-]{1,256}$")


@dataclass(frozen=True)
class TelegramConfig:
    """Telegram adapter settings.

    ``bot_token``: the BotFather token (``123456:ABC...``).
    ``ingress``: ``"polling"`` (default: the channel's ``connections`` long-poll
    ``getUpdates``; no public URL needed) or ``"webhook"`` (mount
    `TelegramChannel.ingress_routes()` and call ``setWebhook``).
    ``polling_timeout_s``: the ``getUpdates`` long-poll ``timeout`` (1-50 s; the HTTP
    read timeout is this plus ``request_timeout_s``).
    ``webhook_secret``: the ``secret_token`` given to ``setWebhook``; when set, every
    webhook request must carry it in ``X-Telegram-Bot-Api-Secret-Token`` (1-256 chars
    of ``A-Z a-z 0-9 _ -``). When ``None`` the webhook accepts unsigned updates, which
    is only sensible behind a private network.
    ``channel_name``: the channel name used in sessions and lifecycle events.
    ``api_base_url``: Bot API base URL (tests and the emulator point it at 127.0.0.1).
    ``typing_interval_s``: keep-alive period of ``sendChatAction typing`` (Telegram
    expires the status after 5 s).
    ``native_questions``: present structured questions as inline keyboards.
    ``question_timeout_s``: lifetime of a native question before it expires.
    ``request_timeout_s``: read timeout of every Bot API call.
    ``group_policy``: which group messages reach the agent: ``"mention"`` (default; the
    bot is mentioned, a command is addressed ``/cmd@bot`` or the message replies to the
    bot), ``"open"`` (all) or ``"disabled"`` (none); see
    `channelkit.platforms.telegram.groups`.
    ``bot_username``: the bot's username (with or without ``@``) for mention detection;
    when ``None``, `TelegramChannel.fetch_identity()` can learn it with ``getMe``.
    ``streaming``: how the live output segment is shown while the agent writes:
    ``"draft"`` (default; ``sendMessageDraft`` in private chats, post-and-edit in groups,
    where drafts do not exist), ``"edit"`` (post-and-edit everywhere) or ``"off"`` (each
    segment is sent once it ends); see `channelkit.platforms.telegram.output`.
    ``stream_interval_s``: minimum seconds between two streamed snapshots of a segment
    (0.5 s by default; edits are further limited to one per second per chat).
    ``run_journal``: a file recording the runs in progress when no state store is shared
    (with ``state.redis`` the store holds them and this is not used): after a crash
    (``kill -9``) the restarted process tells each person whose run was cut off that it
    was interrupted (`channelkit.platforms.common.run_journal`). ``None`` (default):
    without a store nothing is recorded, and such a person is not told.
    """

    bot_token: str = field(repr=False)
    webhook_secret: str | None = field(default=None, repr=False)
    channel_name: str = "telegram"
    api_base_url: str = DEFAULT_API_BASE_URL
    typing_interval_s: float = 4.0
    native_questions: bool = True
    question_timeout_s: float = 270.0
    request_timeout_s: float = 10.0
    group_policy: str = "mention"
    bot_username: str | None = None
    ingress: str = "polling"
    polling_timeout_s: int = 25
    streaming: str = "draft"
    stream_interval_s: float = 0.5
    run_journal: str | None = None

    def __post_init__(self) -> None:
        register_secrets(self.bot_token, self.webhook_secret)
        if not isinstance(self.bot_token, str) or not _BOT_TOKEN_RE.match(self.bot_token):
            raise ConfigurationError(
                "must be a Bot API token like '123456:ABC-def' (digits, colon, token)",
                path="telegram.bot_token",
            )
        if self.webhook_secret is not None and (
            not isinstance(self.webhook_secret, str) or not _SECRET_RE.match(self.webhook_secret)
        ):
            raise ConfigurationError(
                "must be 1-256 characters of A-Z, a-z, 0-9, '_' or '-'",
                path="telegram.webhook_secret",
            )
        if self.ingress not in INGRESS_MODES:
            raise ConfigurationError(
                f"must be one of {', '.join(repr(m) for m in INGRESS_MODES)}",
                path="telegram.ingress",
            )
        if (
            isinstance(self.polling_timeout_s, bool)
            or not isinstance(self.polling_timeout_s, int)
            or not 1 <= self.polling_timeout_s <= MAX_POLLING_TIMEOUT_S
        ):
            raise ConfigurationError(
                f"must be whole seconds from 1 to {MAX_POLLING_TIMEOUT_S}",
                path="telegram.polling_timeout_s",
            )
        if self.streaming not in STREAMING_MODES:
            raise ConfigurationError(
                f"must be one of {', '.join(repr(m) for m in STREAMING_MODES)}",
                path="telegram.streaming",
            )
        check_positive_seconds(self.stream_interval_s, "telegram.stream_interval_s", maximum=60.0)
        check_non_empty(self.channel_name, "telegram.channel_name")
        if self.run_journal is not None:
            check_non_empty(self.run_journal, "telegram.run_journal")
        check_http_url(self.api_base_url, "telegram.api_base_url")
        check_positive_seconds(self.typing_interval_s, "telegram.typing_interval_s", maximum=5.0)
        check_positive_seconds(self.question_timeout_s, "telegram.question_timeout_s")
        check_positive_seconds(self.request_timeout_s, "telegram.request_timeout_s")
        if not isinstance(self.native_questions, bool):
            raise ConfigurationError("must be a boolean", path="telegram.native_questions")
        if self.group_policy not in GROUP_POLICIES:
            raise ConfigurationError(
                f"must be one of {', '.join(GROUP_POLICIES)}", path="telegram.group_policy"
            )
        if self.bot_username is not None and (
            not isinstance(self.bot_username, str)
            or not USERNAME_RE.match(self.bot_username.removeprefix("@"))
        ):
            raise ConfigurationError(
                "must be a Telegram username (5-32 letters, digits or '_', '@' optional)",
                path="telegram.bot_username",
            )

    @property
    def bot_id(self) -> int:
        """The bot's user id: the numeric part of the token before the colon."""
        return int(self.bot_token.split(":", 1)[0])

    def __repr__(self) -> str:
        """The settings with every secret shown as ``***`` (or left out)."""
        return secret_repr(self, ("bot_token", "webhook_secret"))

    __str__ = __repr__

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TelegramConfig:
        """Build from a plain mapping (camelCase or snake_case keys); unknown keys fail."""
        return cls(**settings_kwargs(cls, data, "telegram", required=("bot_token",)))

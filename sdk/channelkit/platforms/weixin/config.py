"""Configuration of the Weixin (WeChat iLink bot) adapter.

Validated on construction; every error is a `ConfigurationError`
naming the offending field. The bot token never appears in ``repr``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from channelkit.errors import ConfigurationError
from channelkit.platforms.common.config import (
    check_http_url,
    check_non_empty,
    check_positive_seconds,
    register_secrets,
    settings_kwargs,
)

__all__ = ["DEFAULT_BASE_URL", "DEFAULT_CHANNEL_VERSION", "INGRESS_MODES", "WeixinConfig"]

#: Production iLink base URL (the login response's ``baseurl`` may override it).
DEFAULT_BASE_URL = "https://ilinkai.weixin.qq.com"
#: The Weixin CDN holding iLink media (images, voice, files, videos; AES-128-ECB).
DEFAULT_CDN_BASE_URL = "https://novac2c.cdn.weixin.qq.com/c2c"
#: ``base_info.channel_version`` sent with every call (pinned; the protocol is unofficial).
DEFAULT_CHANNEL_VERSION = "2.1.3"
#: How messages reach the channel: iLink offers ``getupdates`` long polling only.
INGRESS_MODES = ("polling",)


@dataclass(frozen=True)
class WeixinConfig:
    """Weixin adapter settings.

    ``bot_token``: the iLink ``bot_token`` from the QR-code login.
    ``base_url``: iLink base URL. ``channel_version``: ``base_info.channel_version``.
    ``channel_name``: the channel name used in sessions and lifecycle events.
    ``typing``: send typing indicators (getconfig + sendtyping).
    ``ticket_ttl_s``: how long a typing ticket is cached per user.
    ``request_timeout_s``: read timeout of every iLink call.
    ``ingress``: ``"polling"``, the only ingress iLink offers (the channel's
    ``connections`` long-poll ``getupdates``).
    ``polling_timeout_s``: how long a ``getupdates`` long poll may take before the client
    gives up on it (an empty poll, not an error) until the server announces its own
    ``longpolling_timeout_ms``; at most 120 s.
    ``cdn_base_url``: the CDN media is downloaded from and uploaded to (the person's
    files and the agent's; nothing is fetched from any other host).
    ``run_journal``: a file recording the runs in progress when no state store is shared
    (with ``state.redis`` the store holds them): after a crash (``kill -9``) the restarted
    process tells each person whose run was cut off that it was interrupted
    (`channelkit.platforms.common.run_journal`). ``None`` (default): without a store
    nothing is recorded.
    """

    bot_token: str = field(repr=False)
    base_url: str = DEFAULT_BASE_URL
    channel_version: str = DEFAULT_CHANNEL_VERSION
    channel_name: str = "weixin"
    typing: bool = True
    ticket_ttl_s: float = 3600.0
    request_timeout_s: float = 10.0
    ingress: str = "polling"
    polling_timeout_s: float = 35.0
    run_journal: str | None = None
    cdn_base_url: str = DEFAULT_CDN_BASE_URL

    def __post_init__(self) -> None:
        register_secrets(self.bot_token)
        check_non_empty(self.bot_token, "weixin.bot_token")
        check_http_url(self.base_url, "weixin.base_url")
        check_http_url(self.cdn_base_url, "weixin.cdn_base_url")
        check_non_empty(self.channel_version, "weixin.channel_version")
        parts = self.channel_version.split(".")
        if len(parts) != 3 or not all(p.isdigit() and int(p) < 256 for p in parts):
            raise ConfigurationError(
                "must look like '2.1.3' (three numbers below 256)", path="weixin.channel_version"
            )
        check_non_empty(self.channel_name, "weixin.channel_name")
        if self.run_journal is not None:
            check_non_empty(self.run_journal, "weixin.run_journal")
        if not isinstance(self.typing, bool):
            raise ConfigurationError("must be a boolean", path="weixin.typing")
        check_positive_seconds(self.ticket_ttl_s, "weixin.ticket_ttl_s")
        check_positive_seconds(self.request_timeout_s, "weixin.request_timeout_s")
        if self.ingress not in INGRESS_MODES:
            raise ConfigurationError(
                "must be 'polling' (iLink delivers messages by long polling only)",
                path="weixin.ingress",
            )
        check_positive_seconds(self.polling_timeout_s, "weixin.polling_timeout_s", maximum=120.0)

    @property
    def client_version(self) -> int:
        """``iLink-App-ClientVersion``: the version packed as ``0x00MMNNPP``."""
        major, minor, patch = (int(p) for p in self.channel_version.split("."))
        return (major << 16) | (minor << 8) | patch

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> WeixinConfig:
        """Build from a plain mapping (camelCase or snake_case keys); unknown keys fail."""
        return cls(**settings_kwargs(cls, data, "weixin", required=("bot_token",)))

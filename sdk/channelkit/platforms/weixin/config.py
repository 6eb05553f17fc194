"""Configuration of the Weixin (WeChat iLink bot) adapter.

Validated on construction; every error is a :class:`~channelkit.errors.ConfigurationError`
naming the offending field. The bot token never appears in ``repr``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from channelkit.errors import ConfigurationError

__all__ = ["DEFAULT_BASE_URL", "DEFAULT_CHANNEL_VERSION", "WeixinConfig"]

#: Production iLink base URL (the login response's ``baseurl`` may override it).
DEFAULT_BASE_URL = "https://ilinkai.weixin.qq.com"
#: ``base_info.channel_version`` sent with every call (pinned; the protocol is unofficial).
DEFAULT_CHANNEL_VERSION = "2.1.3"


@dataclass(frozen=True)
class WeixinConfig:
    """Weixin adapter settings.

    ``bot_token``: the iLink ``bot_token`` from the QR-code login.
    ``base_url``: iLink base URL. ``channel_version``: ``base_info.channel_version``.
    ``channel_name``: the channel name used in sessions and lifecycle events.
    ``typing``: send typing indicators (getconfig + sendtyping).
    ``ticket_ttl_s``: how long a typing ticket is cached per user.
    ``request_timeout_s``: read timeout of every iLink call.
    """

    bot_token: str = field(repr=False)
    base_url: str = DEFAULT_BASE_URL
    channel_version: str = DEFAULT_CHANNEL_VERSION
    channel_name: str = "weixin"
    typing: bool = True
    ticket_ttl_s: float = 3600.0
    request_timeout_s: float = 10.0

    def __post_init__(self) -> None:
        if not isinstance(self.bot_token, str) or not self.bot_token.strip():
            raise ConfigurationError("must be a non-empty string", path="weixin.bot_token")
        if not isinstance(self.base_url, str) or not self.base_url.startswith(
            ("http://", "https://")
        ):
            raise ConfigurationError("must be an http(s) URL", path="weixin.base_url")
        if not isinstance(self.channel_version, str) or not self.channel_version.strip():
            raise ConfigurationError("must be a non-empty string", path="weixin.channel_version")
        parts = self.channel_version.split(".")
        if len(parts) != 3 or not all(p.isdigit() and int(p) < 256 for p in parts):
            raise ConfigurationError(
                "must look like '2.1.3' (three numbers below 256)", path="weixin.channel_version"
            )
        if not isinstance(self.channel_name, str) or not self.channel_name.strip():
            raise ConfigurationError("must be a non-empty string", path="weixin.channel_name")
        if not isinstance(self.typing, bool):
            raise ConfigurationError("must be a boolean", path="weixin.typing")
        for name in ("ticket_ttl_s", "request_timeout_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                raise ConfigurationError(
                    "must be a positive number of seconds", path=f"weixin.{name}"
                )

    @property
    def client_version(self) -> int:
        """``iLink-App-ClientVersion``: the version packed as ``0x00MMNNPP``."""
        major, minor, patch = (int(p) for p in self.channel_version.split("."))
        return (major << 16) | (minor << 8) | patch

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> WeixinConfig:
        """Build from a plain mapping (camelCase or snake_case keys); unknown keys fail."""
        if not isinstance(data, Mapping):
            raise ConfigurationError("must be an object", path="weixin")
        aliases = {
            "botToken": "bot_token",
            "baseUrl": "base_url",
            "channelVersion": "channel_version",
            "channelName": "channel_name",
            "ticketTtlS": "ticket_ttl_s",
            "requestTimeoutS": "request_timeout_s",
        }
        known = {*aliases.values(), "typing"}
        kwargs: dict[str, Any] = {}
        for key, value in data.items():
            name = aliases.get(key, key)
            if name not in known:
                raise ConfigurationError("unknown setting", path=f"weixin.{key}")
            kwargs[name] = value
        if "bot_token" not in kwargs:
            raise ConfigurationError("is required", path="weixin.bot_token")
        return cls(**kwargs)

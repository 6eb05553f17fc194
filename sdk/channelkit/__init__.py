"""channelkit: connect an AI agent's runs to IM platforms with native interactions.

The package is synchronous and thread-pool backed; call it from Flask, Django or any
WSGI application. The names a user starts from are importable from here::

    from channelkit import DingtalkChannel, DingtalkConfig, FunctionAgent

    channel = DingtalkChannel(DingtalkConfig(...), FunctionAgent(my_agent))

Channels and their configs (DingTalk, Feishu, Slack, Telegram, Weixin), the agents
(`FunctionAgent` with `Question`, `AcpBridge`), `load_config()`,
the core types (`ChannelBase`, `InboundMessage`, `SessionTarget`) and
the main errors. Everything except the errors is imported on first access, so
``import channelkit`` stays cheap: it loads no platform package and none of requests,
urllib3, jsonschema or dataclasses-json. The full API lives in the subpackages
(`channelkit.core`, `channelkit.platforms`, `channelkit.agents`, ...).
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING, Any

from channelkit.errors import (
    AcpError,
    ApiError,
    AuthError,
    BadRequest,
    ChannelBusy,
    ChannelClosed,
    ChannelKitError,
    ConfigurationError,
    ConnectTimeout,
    DeserializationError,
    NotFound,
    QuestionCancelled,
    QuestionError,
    QuestionExpired,
    RateLimited,
    ReadTimeout,
    ServerError,
    TransportError,
)

if TYPE_CHECKING:
    from channelkit.agents import FunctionAgent, Question
    from channelkit.agents.acp import AcpBridge
    from channelkit.config import load_config
    from channelkit.core import ChannelBase, InboundMessage, SessionTarget
    from channelkit.platforms.dingtalk import DingtalkChannel, DingtalkConfig
    from channelkit.platforms.discord import DiscordChannel, DiscordConfig
    from channelkit.platforms.feishu import FeishuChannel, FeishuConfig
    from channelkit.platforms.slack import SlackChannel, SlackConfig
    from channelkit.platforms.telegram import TelegramChannel, TelegramConfig
    from channelkit.platforms.weixin import WeixinChannel, WeixinConfig

from channelkit.version import __version__

logging.getLogger(__name__).addHandler(logging.NullHandler())

# name -> the module it is imported from on first access; the platforms' channel and
# config classes come from the registry (channelkit.platforms.PLATFORMS) instead
_LAZY = {
    "AcpBridge": "channelkit.agents.acp",
    "ChannelBase": "channelkit.core",
    "FunctionAgent": "channelkit.agents",
    "InboundMessage": "channelkit.core",
    "Question": "channelkit.agents",
    "SessionTarget": "channelkit.core",
    "load_config": "channelkit.config",
}

__all__ = [
    "AcpBridge",
    "AcpError",
    "ApiError",
    "AuthError",
    "BadRequest",
    "ChannelBase",
    "ChannelBusy",
    "ChannelClosed",
    "ChannelKitError",
    "ConfigurationError",
    "ConnectTimeout",
    "DeserializationError",
    "DingtalkChannel",
    "DingtalkConfig",
    "DiscordChannel",
    "DiscordConfig",
    "FeishuChannel",
    "FeishuConfig",
    "FunctionAgent",
    "InboundMessage",
    "NotFound",
    "Question",
    "QuestionCancelled",
    "QuestionError",
    "QuestionExpired",
    "RateLimited",
    "ReadTimeout",
    "ServerError",
    "SessionTarget",
    "SlackChannel",
    "SlackConfig",
    "TelegramChannel",
    "TelegramConfig",
    "TransportError",
    "WeixinChannel",
    "WeixinConfig",
    "__version__",
    "load_config",
]


def _platform_class(name: str) -> Any:
    """A chat platform's channel or config class named ``name`` (registry lookup), else
    None."""
    from channelkit.platforms import chat_platforms

    for spec in chat_platforms():
        for ref in (spec.channel_class, spec.config_class):
            if ref is not None and ref.name == name:
                return ref.load()
    return None


def __getattr__(name: str) -> Any:
    """Import a front-door name from its home module on first access (then cache it):
    the table above, or a registered chat platform's channel / config class."""
    home = _LAZY.get(name)
    value = getattr(importlib.import_module(home), name) if home is not None else None
    if value is None and name[:1].isupper():
        value = _platform_class(name)
    if value is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})

"""channelkit: connect an AI agent's runs to IM platforms with native interactions.

The package is synchronous and thread-pool backed; call it from Flask, Django or any
WSGI application. The names a user starts from are importable from here::

    from channelkit import DingtalkChannel, DingtalkConfig, FunctionAgent

    channel = DingtalkChannel(DingtalkConfig(...), FunctionAgent(my_agent))

Channels and their configs (DingTalk, Feishu, Slack, Telegram, Weixin), the agents
(:class:`FunctionAgent` with :class:`Question`, :class:`AcpBridge`), :func:`load_config`,
the core types (:class:`ChannelBase`, :class:`InboundMessage`, :class:`SessionTarget`) and
the main errors. Everything except the errors is imported on first access, so
``import channelkit`` stays cheap: it loads no platform package and none of requests,
urllib3, jsonschema or dataclasses-json. The full API lives in the subpackages
(:mod:`channelkit.core`, :mod:`channelkit.platforms`, :mod:`channelkit.agents`, ...).
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
    from channelkit.platforms.feishu import FeishuChannel, FeishuConfig
    from channelkit.platforms.slack import SlackChannel, SlackConfig
    from channelkit.platforms.telegram import TelegramChannel, TelegramConfig
    from channelkit.platforms.weixin import WeixinChannel, WeixinConfig

__version__ = "0.1.0"

logging.getLogger(__name__).addHandler(logging.NullHandler())

# name -> the module it is imported from on first access
_LAZY = {
    "AcpBridge": "channelkit.agents.acp",
    "ChannelBase": "channelkit.core",
    "DingtalkChannel": "channelkit.platforms.dingtalk",
    "DingtalkConfig": "channelkit.platforms.dingtalk",
    "FeishuChannel": "channelkit.platforms.feishu",
    "FeishuConfig": "channelkit.platforms.feishu",
    "FunctionAgent": "channelkit.agents",
    "InboundMessage": "channelkit.core",
    "Question": "channelkit.agents",
    "SessionTarget": "channelkit.core",
    "SlackChannel": "channelkit.platforms.slack",
    "SlackConfig": "channelkit.platforms.slack",
    "TelegramChannel": "channelkit.platforms.telegram",
    "TelegramConfig": "channelkit.platforms.telegram",
    "WeixinChannel": "channelkit.platforms.weixin",
    "WeixinConfig": "channelkit.platforms.weixin",
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


def __getattr__(name: str) -> Any:
    """Import a front-door name from its home module on first access (then cache it)."""
    home = _LAZY.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})

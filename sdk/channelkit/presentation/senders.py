"""Compatibility names: each platform's sender now lives in ``channelkit.platforms.<name>.sender``.

``from channelkit.presentation.senders import SlackSender`` keeps working: the name is
imported from its platform package on first access (module ``__getattr__``), so
importing :mod:`channelkit.presentation` never imports a platform package.
"""

from __future__ import annotations

import importlib
from typing import Any

_HOMES = {
    "DiscordSender": "discord",
    "FeishuSender": "feishu",
    "LineSender": "line",
    "MattermostSender": "mattermost",
    "MsteamsSender": "msteams",
    "SlackSender": "slack",
    "TelegramSender": "telegram",
}

__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    """Resolve a sender class from its platform package on first access."""
    platform = _HOMES.get(name)
    if platform is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"channelkit.platforms.{platform}.sender"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])

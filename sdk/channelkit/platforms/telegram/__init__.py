"""Telegram: typing keep-alive, inline-keyboard questions, webhook ingress.

``TelegramChannel`` implements native input (inline-keyboard questions) without
streaming output; see ``docs/platforms/telegram.md``. The presentation renderer lives
in ``channelkit.platforms.telegram.renderer`` and is imported separately.
"""

from channelkit.platforms.telegram.adapter import TelegramChannel
from channelkit.platforms.telegram.config import TelegramConfig

__all__ = ["TelegramChannel", "TelegramConfig"]

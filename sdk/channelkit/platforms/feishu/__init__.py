"""Feishu / Lark adapter: streaming output cards with Stop, native question forms.

``FeishuChannel`` (a ``ChannelBase``) and ``FeishuConfig``; see docs/platforms/feishu.md.
"""

from __future__ import annotations

from channelkit.platforms.feishu.adapter import CARD_PATH, EVENTS_PATH, FeishuChannel
from channelkit.platforms.feishu.config import FeishuConfig, FeishuFormsConfig

__all__ = ["CARD_PATH", "EVENTS_PATH", "FeishuChannel", "FeishuConfig", "FeishuFormsConfig"]

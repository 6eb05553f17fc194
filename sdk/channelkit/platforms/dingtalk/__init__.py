"""The DingTalk adapter: streaming status cards, question cards, callbacks, degradation.

``DingtalkChannel`` is a `channelkit.core.ChannelBase`; ``DingtalkConfig`` holds
its settings (``interactiveCards`` is parsed and validated by
`parse_interactive_cards()`). See ``docs/platforms/dingtalk.md``.
"""

from __future__ import annotations

from channelkit.platforms.dingtalk.adapter import CARD_PATH, ROBOT_PATH, DingtalkChannel
from channelkit.platforms.dingtalk.api import (
    QUESTION_CARD_TEMPLATE_ID,
    STATUS_CARD_TEMPLATE_ID,
    CardApi,
    CardTarget,
)
from channelkit.platforms.dingtalk.config import (
    DingtalkConfig,
    InteractiveCardConfig,
    parse_interactive_cards,
)
from channelkit.platforms.dingtalk.ingress import card_signature, robot_signature

__all__ = [
    "CARD_PATH",
    "QUESTION_CARD_TEMPLATE_ID",
    "ROBOT_PATH",
    "STATUS_CARD_TEMPLATE_ID",
    "CardApi",
    "CardTarget",
    "DingtalkChannel",
    "DingtalkConfig",
    "InteractiveCardConfig",
    "card_signature",
    "parse_interactive_cards",
    "robot_signature",
]

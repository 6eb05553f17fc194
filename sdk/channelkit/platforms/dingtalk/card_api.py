"""Moved: the DingTalk OpenAPI layer lives in :mod:`channelkit.platforms.dingtalk.api`."""

from channelkit.platforms.dingtalk.api import (
    EYE_EMOTION,
    QUESTION_CARD_TEMPLATE_ID,
    STATUS_CARD_TEMPLATE_ID,
    CardApi,
    CardDeliveryError,
    CardTarget,
    stringify_param_map,
)

__all__ = [
    "EYE_EMOTION",
    "QUESTION_CARD_TEMPLATE_ID",
    "STATUS_CARD_TEMPLATE_ID",
    "CardApi",
    "CardDeliveryError",
    "CardTarget",
    "stringify_param_map",
]

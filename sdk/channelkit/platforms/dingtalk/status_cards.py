"""Moved: the status cards live in :mod:`channelkit.platforms.dingtalk.output`."""

from channelkit.platforms.dingtalk.api import (
    TEMPLATE_REJECTION_CODES,
    is_template_rejection,
    log_card_error,
)
from channelkit.platforms.dingtalk.output import (
    MAX_LIVE_STATUS_CARDS,
    StatusCardController,
    StatusRecord,
    StatusTombstone,
    final_param_map,
    status_line,
)

__all__ = [
    "MAX_LIVE_STATUS_CARDS",
    "TEMPLATE_REJECTION_CODES",
    "StatusCardController",
    "StatusRecord",
    "StatusTombstone",
    "final_param_map",
    "is_template_rejection",
    "log_card_error",
    "status_line",
]

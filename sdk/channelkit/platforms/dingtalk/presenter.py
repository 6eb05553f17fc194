"""Moved: the presenter lives in :mod:`channelkit.platforms.dingtalk.output`."""

from channelkit.platforms.dingtalk.output import (
    ANSWER_SENT_BELOW,
    MAX_LIVE_RUNS,
    STOP_ACTION_ID,
    DingtalkPresenter,
    RunBinding,
)

__all__ = [
    "ANSWER_SENT_BELOW",
    "MAX_LIVE_RUNS",
    "STOP_ACTION_ID",
    "DingtalkPresenter",
    "RunBinding",
]

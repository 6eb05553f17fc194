"""Moved: the context shapes live in :mod:`channelkit.platforms.dingtalk.questions`."""

from channelkit.platforms.dingtalk.questions import (
    CallbackResult,
    InputRequestLike,
    OwnerLike,
    QuestionLike,
    SegmentLike,
    TargetLike,
    option_label,
)

__all__ = [
    "CallbackResult",
    "InputRequestLike",
    "OwnerLike",
    "QuestionLike",
    "SegmentLike",
    "TargetLike",
    "option_label",
]

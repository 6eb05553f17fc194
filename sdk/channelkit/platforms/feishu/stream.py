"""Moved: the streaming output cards live in :mod:`channelkit.platforms.feishu.output`."""

from channelkit.platforms.feishu.output import (
    FINALIZE_TIMEOUT,
    MAX_LIVE_CARDS,
    PATCH_PER_SECOND,
    OutputCard,
    OutputCardPresenter,
    PatchRateLimiter,
)

__all__ = [
    "FINALIZE_TIMEOUT",
    "MAX_LIVE_CARDS",
    "PATCH_PER_SECOND",
    "OutputCard",
    "OutputCardPresenter",
    "PatchRateLimiter",
]

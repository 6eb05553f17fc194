"""Question expiry relative to core's own deadline for the pending request.

``UserInputRequestContext.expires_at`` is the moment (on the channel's clock) at which
``ChannelBase`` answers an unanswered request ``cancelled``. An adapter's question card
must expire strictly before that, so the card is finalized ``expired`` (and then the
adapter cancels the request itself) before the neutral ``cancelled`` settlement of
core's timer arrives. `EXPIRY_MARGIN` is that head start.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["EXPIRY_MARGIN", "question_deadline"]

#: Seconds an adapter's question expiry precedes core's deadline (``expires_at``). It
#: also covers the moment between the bridge starting its own timer and core
#: registering the request.
EXPIRY_MARGIN = 1.0


def question_deadline(now: float, configured: float, context: Any) -> float:
    """The absolute expiry of a question presented at ``now`` (same clock as ``now``).

    ``min(now + configured, context.expires_at - EXPIRY_MARGIN)``, never before ``now``.
    A context without a finite ``expires_at`` (test doubles) leaves ``configured``.
    """
    deadline = now + max(0.0, float(configured))
    expires_at = getattr(context, "expires_at", None)
    if (
        isinstance(expires_at, int | float)
        and not isinstance(expires_at, bool)
        and math.isfinite(expires_at)
    ):
        deadline = min(deadline, float(expires_at) - EXPIRY_MARGIN)
    return max(now, deadline)

"""Exact-run cancellation.

`RunCancellation` cancels one run, never a session by guess: before the prompt
went out it cancels locally (no bridge call); afterwards it asks the bridge
(``cancel_session``) once, concurrent cancellers waiting on that one attempt (bounded by
``config.cancel_timeout``). While the attempt is pending the run's text is held and the
bridge's own resolutions of its requests are deferred; a failed attempt releases both,
a successful one settles the run's pending requests ``run_cancelled`` first and then
posts the run's single ``cancelled`` lifecycle event.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from channelkit.agents.base import AgentBridge
from channelkit.core.config import ChannelConfig
from channelkit.core.permission_requests import PendingRequests
from channelkit.core.run_events import RunEvents
from channelkit.core.runs import CancelAttempt, Run
from channelkit.core.types import (
    CancellationReason,
    LifecycleType,
    SegmentEndReason,
    SettlementReason,
)

__all__ = ["RunCancellation"]

logger = logging.getLogger("channelkit.core.channel")


class RunCancellation:
    """Cancels runs of one channel; see the module docstring.

    ``bridge`` returns the channel's current agent bridge (it may be replaced).
    """

    def __init__(
        self,
        *,
        config: ChannelConfig,
        events: RunEvents,
        requests: PendingRequests,
        bridge: Callable[[], AgentBridge],
    ) -> None:
        self.channel_name = config.name
        self._config = config
        self._events = events
        self._requests = requests
        self._bridge = bridge

    def cancel(self, run: Run, reason: CancellationReason | str) -> bool:
        """Cancel ``run``; True when it is (or already was) cancelled."""
        with run.lock:
            if run.cancelled:
                return True
            if run.past_cancel_point():
                return False
            if not run.prompting:
                # The prompt has not gone out yet: cancel locally, no RPC needed.
                run.cancelled = True
                run.held = []
                early = True
            else:
                early = False
        if early:
            self.finish(run, reason)
            return True
        with run.lock:
            if run.is_cancelled():
                return True
            if run.past_cancel_point():
                return False
            attempt = run.cancel_attempt
            first = attempt is None
            if attempt is None:
                attempt = run.cancel_attempt = CancelAttempt()
                run.cancel_pending = True
        if not first:
            attempt.decided.wait(self._config.cancel_timeout)
            return attempt.result
        try:
            try:
                ok = bool(self._bridge().cancel_session(run.session_id))
            except Exception as exc:
                logger.warning(
                    "[%s] cancel_session failed for session=%s: %s",
                    self.channel_name,
                    run.session_id,
                    exc,
                )
                ok = False
            with run.lock:
                run.cancel_pending = False
                deferred = run.deferred
                run.deferred = []
                failed = not ok or run.past_cancel_point()
                if failed:
                    run.cancel_attempt = None
                    if not run.done:
                        self._events.release_held_locked(run)
                else:
                    run.cancelled = True
                    run.held = []
                    attempt.result = True
            if failed:
                # The cancel did not happen: apply resolutions that arrived meanwhile.
                for apply in deferred:
                    apply()
                return False
            self.finish(run, reason)
            return True
        finally:
            attempt.decided.set()

    def finish(self, run: Run, reason: CancellationReason | str) -> None:
        """Settle the run's requests ``run_cancelled``, then its ``cancelled`` event."""
        # Settlement first, so listeners see run_cancelled before any collapsed bridge
        # cancellation; then the run's single cancelled lifecycle event.
        self._requests.remove_for_session(run.session_id, SettlementReason.RUN_CANCELLED)
        with run.lock:
            if run.terminal:
                return
            run.terminal = True
            self._events.end_segment_locked(run, SegmentEndReason.CANCELLED)
            self._events.post_lifecycle(run, LifecycleType.CANCELLED, reason=reason)

    def await_decision(self, run: Run) -> None:
        """Wait (bounded by ``config.cancel_timeout``) for a cancel attempt in flight."""
        attempt = run.cancel_attempt
        if attempt is not None:
            attempt.decided.wait(self._config.cancel_timeout)

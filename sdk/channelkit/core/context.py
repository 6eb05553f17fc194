"""The context handed to ``present_user_input_request``."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from channelkit.agents.base import PermissionResponse
from channelkit.core.types import (
    ChannelPromptOwner,
    ChannelUserQuestion,
    SessionTarget,
    SettlementListener,
    SettlementReason,
)

if TYPE_CHECKING:
    from channelkit.core.pending import Pending as _Pending

__all__ = ["UserInputRequestContext"]


class UserInputRequestContext:
    """A structured question the adapter may present natively.

    Captured once, never rediscovered: ``request_id``, ``session_id``, ``run_id``,
    ``owner`` and ``target`` identify exactly who asked and where. ``questions`` are
    normalized (answer keys ``"0"``, ``"1"``...), ``submit_option_id`` is the original
    advertised approve option. ``preceding_segment_id`` is the output segment that was
    closed (reason input_requested) to make room for this input, if any.

    ``respond(response)`` is the only way to answer: it is one-shot (True for exactly
    one caller, the one whose answer the agent accepted; later and concurrent callers get
    False at once; the bridge is called once) and settles the request. A submit looks like
    ``{"outcome": {"outcome": "selected", "optionId": ctx.submit_option_id},
    "answers": {"0": "Blue", "1": "Logs, Metrics"}}``; a cancel like
    ``{"outcome": {"outcome": "cancelled"}}``. It blocks for the bridge call, so call
    it from a pool thread, not before a web ACK.

    ``expires_at`` is the request's absolute deadline on the channel's clock
    (``channel.clock.now()`` seconds): the time at which ChannelBase itself answers the
    request ``cancelled`` (see `ChannelBase.permission_lifetime()`). An adapter that
    shows an expiry must schedule its own strictly before it (leave a small margin), so
    its card is finalized ``expired`` before the neutral ``cancelled`` settlement
    arrives.

    ``on_settled(listener)`` subscribes a typed one-shot listener called with a
    `SettlementReason` (immediately if already settled); it returns an
    unsubscribe function that removes only that listener.
    """

    __slots__ = (
        "_pending",
        "channel_name",
        "expires_at",
        "message_id",
        "owner",
        "preceding_segment_id",
        "questions",
        "request_id",
        "run_id",
        "session_id",
        "submit_option_id",
        "target",
    )

    def __init__(
        self,
        *,
        pending: _Pending,
        channel_name: str,
        request_id: str,
        session_id: str,
        run_id: str,
        owner: ChannelPromptOwner,
        target: SessionTarget,
        questions: tuple[ChannelUserQuestion, ...],
        submit_option_id: str,
        preceding_segment_id: str | None,
        message_id: str | None,
        expires_at: float = float("inf"),
    ) -> None:
        self._pending = pending
        self.channel_name = channel_name
        self.request_id = request_id
        self.session_id = session_id
        self.run_id = run_id
        self.owner = owner
        self.target = target
        self.questions = questions
        self.submit_option_id = submit_option_id
        self.preceding_segment_id = preceding_segment_id
        self.message_id = message_id
        self.expires_at = expires_at

    def respond(self, response: PermissionResponse) -> bool:
        """Answer the original request (one-shot); True when the agent accepted it."""
        return self._pending.respond(response)

    def on_settled(self, listener: SettlementListener) -> Callable[[], None]:
        """Subscribe to settlement; returns an unsubscribe function."""
        return self._pending.subscribe(listener)

    @property
    def settled(self) -> SettlementReason | None:
        """The settlement reason, or None while pending."""
        return self._pending.settled_reason

    def __repr__(self) -> str:
        return (
            f"<UserInputRequestContext request={self.request_id} session={self.session_id} "
            f"run={self.run_id} owner={self.owner.id} questions={len(self.questions)}>"
        )

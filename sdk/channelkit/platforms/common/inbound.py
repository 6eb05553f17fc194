"""One ACK policy for every message ingress: hand an ``InboundMessage`` to the channel.

Every adapter's message ingress (HTTP callbacks and long connections alike) calls
`deliver_inbound()` instead of ``ChannelBase.handle_inbound`` directly, so all of
them answer the platform the same way:

* accepted -> the platform ACK (HTTP 200);
* `ChannelBusy` -> the ACK as well: core tells the person in
  the chat that the bot is busy, and a platform retry would only repeat the message;
* `ChannelClosed` -> HTTP 503 with one warning log line, so the
  platform redelivers the message to an instance that is still open.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Literal

from channelkit.core import (
    ChannelBase,
    ChannelBusy,
    ChannelClosed,
    CommandHandle,
    InboundMessage,
    RunHandle,
)
from channelkit.core.access import ACCESS_COMMAND
from channelkit.observability import hub, tracing
from channelkit.observability.observer import chat_hash, platform_of

__all__ = ["CLOSED_STATUS", "InboundOutcome", "ack_status", "deliver_inbound", "hand_inbound"]

logger = logging.getLogger(__name__)

#: The HTTP status a closed channel answers a message with.
CLOSED_STATUS = 503

InboundOutcome = Literal["accepted", "busy", "closed"]


def deliver_inbound(
    channel: ChannelBase,
    message: InboundMessage,
    *,
    defer: list[Callable[[], None]] | None = None,
) -> InboundOutcome:
    """``channel.handle_inbound(message, defer=defer)`` with the shared ACK policy.

    Returns ``"accepted"``, ``"busy"`` (acknowledge it: the person was told) or
    ``"closed"`` (answer `CLOSED_STATUS`; one warning was logged). Any other
    error propagates to the caller's own error handling.
    """
    return hand_inbound(channel, message, defer=defer)[0]


def hand_inbound(
    channel: ChannelBase,
    message: InboundMessage,
    *,
    defer: list[Callable[[], None]] | None = None,
) -> tuple[InboundOutcome, RunHandle | CommandHandle | None]:
    """`deliver_inbound()` that also returns the run's (or command's) handle, for
    ingress without an HTTP answer (long polling); the handle is None unless accepted."""
    # the inbound span: the run this message starts keeps it as its parent
    attributes = (
        {"channelkit.platform": platform_of(channel), "channelkit.channel": channel.name}
        if tracing.tracing_enabled()
        else None
    )
    with tracing.span(tracing.SPAN_INBOUND, attributes, kind="consumer") as span:
        try:
            handle = channel.handle_inbound(message, defer=defer)
        except ChannelClosed:
            logger.warning("[%s] inbound message refused: the channel is closed", channel.name)
            _observe(channel, message, "closed", None)
            span.set("channelkit.outcome", "closed")
            return "closed", None
        except ChannelBusy as exc:
            logger.info("[%s] inbound message not queued: %s", channel.name, exc)
            _observe(channel, message, "busy", None)
            span.set("channelkit.outcome", "busy")
            return "busy", None
        rejected = (
            isinstance(handle, RunHandle)
            and handle.done()
            and handle.result(0).status == "rejected"
        )
        refused = isinstance(handle, CommandHandle) and handle.command == ACCESS_COMMAND
        outcome = "busy" if rejected else "refused" if refused else "accepted"
        _observe(channel, message, outcome, handle)
        span.set("channelkit.outcome", outcome)
        run_id = getattr(handle, "run_id", None)
        span.set("channelkit.run_id", run_id if isinstance(run_id, str) else None)
        return "accepted", handle


def _observe(
    channel: ChannelBase,
    message: InboundMessage,
    outcome: str,
    handle: RunHandle | CommandHandle | None,
) -> None:
    """Report the message to `channelkit.observability` (its log line and metrics):
    ``busy`` also for a run the full queue refused (the person was told; the platform
    gets its ACK), ``refused`` for a message the access policy refused."""
    try:
        run_id = getattr(handle, "run_id", None)
        name = str(channel.name)
        chat = chat_hash(
            name, getattr(message, "chat_id", None), getattr(message, "thread_id", None)
        )
        hub.inbound(
            platform_of(channel), name, chat, outcome, run_id if isinstance(run_id, str) else ""
        )
    except Exception:  # reporting never breaks the ACK
        logger.debug("[%s] reporting an inbound message failed", channel.name, exc_info=True)


def ack_status(outcome: InboundOutcome | Any) -> int:
    """The HTTP status for an outcome of `deliver_inbound()` (200 or 503)."""
    return CLOSED_STATUS if outcome == "closed" else 200

"""The one interaction router every chat platform uses.

A platform lists its interaction handlers in order (for example Stop, question forms,
approval buttons, presentation buttons). `InteractionRouter.route` asks each in turn;
the first `Decision` wins, `None` means "not mine, ask the next one". When no handler
claims the interaction the router answers the platform's fallback decision. A handler
that raises is logged and answered with the error decision, so an ingress never raises
into the web framework or the long connection.

`decide_inbound` is the message side: it hands an `InboundMessage` to the channel with
the shared ACK policy (`channelkit.platforms.common.inbound`) and returns a `Decision`
whose work starts the run after the ACK.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from channelkit.core import ChannelBase, InboundMessage
from channelkit.platforms.common.contract import Decision, Interaction, InteractionHandler, Work
from channelkit.platforms.common.inbound import InboundOutcome, ack_status, deliver_inbound

__all__ = ["InteractionRouter", "decide_inbound"]

logger = logging.getLogger(__name__)


class InteractionRouter:
    """Decides interactions by asking `handlers` in order; see the module docstring.

    `fallback` answers an interaction no handler claimed, `on_error` one whose handler
    raised (both default to an empty ACK). `name` prefixes the log lines.
    """

    def __init__(
        self,
        handlers: Sequence[InteractionHandler],
        *,
        fallback: Decision | Callable[[Interaction], Decision] | None = None,
        on_error: Decision | None = None,
        name: str = "interaction",
    ) -> None:
        if not handlers:
            raise ValueError("InteractionRouter.handlers: at least one handler is needed")
        self._handlers = tuple(handlers)
        self._fallback = fallback if fallback is not None else Decision.ignored()
        self._on_error = on_error if on_error is not None else Decision.ignored()
        self.name = name

    def route(self, interaction: Interaction) -> Decision:
        """The first handler's decision for `interaction` (never raises)."""
        for handler in self._handlers:
            try:
                decision = handler(interaction)
            except Exception:
                logger.exception("[%s] %s handler failed", self.name, interaction.kind)
                return self._on_error
            if decision is not None:
                return decision
        fallback = self._fallback
        return fallback if isinstance(fallback, Decision) else fallback(interaction)


def decide_inbound(
    channel: ChannelBase, message: InboundMessage, body: object = None
) -> tuple[InboundOutcome, Decision]:
    """Hand `message` to `channel` (`deliver_inbound`); the outcome and its decision.

    The decision's status is `ack_status(outcome)` (503 when the channel is closed),
    its body `body`, and its work reserves nothing before the ACK: the run (or command)
    starts from it.
    """
    deferred: list[Work] = []
    outcome = deliver_inbound(channel, message, defer=deferred)
    decision = Decision(
        status=ack_status(outcome),
        body=body,
        after=tuple(deferred),
        outcome="accepted" if outcome == "accepted" else "ignored",
    )
    return outcome, decision

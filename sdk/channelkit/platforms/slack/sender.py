"""Slack presentation delivery: :class:`SlackSender` on the generated ``SlackClient``.

Pairs :mod:`channelkit.platforms.slack.renderer` with ``channelkit.clients.slack`` and
satisfies :class:`~channelkit.presentation.outbound.PresentationSender`::

    from channelkit.clients.slack import SlackClient
    from channelkit.platforms.slack.sender import SlackSender
    from channelkit.presentation.outbound import deliver, register_sender

    register_sender(SlackSender(SlackClient(...)))

The target is a Slack channel id. Platform errors propagate as
:class:`channelkit.errors.ApiError` subclasses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from channelkit.platforms.slack import renderer
from channelkit.presentation.model import MessagePresentation
from channelkit.presentation.outbound import SenderBase, response_message_id

if TYPE_CHECKING:
    from channelkit.clients.slack import SlackClient

__all__ = ["SlackSender"]


class SlackSender(SenderBase):
    """``chat.postMessage`` + ``pins.add`` (``notify`` has no Slack equivalent)."""

    platform = "slack"
    presentation_capabilities = renderer.CAPABILITIES
    delivery_capabilities = renderer.DELIVERY_CAPABILITIES

    def __init__(self, client: SlackClient, *, thread_ts: str | None = None) -> None:
        self.client = client
        self.thread_ts = thread_ts

    def render(
        self,
        presentation: MessagePresentation,
        *,
        text: str | None = None,
        allow_mass_mentions: bool = False,
    ) -> list[dict[str, Any]]:
        """Block Kit message bodies."""
        return renderer.render(presentation, text=text, allow_mass_mentions=allow_mass_mentions)

    def send(self, target: str, message: dict[str, Any]) -> str | None:
        """Post one message; returns its ``ts``."""
        body = {"channel": target, **message}
        if self.thread_ts is not None:
            body["thread_ts"] = self.thread_ts
        response = self.client.chat_post_message(body=body)
        return response_message_id(response.ts, "ts")

    def pin(self, target: str, message_id: str, *, notify: bool) -> None:
        """``pins.add`` for the message ``ts``."""
        self.client.pins_add(body={"channel": target, "timestamp": message_id})

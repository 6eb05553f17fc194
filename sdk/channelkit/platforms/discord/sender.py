"""Discord presentation delivery: `DiscordSender` on the generated ``DiscordClient``.

Pairs `channelkit.platforms.discord.renderer` with ``channelkit.clients.discord`` and
satisfies `PresentationSender`::

    from channelkit.clients.discord import DiscordClient
    from channelkit.platforms.discord.sender import DiscordSender
    from channelkit.presentation.outbound import deliver, register_sender

    register_sender(DiscordSender(DiscordClient(...)))

The target is a Discord channel id. Platform errors propagate as
`channelkit.errors.ApiError` subclasses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from channelkit.platforms.discord import renderer
from channelkit.presentation.model import MessagePresentation
from channelkit.presentation.outbound import SenderBase, response_message_id

if TYPE_CHECKING:
    from channelkit.clients.discord import DiscordClient

__all__ = ["DiscordSender"]


class DiscordSender(SenderBase):
    """``POST /channels/{id}/messages`` + pin (Discord always posts a pin notice)."""

    platform = "discord"
    presentation_capabilities = renderer.CAPABILITIES
    delivery_capabilities = renderer.DELIVERY_CAPABILITIES

    def __init__(self, client: DiscordClient) -> None:
        self.client = client

    def render(
        self,
        presentation: MessagePresentation,
        *,
        text: str | None = None,
        allow_mass_mentions: bool = False,
    ) -> list[dict[str, Any]]:
        """Components v2 message bodies."""
        return renderer.render(presentation, text=text, allow_mass_mentions=allow_mass_mentions)

    def send(self, target: str, message: dict[str, Any]) -> str | None:
        """Create one message; returns its id."""
        return response_message_id(
            self.client.create_message(channel_id=target, body=message).id, "id"
        )

    def pin(self, target: str, message_id: str, *, notify: bool) -> None:
        """Pin the message in its channel."""
        self.client.pin_message(channel_id=target, message_id=message_id)

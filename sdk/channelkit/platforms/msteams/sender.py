"""Microsoft Teams presentation delivery: `MsteamsSender` on the generated ``MsteamsClient``.

Pairs `channelkit.platforms.msteams.renderer` with ``channelkit.clients.msteams`` and
satisfies `PresentationSender`::

    from channelkit.clients.msteams import MsteamsClient
    from channelkit.platforms.msteams.sender import MsteamsSender
    from channelkit.presentation.outbound import deliver, register_sender

    register_sender(MsteamsSender(MsteamsClient(...)))

The target is a Teams conversation id (the client's ``base_url`` is the conversation's
serviceUrl). Platform errors propagate as `channelkit.errors.ApiError` subclasses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from channelkit.platforms.msteams import renderer
from channelkit.presentation.model import MessagePresentation
from channelkit.presentation.outbound import SenderBase, response_message_id

if TYPE_CHECKING:
    from channelkit.clients.msteams import MsteamsClient

__all__ = ["MsteamsSender"]


class MsteamsSender(SenderBase):
    """Bot Connector ``send_to_conversation``. Teams has no bot pin API here."""

    platform = "msteams"
    presentation_capabilities = renderer.CAPABILITIES
    delivery_capabilities = renderer.DELIVERY_CAPABILITIES

    def __init__(self, client: MsteamsClient) -> None:
        self.client = client

    def render(
        self,
        presentation: MessagePresentation,
        *,
        text: str | None = None,
        allow_mass_mentions: bool = False,
    ) -> list[dict[str, Any]]:
        """Activities carrying an Adaptive Card."""
        return renderer.render(presentation, text=text, allow_mass_mentions=allow_mass_mentions)

    def send(self, target: str, message: dict[str, Any]) -> str | None:
        """Send one activity; returns its id."""
        response = self.client.send_to_conversation(conversation_id=target, body=message)
        return response_message_id(response.id, "id")

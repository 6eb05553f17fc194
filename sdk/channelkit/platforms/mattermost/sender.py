"""Mattermost presentation delivery: `MattermostSender` on ``MattermostClient``.

Pairs `channelkit.platforms.mattermost.renderer` with ``channelkit.clients.mattermost`` and
satisfies `PresentationSender`::

    from channelkit.clients.mattermost import MattermostClient
    from channelkit.platforms.mattermost.sender import MattermostSender
    from channelkit.presentation.outbound import deliver, register_sender

    register_sender(MattermostSender(MattermostClient(...)))

The target is a Mattermost channel id. Platform errors propagate as
`channelkit.errors.ApiError` subclasses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from channelkit.platforms.mattermost import renderer
from channelkit.presentation.model import MessagePresentation
from channelkit.presentation.outbound import SenderBase, response_message_id

if TYPE_CHECKING:
    from channelkit.clients.mattermost import MattermostClient

__all__ = ["MattermostSender"]


class MattermostSender(SenderBase):
    """``POST /api/v4/posts`` + ``POST /api/v4/posts/{id}/pin``.

    ``callback_url`` is the integration URL Mattermost calls when a button is clicked.
    """

    platform = "mattermost"
    presentation_capabilities = renderer.CAPABILITIES
    delivery_capabilities = renderer.DELIVERY_CAPABILITIES

    def __init__(
        self, client: MattermostClient, *, callback_url: str, root_id: str | None = None
    ) -> None:
        self.client = client
        self.callback_url = callback_url
        self.root_id = root_id

    def render(
        self,
        presentation: MessagePresentation,
        *,
        text: str | None = None,
        allow_mass_mentions: bool = False,
    ) -> list[dict[str, Any]]:
        """Post bodies with interactive message actions."""
        return renderer.render(
            presentation,
            text=text,
            callback_url=self.callback_url,
            allow_mass_mentions=allow_mass_mentions,
        )

    def send(self, target: str, message: dict[str, Any]) -> str | None:
        """Create one post; returns its id."""
        body = {"channel_id": target, **message}
        if self.root_id is not None:
            body["root_id"] = self.root_id
        return response_message_id(self.client.create_post(body=body).id, "id")

    def pin(self, target: str, message_id: str, *, notify: bool) -> None:
        """Pin the post."""
        self.client.pin_post(post_id=message_id)

"""Feishu presentation delivery: :class:`FeishuSender` on the generated ``FeishuClient``.

Pairs :mod:`channelkit.platforms.feishu.renderer` with ``channelkit.clients.feishu`` and
satisfies :class:`~channelkit.presentation.outbound.PresentationSender`::

    from channelkit.clients.feishu import FeishuClient
    from channelkit.platforms.feishu.sender import FeishuSender
    from channelkit.presentation.outbound import deliver, register_sender

    register_sender(FeishuSender(FeishuClient(...)))

The target is a Feishu receive id (``chat_id`` by default). Platform errors propagate as
:class:`channelkit.errors.ApiError` subclasses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from channelkit.platforms.feishu import renderer
from channelkit.presentation.model import MessagePresentation
from channelkit.presentation.outbound import SenderBase, response_message_id

if TYPE_CHECKING:
    from channelkit.clients.feishu import FeishuClient

__all__ = ["FeishuSender"]


class FeishuSender(SenderBase):
    """``im/v1/messages`` (interactive card) + ``im/v1/pins``."""

    platform = "feishu"
    presentation_capabilities = renderer.CAPABILITIES
    delivery_capabilities = renderer.DELIVERY_CAPABILITIES

    def __init__(self, client: FeishuClient, *, receive_id_type: str = "chat_id") -> None:
        self.client = client
        self.receive_id_type = receive_id_type

    def render(
        self,
        presentation: MessagePresentation,
        *,
        text: str | None = None,
        allow_mass_mentions: bool = False,
    ) -> list[dict[str, Any]]:
        """Interactive-card message bodies."""
        return renderer.render(presentation, text=text, allow_mass_mentions=allow_mass_mentions)

    def send(self, target: str, message: dict[str, Any]) -> str | None:
        """Send one card; returns its ``message_id``."""
        response = self.client.create_message(
            receive_id_type=self.receive_id_type, body={"receive_id": target, **message}
        )
        return response_message_id(getattr(response.data, "message_id", None), "data.message_id")

    def pin(self, target: str, message_id: str, *, notify: bool) -> None:
        """Pin the message in its chat (Feishu has no notify switch)."""
        self.client.create_pin(body={"message_id": message_id})

"""Feishu presentation delivery: `FeishuSender` on the generated ``FeishuClient``.

Pairs `channelkit.platforms.feishu.renderer` with ``channelkit.clients.feishu`` and
satisfies `PresentationSender`::

    from channelkit.clients.feishu import FeishuClient
    from channelkit.platforms.feishu.sender import FeishuSender
    from channelkit.presentation.outbound import deliver, register_sender

    register_sender(FeishuSender(FeishuClient(...)))

The target is a Feishu receive id (``chat_id`` by default). Platform errors propagate as
`channelkit.errors.ApiError` subclasses.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from channelkit.platforms.feishu import renderer
from channelkit.presentation.model import MessagePresentation
from channelkit.presentation.outbound import SenderBase, response_message_id

if TYPE_CHECKING:
    from channelkit.clients.feishu import FeishuClient

__all__ = ["MAX_PIN_PAGES", "FeishuSender"]

#: Pages of pins `FeishuSender.pins()` reads at most (50 pins a page).
MAX_PIN_PAGES = 20


class FeishuSender(SenderBase):
    """``im/v1/messages`` (interactive card) + ``im/v1/pins`` (pin, unpin, list)."""

    platform = "feishu"
    presentation_capabilities = renderer.CAPABILITIES
    delivery_capabilities = replace(renderer.DELIVERY_CAPABILITIES, unpin=True, list_pins=True)

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

    def unpin(self, target: str, message_id: str) -> None:
        """Remove the message's pin (``DELETE im/v1/pins/{message_id}``)."""
        self.client.delete_pin(message_id=message_id)

    def pins(self, target: str) -> list[str]:
        """Ids of the chat's pinned messages, newest pin first (``GET im/v1/pins``, every
        page; at most `MAX_PIN_PAGES` pages of 50)."""
        ids: list[str] = []
        token: str | None = None
        for _ in range(MAX_PIN_PAGES):
            options: dict[str, Any] = {"page_size": 50}
            if token:
                options["page_token"] = token
            response = self.client.list_pins(chat_id=target, **options)
            data = response.data
            for item in getattr(data, "items", None) or []:
                message_id = getattr(item, "message_id", None)
                if isinstance(message_id, str) and message_id:
                    ids.append(message_id)
            token = getattr(data, "page_token", None)
            if getattr(data, "has_more", None) is not True or not isinstance(token, str):
                break
        return ids

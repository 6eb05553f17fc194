"""LINE presentation delivery: `LineSender` on the generated ``LineClient``.

Pairs `channelkit.platforms.line.renderer` with ``channelkit.clients.line`` and
satisfies `PresentationSender`::

    from channelkit.clients.line import LineClient
    from channelkit.platforms.line.sender import LineSender
    from channelkit.presentation.outbound import deliver, register_sender

    register_sender(LineSender(LineClient(...)))

The target is a LINE user, group or room id (push). Platform errors propagate as
`channelkit.errors.ApiError` subclasses.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from channelkit.platforms.line import renderer
from channelkit.presentation.model import MessagePresentation
from channelkit.presentation.outbound import SenderBase, response_message_id

if TYPE_CHECKING:
    from channelkit.clients.line import LineClient

__all__ = ["LineSender"]


class LineSender(SenderBase):
    """Push messages (``POST /v2/bot/message/push``) with a fresh ``X-Line-Retry-Key``
    per request, so a retried push is never delivered twice. LINE has no pin."""

    platform = "line"
    presentation_capabilities = renderer.CAPABILITIES
    delivery_capabilities = renderer.DELIVERY_CAPABILITIES

    def __init__(self, client: LineClient, *, notification_disabled: bool = False) -> None:
        self.client = client
        self.notification_disabled = notification_disabled

    def render(
        self,
        presentation: MessagePresentation,
        *,
        text: str | None = None,
        allow_mass_mentions: bool = False,
    ) -> list[dict[str, Any]]:
        """Request bodies of at most five messages each."""
        return renderer.render(presentation, text=text, allow_mass_mentions=allow_mass_mentions)

    def send(self, target: str, message: dict[str, Any]) -> str | None:
        """Push one request; returns the id of its first message."""
        body: dict[str, Any] = {"to": target, **message}
        if self.notification_disabled:
            body["notificationDisabled"] = True
        response = self.client.push_message(body=body, x_line_retry_key=str(uuid.uuid4()))
        sent = response.sent_messages
        if not isinstance(sent, list) or not sent:
            return None
        return response_message_id(sent[0].id, "sentMessages[0].id")

"""Telegram presentation delivery: `TelegramSender` on the generated ``TelegramClient``.

Pairs `channelkit.platforms.telegram.renderer` with ``channelkit.clients.telegram`` and
satisfies `PresentationSender`::

    from channelkit.clients.telegram import TelegramClient
    from channelkit.platforms.telegram.sender import TelegramSender
    from channelkit.presentation.outbound import deliver, register_sender

    register_sender(TelegramSender(TelegramClient(...)))

The target is a Telegram chat id. Platform errors propagate as
`channelkit.errors.ApiError` subclasses.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from channelkit.platforms.telegram import renderer
from channelkit.presentation.model import MessagePresentation
from channelkit.presentation.outbound import SenderBase, response_message_id

if TYPE_CHECKING:
    from channelkit.clients.telegram import TelegramClient

__all__ = ["TelegramSender"]


class TelegramSender(SenderBase):
    """``sendMessage`` + ``pinChatMessage`` (``notify`` maps to not
    ``disable_notification``), ``unpinChatMessage`` and ``getChat`` (whose
    ``pinned_message`` is the chat's most recent pin: `pins()` lists that one).
    ``inline_buttons=False`` sends text only."""

    platform = "telegram"
    delivery_capabilities = replace(renderer.DELIVERY_CAPABILITIES, unpin=True, list_pins=True)

    def __init__(self, client: TelegramClient, *, inline_buttons: bool = True) -> None:
        self.client = client
        self.presentation_capabilities = renderer.capabilities(inline_buttons=inline_buttons)

    @staticmethod
    def _chat(target: str) -> int | str:
        return int(target) if target.lstrip("-").isdigit() else target

    def render(
        self,
        presentation: MessagePresentation,
        *,
        text: str | None = None,
        allow_mass_mentions: bool = False,
    ) -> list[dict[str, Any]]:
        """``sendMessage`` bodies (text + inline keyboard)."""
        return renderer.render(presentation, text=text, allow_mass_mentions=allow_mass_mentions)

    def send(self, target: str, message: dict[str, Any]) -> str | None:
        """Send one message; returns its ``message_id``."""
        response = self.client.send_message(body={"chat_id": self._chat(target), **message})
        result = response.result
        return response_message_id(getattr(result, "message_id", None), "result.message_id")

    def pin(self, target: str, message_id: str, *, notify: bool) -> None:
        """Pin the message; silent unless ``notify``."""
        self.client.pin_chat_message(
            body={
                "chat_id": self._chat(target),
                "message_id": int(message_id),
                "disable_notification": not notify,
            }
        )

    def unpin(self, target: str, message_id: str) -> None:
        """``unpinChatMessage`` for the message."""
        self.client.unpin_chat_message(
            body={"chat_id": self._chat(target), "message_id": int(message_id)}
        )

    def pins(self, target: str) -> list[str]:
        """The chat's most recently pinned message (``getChat``'s ``pinned_message``):
        the Bot API shows no older pins. Empty when nothing is pinned."""
        response = self.client.get_chat(body={"chat_id": self._chat(target)})
        pinned = getattr(response.result, "pinned_message", None)
        message_id = getattr(pinned, "message_id", None)
        if isinstance(message_id, int) and not isinstance(message_id, bool):
            return [str(message_id)]
        return []

"""Presentation senders for the seven platforms, built on the generated HTTP clients.

Each sender pairs a platform renderer (``channelkit.platforms.<name>.renderer``) with the
platform's generated client (``channelkit.clients.<name>``) and satisfies
:class:`~channelkit.presentation.outbound.PresentationSender`::

    from channelkit.clients.slack import SlackClient
    from channelkit.presentation.outbound import register_sender, deliver
    from channelkit.presentation.senders import SlackSender

    register_sender(SlackSender(SlackClient(token="xoxb-...")))
    deliver("slack", "C0123", ReplyPayload(presentation=..., delivery=Delivery(pin=True)))

Targets: Slack channel id, Discord channel id, Mattermost channel id, LINE user/group/room
id (push), Teams conversation id (the client's ``base_url`` is the conversation's
serviceUrl), Telegram chat id, Feishu receive id (``chat_id`` by default).
Platform errors propagate as :class:`channelkit.errors.ApiError` subclasses.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from channelkit.errors import DeserializationError
from channelkit.platforms.discord import renderer as discord_renderer
from channelkit.platforms.feishu import renderer as feishu_renderer
from channelkit.platforms.line import renderer as line_renderer
from channelkit.platforms.mattermost import renderer as mattermost_renderer
from channelkit.platforms.msteams import renderer as msteams_renderer
from channelkit.platforms.slack import renderer as slack_renderer
from channelkit.platforms.telegram import renderer as telegram_renderer
from channelkit.presentation.capabilities import DeliveryCapabilities, PresentationCapabilities
from channelkit.presentation.model import MessagePresentation

if TYPE_CHECKING:
    from channelkit.clients.discord import DiscordClient
    from channelkit.clients.feishu import FeishuClient
    from channelkit.clients.line import LineClient
    from channelkit.clients.mattermost import MattermostClient
    from channelkit.clients.msteams import MsteamsClient
    from channelkit.clients.slack import SlackClient
    from channelkit.clients.telegram import TelegramClient

__all__ = [
    "DiscordSender",
    "FeishuSender",
    "LineSender",
    "MattermostSender",
    "MsteamsSender",
    "SlackSender",
    "TelegramSender",
]


def _id(value: object, path: str) -> str:
    """A message id from a response, or a DeserializationError naming the field."""
    if isinstance(value, str | int) and not isinstance(value, bool) and str(value):
        return str(value)
    raise DeserializationError(path, value, "no message id in the response")


class _Sender:
    platform = ""
    presentation_capabilities: PresentationCapabilities | None = None
    delivery_capabilities = DeliveryCapabilities()

    def render(
        self, presentation: MessagePresentation, *, text: str | None = None
    ) -> list[dict[str, Any]]:
        raise NotImplementedError

    def pin(self, target: str, message_id: str, *, notify: bool) -> None:
        raise NotImplementedError(f"{self.platform} cannot pin delivered messages")


class SlackSender(_Sender):
    """``chat.postMessage`` + ``pins.add`` (``notify`` has no Slack equivalent)."""

    platform = "slack"
    presentation_capabilities = slack_renderer.CAPABILITIES
    delivery_capabilities = slack_renderer.DELIVERY_CAPABILITIES

    def __init__(self, client: SlackClient, *, thread_ts: str | None = None) -> None:
        self.client = client
        self.thread_ts = thread_ts

    def render(
        self, presentation: MessagePresentation, *, text: str | None = None
    ) -> list[dict[str, Any]]:
        """Block Kit message bodies."""
        return slack_renderer.render(presentation, text=text)

    def send(self, target: str, message: dict[str, Any]) -> str | None:
        """Post one message; returns its ``ts``."""
        body = {"channel": target, **message}
        if self.thread_ts is not None:
            body["thread_ts"] = self.thread_ts
        response = self.client.chat_post_message(body=body)
        return _id(response.ts, "ts")

    def pin(self, target: str, message_id: str, *, notify: bool) -> None:
        """``pins.add`` for the message ``ts``."""
        self.client.pins_add(body={"channel": target, "timestamp": message_id})


class DiscordSender(_Sender):
    """``POST /channels/{id}/messages`` + pin (Discord always posts a pin notice)."""

    platform = "discord"
    presentation_capabilities = discord_renderer.CAPABILITIES
    delivery_capabilities = discord_renderer.DELIVERY_CAPABILITIES

    def __init__(self, client: DiscordClient) -> None:
        self.client = client

    def render(
        self, presentation: MessagePresentation, *, text: str | None = None
    ) -> list[dict[str, Any]]:
        """Components v2 message bodies."""
        return discord_renderer.render(presentation, text=text)

    def send(self, target: str, message: dict[str, Any]) -> str | None:
        """Create one message; returns its id."""
        return _id(self.client.create_message(channel_id=target, body=message).id, "id")

    def pin(self, target: str, message_id: str, *, notify: bool) -> None:
        """Pin the message in its channel."""
        self.client.pin_message(channel_id=target, message_id=message_id)


class MattermostSender(_Sender):
    """``POST /api/v4/posts`` + ``POST /api/v4/posts/{id}/pin``.

    ``callback_url`` is the integration URL Mattermost calls when a button is clicked.
    """

    platform = "mattermost"
    presentation_capabilities = mattermost_renderer.CAPABILITIES
    delivery_capabilities = mattermost_renderer.DELIVERY_CAPABILITIES

    def __init__(
        self, client: MattermostClient, *, callback_url: str, root_id: str | None = None
    ) -> None:
        self.client = client
        self.callback_url = callback_url
        self.root_id = root_id

    def render(
        self, presentation: MessagePresentation, *, text: str | None = None
    ) -> list[dict[str, Any]]:
        """Post bodies with interactive message actions."""
        return mattermost_renderer.render(presentation, text=text, callback_url=self.callback_url)

    def send(self, target: str, message: dict[str, Any]) -> str | None:
        """Create one post; returns its id."""
        body = {"channel_id": target, **message}
        if self.root_id is not None:
            body["root_id"] = self.root_id
        return _id(self.client.create_post(body=body).id, "id")

    def pin(self, target: str, message_id: str, *, notify: bool) -> None:
        """Pin the post."""
        self.client.pin_post(post_id=message_id)


class LineSender(_Sender):
    """Push messages (``POST /v2/bot/message/push``) with a fresh ``X-Line-Retry-Key``
    per request, so a retried push is never delivered twice. LINE has no pin."""

    platform = "line"
    presentation_capabilities = line_renderer.CAPABILITIES
    delivery_capabilities = line_renderer.DELIVERY_CAPABILITIES

    def __init__(self, client: LineClient, *, notification_disabled: bool = False) -> None:
        self.client = client
        self.notification_disabled = notification_disabled

    def render(
        self, presentation: MessagePresentation, *, text: str | None = None
    ) -> list[dict[str, Any]]:
        """Request bodies of at most five messages each."""
        return line_renderer.render(presentation, text=text)

    def send(self, target: str, message: dict[str, Any]) -> str | None:
        """Push one request; returns the id of its first message."""
        body: dict[str, Any] = {"to": target, **message}
        if self.notification_disabled:
            body["notificationDisabled"] = True
        response = self.client.push_message(body=body, x_line_retry_key=str(uuid.uuid4()))
        sent = response.sent_messages
        if not isinstance(sent, list) or not sent:
            return None
        return _id(sent[0].id, "sentMessages[0].id")


class MsteamsSender(_Sender):
    """Bot Connector ``send_to_conversation``. Teams has no bot pin API here."""

    platform = "msteams"
    presentation_capabilities = msteams_renderer.CAPABILITIES
    delivery_capabilities = msteams_renderer.DELIVERY_CAPABILITIES

    def __init__(self, client: MsteamsClient) -> None:
        self.client = client

    def render(
        self, presentation: MessagePresentation, *, text: str | None = None
    ) -> list[dict[str, Any]]:
        """Activities carrying an Adaptive Card."""
        return msteams_renderer.render(presentation, text=text)

    def send(self, target: str, message: dict[str, Any]) -> str | None:
        """Send one activity; returns its id."""
        response = self.client.send_to_conversation(conversation_id=target, body=message)
        return _id(response.id, "id")


class TelegramSender(_Sender):
    """``sendMessage`` + ``pinChatMessage`` (``notify`` maps to not
    ``disable_notification``). ``inline_buttons=False`` sends text only."""

    platform = "telegram"
    delivery_capabilities = telegram_renderer.DELIVERY_CAPABILITIES

    def __init__(self, client: TelegramClient, *, inline_buttons: bool = True) -> None:
        self.client = client
        self.presentation_capabilities = telegram_renderer.capabilities(
            inline_buttons=inline_buttons
        )

    @staticmethod
    def _chat(target: str) -> int | str:
        return int(target) if target.lstrip("-").isdigit() else target

    def render(
        self, presentation: MessagePresentation, *, text: str | None = None
    ) -> list[dict[str, Any]]:
        """``sendMessage`` bodies (text + inline keyboard)."""
        return telegram_renderer.render(presentation, text=text)

    def send(self, target: str, message: dict[str, Any]) -> str | None:
        """Send one message; returns its ``message_id``."""
        response = self.client.send_message(body={"chat_id": self._chat(target), **message})
        result = response.result
        return _id(getattr(result, "message_id", None), "result.message_id")

    def pin(self, target: str, message_id: str, *, notify: bool) -> None:
        """Pin the message; silent unless ``notify``."""
        self.client.pin_chat_message(
            body={
                "chat_id": self._chat(target),
                "message_id": int(message_id),
                "disable_notification": not notify,
            }
        )


class FeishuSender(_Sender):
    """``im/v1/messages`` (interactive card) + ``im/v1/pins``."""

    platform = "feishu"
    presentation_capabilities = feishu_renderer.CAPABILITIES
    delivery_capabilities = feishu_renderer.DELIVERY_CAPABILITIES

    def __init__(self, client: FeishuClient, *, receive_id_type: str = "chat_id") -> None:
        self.client = client
        self.receive_id_type = receive_id_type

    def render(
        self, presentation: MessagePresentation, *, text: str | None = None
    ) -> list[dict[str, Any]]:
        """Interactive-card message bodies."""
        return feishu_renderer.render(presentation, text=text)

    def send(self, target: str, message: dict[str, Any]) -> str | None:
        """Send one card; returns its ``message_id``."""
        response = self.client.create_message(
            receive_id_type=self.receive_id_type, body={"receive_id": target, **message}
        )
        return _id(getattr(response.data, "message_id", None), "data.message_id")

    def pin(self, target: str, message_id: str, *, notify: bool) -> None:
        """Pin the message in its chat (Feishu has no notify switch)."""
        self.client.create_pin(body={"message_id": message_id})

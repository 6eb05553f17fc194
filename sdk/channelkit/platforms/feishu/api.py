"""Every Feishu OpenAPI call the adapter makes, in one small class.

`FeishuApi` wraps the generated `channelkit.clients.feishu.FeishuClient`
(tenant token from `channelkit.http.auth.FeishuTokenProvider`, retries, error
mapping) and exposes only what the adapter needs, with plain arguments and results.
Every call has an overall deadline (``(connect, total)``, 10 s in all by default).
CardKit calls carry ``uuid = "<card_id>-<sequence>"`` so a transport-level retry of the
same write is de-duplicated by Feishu instead of failing the strictly increasing sequence. Message
sends take an optional ``uuid`` (Feishu keeps one message per ``uuid`` for an hour), which
the final-answer delivery chain sets so a retry after an unknown outcome cannot show the
answer twice.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from channelkit.clients.feishu import (
    CardContent,
    CreateCardRequest,
    CreateMessageRequest,
    CreateReactionRequest,
    Emoji,
    FeishuClient,
    MessageResponse,
    PatchMessageRequest,
    ReplyMessageRequest,
    UpdateCardElementContentRequest,
    UpdateCardRequest,
    UpdateCardSettingsRequest,
)
from channelkit.errors import DeserializationError
from channelkit.http.auth import FeishuTokenProvider
from channelkit.http.model import UNSET
from channelkit.http.retry import RetryPolicy
from channelkit.http.transport import Transport, platform_timeout
from channelkit.platforms.common.credentials import check_timeout, probe

if TYPE_CHECKING:
    from channelkit.platforms.feishu.config import FeishuConfig

__all__ = ["API_TIMEOUT", "FeishuApi", "check_credentials"]

logger = logging.getLogger(__name__)

#: ``(connect, total)`` seconds for every call: 10 s overall.
API_TIMEOUT = (3.05, 10.0)


def _dumps(card: Mapping[str, Any]) -> str:
    return json.dumps(card, ensure_ascii=False, separators=(",", ":"))


class FeishuApi:
    """The adapter's Feishu calls. ``client`` is a generated ``FeishuClient``."""

    def __init__(self, client: FeishuClient, *, timeout: tuple[float, float] = API_TIMEOUT) -> None:
        self._client = client
        self._timeout = timeout

    @classmethod
    def create(
        cls,
        app_id: str,
        app_secret: str,
        *,
        base_url: str | None = None,
        retry: RetryPolicy | None = None,
        max_workers: int = 8,
        timeout: float | None = None,
    ) -> FeishuApi:
        """Build the generated client with app credentials (tenant token provider).

        ``timeout`` (``requestTimeout``, seconds) is the overall deadline of every call,
        the tenant token fetch included; 10 s by default."""
        deadline = API_TIMEOUT if timeout is None else platform_timeout(timeout)
        client = FeishuClient(
            app_id=app_id,
            app_secret=app_secret,
            base_url=base_url or None,
            timeout=deadline,
            retry=retry,
            max_workers=max_workers,
        )
        return cls(client, timeout=deadline)

    @property
    def client(self) -> FeishuClient:
        """The underlying generated client."""
        return self._client

    def close(self) -> None:
        """Close the client's HTTP session."""
        self._client.close()

    # -- messages ----------------------------------------------------------------------
    def _send(
        self, chat_id: str, msg_type: str, content: str, reply_to: str | None, uuid: str | None
    ) -> str:
        result: MessageResponse
        if reply_to:
            # a reply to a message of a thread goes into that thread (Feishu's
            # ``reply_in_thread``); ``reply_to`` is only given for threaded conversations
            reply = ReplyMessageRequest(msg_type=msg_type, content=content, reply_in_thread=True)
            if uuid:
                reply.uuid = uuid
            result = self._client.reply_message(
                message_id=reply_to, body=reply, timeout=self._timeout
            )
        else:
            create = CreateMessageRequest(receive_id=chat_id, msg_type=msg_type, content=content)
            if uuid:
                create.uuid = uuid
            result = self._client.create_message(
                receive_id_type="chat_id", body=create, timeout=self._timeout
            )
        message_id = None if result.data is UNSET else result.data.message_id
        if not isinstance(message_id, str) or not message_id:
            raise DeserializationError("data.message_id", message_id, "missing message id")
        return message_id

    def send_card(
        self,
        chat_id: str,
        card: Mapping[str, Any],
        *,
        reply_to: str | None = None,
        uuid: str | None = None,
    ) -> str:
        """Send a raw card JSON as an interactive message; returns the message id.
        ``uuid``: Feishu's de-duplication key (the same on every retry of one send);
        ``reply_to``: a message of a thread, the card goes into that thread."""
        return self._send(chat_id, "interactive", _dumps(card), reply_to, uuid)

    def send_card_entity(self, chat_id: str, card_id: str, *, reply_to: str | None = None) -> str:
        """Send a CardKit card entity; returns the message id."""
        content = _dumps({"type": "card", "data": {"card_id": card_id}})
        return self._send(chat_id, "interactive", content, reply_to, None)

    def send_text(
        self, chat_id: str, text: str, *, reply_to: str | None = None, uuid: str | None = None
    ) -> str:
        """Send a plain text message; returns the message id (``uuid`` and ``reply_to``
        as for `send_card()`)."""
        return self._send(chat_id, "text", _dumps({"text": text}), reply_to, uuid)

    def send_content(
        self, chat_id: str, msg_type: str, content: str, *, reply_to: str | None = None
    ) -> str:
        """Send a message of ``msg_type`` with its ``content`` JSON text (an ``image``
        ``{"image_key"}`` or a ``file`` ``{"file_key"}``); returns the message id
        (``reply_to`` as for `send_card()`)."""
        return self._send(chat_id, msg_type, content, reply_to, None)

    def patch_card(self, message_id: str, card: Mapping[str, Any]) -> None:
        """Replace an interactive message's card (``update_multi`` cards only)."""
        self._client.patch_message(
            message_id=message_id,
            body=PatchMessageRequest(content=_dumps(card)),
            timeout=self._timeout,
        )

    # -- CardKit -----------------------------------------------------------------------
    def create_card_entity(self, card: Mapping[str, Any]) -> str:
        """Create a CardKit card entity from card JSON; returns the card id."""
        result = self._client.create_card(
            body=CreateCardRequest(type="card_json", data=_dumps(card)), timeout=self._timeout
        )
        card_id = None if result.data is UNSET else result.data.card_id
        if not isinstance(card_id, str) or not card_id:
            raise DeserializationError("data.card_id", card_id, "missing card id")
        return card_id

    def stream_text(self, card_id: str, element_id: str, content: str, sequence: int) -> None:
        """Stream the full text so far into a markdown element (strictly increasing seq)."""
        self._client.update_card_element_content(
            card_id=card_id,
            element_id=element_id,
            body=UpdateCardElementContentRequest(
                content=content, sequence=sequence, uuid=f"{card_id}-{sequence}"
            ),
            timeout=self._timeout,
        )

    def close_streaming(self, card_id: str, sequence: int) -> None:
        """Turn ``streaming_mode`` off."""
        settings = _dumps({"config": {"streaming_mode": False}})
        self._client.update_card_settings(
            card_id=card_id,
            body=UpdateCardSettingsRequest(
                settings=settings, sequence=sequence, uuid=f"{card_id}-{sequence}"
            ),
            timeout=self._timeout,
        )

    def update_card_entity(self, card_id: str, card: Mapping[str, Any], sequence: int) -> None:
        """Replace a card entity's whole JSON."""
        self._client.update_card(
            card_id=card_id,
            body=UpdateCardRequest(
                card=CardContent(type="card_json", data=_dumps(card)),
                sequence=sequence,
                uuid=f"{card_id}-{sequence}",
            ),
            timeout=self._timeout,
        )

    # -- reactions ---------------------------------------------------------------------
    def add_reaction(self, message_id: str, emoji_type: str) -> str | None:
        """Add a reaction to a message; returns the reaction id."""
        result = self._client.create_message_reaction(
            message_id=message_id,
            body=CreateReactionRequest(reaction_type=Emoji(emoji_type=emoji_type)),
            timeout=self._timeout,
        )
        reaction_id = None if result.data is UNSET else result.data.reaction_id
        return reaction_id if isinstance(reaction_id, str) else None

    def delete_reaction(self, message_id: str, reaction_id: str) -> None:
        """Remove a reaction the bot added."""
        self._client.delete_message_reaction(
            message_id=message_id, reaction_id=reaction_id, timeout=self._timeout
        )


# -- the start-up check -----------------------------------------------------------------
def check_credentials(config: FeishuConfig, *, timeout: float) -> None:
    """Exchange `appId` and `appSecret` for a tenant access token (the token provider's
    own request, one attempt bounded by `timeout` seconds; the token is dropped).

    A refusal raises `channelkit.errors.CredentialCheckFailed` naming
    `appId/appSecret` (Feishu's answer, e.g. "code 10014: app secret invalid", says
    which). The verification token and encrypt key only check callbacks Feishu sends,
    so they cannot be asked about.
    """
    transport = Transport()
    provider = FeishuTokenProvider(
        config.app_id,
        config.app_secret,
        base_url=config.base_url,
        transport=transport,
        timeout=check_timeout(timeout),
    )
    try:
        probe(provider.fetch, field="appId/appSecret", platform="Feishu")
    finally:
        transport.close()

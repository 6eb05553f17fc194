"""The Bot API calls the Telegram adapter makes, in one small wrapper.

Everything else in the adapter depends only on `TelegramApi`, which is built on
the generated `TelegramClient` (explicit timeouts,
retry of idempotent methods, ``ok: false`` bodies mapped to the
`channelkit.errors` hierarchy). Tests mock HTTP with requests-mock. The bot token
is part of the URL path and is never logged.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from channelkit.clients.telegram import (
    AnswerCallbackQueryRequest,
    BotCommand,
    DeleteWebhookRequest,
    EditMessageTextRequest,
    GetFileRequest,
    GetUpdatesRequest,
    InlineKeyboardMarkup,
    SendChatActionRequest,
    SendMessageDraftRequest,
    SendMessageRequest,
    SetMyCommandsRequest,
    TelegramClient,
)
from channelkit.errors import ApiError, BadRequest, DeserializationError
from channelkit.http import RetryPolicy
from channelkit.http.model import UNSET
from channelkit.http.transport import DEFAULT_POOL_SIZE
from channelkit.platforms.common.credentials import probe

if TYPE_CHECKING:
    from channelkit.platforms.telegram.config import TelegramConfig

__all__ = ["TelegramApi", "check_credentials"]

logger = logging.getLogger(__name__)

_CONNECT_TIMEOUT_S = 3.05


class TelegramApi:
    """``sendMessage``, ``sendMessageDraft``, ``editMessageText``, ``sendChatAction``,
    ``answerCallbackQuery``, ``setMyCommands``, ``getMe``, ``getFile`` (with
    `file_url()`, where a received file is downloaded), and for long polling
    ``deleteWebhook`` and ``getUpdates``.

    ``base_url`` is the Bot API root (``https://api.telegram.org``); ``client`` may be
    given instead (shared between adapters); ``retry`` overrides the client's policy.
    The client made here keeps ``pool_size`` connections to the host (the adapter passes
    `ChannelConfig.api_pool_size`, one for each thread that may call at once).
    """

    def __init__(
        self,
        token: str,
        *,
        base_url: str = "https://api.telegram.org",
        timeout_s: float = 10.0,
        retry: RetryPolicy | None = None,
        client: TelegramClient | None = None,
        pool_size: int = DEFAULT_POOL_SIZE,
    ) -> None:
        self._timeout = (_CONNECT_TIMEOUT_S, timeout_s)
        self._base_url = base_url.rstrip("/")
        self._token = token
        self._client = client or TelegramClient(
            token=token,
            base_url=self._base_url,
            timeout=self._timeout,
            retry=retry,
            max_workers=pool_size,
        )

    def __repr__(self) -> str:
        return f"TelegramApi(base_url={self._base_url!r})"

    @property
    def client(self) -> TelegramClient:
        """The generated client underneath."""
        return self._client

    # -- public calls --------------------------------------------------------------------
    def send_message(
        self,
        chat_id: int | str,
        text: str,
        *,
        reply_markup: dict[str, Any] | None = None,
        message_thread_id: int | None = None,
        parse_mode: str | None = None,
    ) -> int:
        """``sendMessage`` (plain text unless ``parse_mode`` is given); returns the new
        message's ``message_id``."""
        body = SendMessageRequest(chat_id=chat_id, text=text)
        if parse_mode is not None:
            body.parse_mode = parse_mode
        if reply_markup is not None:
            body.reply_markup = InlineKeyboardMarkup.from_dict(reply_markup)
        if message_thread_id is not None:
            body.message_thread_id = message_thread_id
        response = self._client.send_message(body=body, timeout=self._timeout)
        message_id = None if response.result is UNSET else response.result.message_id
        if isinstance(message_id, bool) or not isinstance(message_id, int):
            raise ApiError("telegram sendMessage: no message_id in the result", status=200)
        return message_id

    def edit_message_text(
        self,
        chat_id: int | str,
        message_id: int,
        text: str,
        *,
        reply_markup: dict[str, Any] | None = None,
        parse_mode: str | None = None,
    ) -> None:
        """``editMessageText``; without ``reply_markup`` the inline keyboard is removed.

        "message is not modified" is treated as success.
        """
        body = EditMessageTextRequest(chat_id=chat_id, message_id=message_id, text=text)
        if parse_mode is not None:
            body.parse_mode = parse_mode
        if reply_markup is not None:
            body.reply_markup = InlineKeyboardMarkup.from_dict(reply_markup)
        try:
            self._client.edit_message_text(body=body, timeout=self._timeout)
        except BadRequest as exc:
            if "message is not modified" in str(exc):
                return
            raise

    def send_message_draft(
        self,
        chat_id: int | str,
        draft_id: int,
        text: str,
        *,
        message_thread_id: int | None = None,
        parse_mode: str | None = None,
    ) -> None:
        """``sendMessageDraft``: show (or replace) the draft ``draft_id`` (non-zero) of a
        private chat; an empty ``text`` shows Telegram's thinking placeholder. The draft is
        an ephemeral preview: the finished text must still be sent with ``sendMessage``."""
        body = SendMessageDraftRequest(chat_id=chat_id, draft_id=draft_id, text=text)
        if message_thread_id is not None:
            body.message_thread_id = message_thread_id
        if parse_mode is not None:
            body.parse_mode = parse_mode
        self._client.send_message_draft(body=body, timeout=self._timeout)

    def send_chat_action(
        self, chat_id: int | str, action: str = "typing", *, message_thread_id: int | None = None
    ) -> None:
        """``sendChatAction`` (``typing`` by default)."""
        body = SendChatActionRequest(chat_id=chat_id, action=action)
        if message_thread_id is not None:
            body.message_thread_id = message_thread_id
        self._client.send_chat_action(body=body, timeout=self._timeout)

    def set_my_commands(
        self,
        commands: Sequence[tuple[str, str]],
        *,
        scope: Mapping[str, Any] | None = None,
        language_code: str | None = None,
    ) -> None:
        """``setMyCommands``: replace the bot's command menu.

        ``commands`` are ``(command, description)`` pairs (command without the slash);
        ``scope`` is a ``BotCommandScope`` object (default: all users), ``language_code``
        a two-letter ISO 639-1 code.
        """
        body = SetMyCommandsRequest(
            commands=[BotCommand(command=c, description=d) for c, d in commands]
        )
        if scope is not None:
            body.scope = dict(scope)
        if language_code:
            body.language_code = language_code
        self._client.set_my_commands(body=body, timeout=self._timeout)

    def get_me_username(self) -> str:
        """``getMe``: the bot's own username (raises ``DeserializationError`` without one)."""
        me = self._client.get_me(timeout=self._timeout).result
        username = None if me is UNSET else me.username
        if not isinstance(username, str) or not username:
            raise DeserializationError("result.username", username, "getMe returned no username")
        return username

    def answer_callback_query(self, callback_query_id: str, text: str | None = None) -> None:
        """``answerCallbackQuery`` (a short toast when ``text`` is given)."""
        body = AnswerCallbackQueryRequest(callback_query_id=callback_query_id)
        if text:
            body.text = text
        self._client.answer_callback_query(body=body, timeout=self._timeout)

    def get_file(self, file_id: str) -> tuple[str, int | None]:
        """``getFile``: the ``file_path`` of a received file on the file host and its
        size when told (raises ``DeserializationError`` without a path: the file
        cannot be downloaded, e.g. over the Bot API's 20 MB)."""
        result = self._client.get_file(
            body=GetFileRequest(file_id=file_id), timeout=self._timeout
        ).result
        path = None if result is UNSET else result.file_path
        if not isinstance(path, str) or not path or path.startswith("/") or ".." in path:
            raise DeserializationError("result.file_path", path, "getFile returned no file path")
        size = None if result is UNSET else result.file_size
        return path, size if isinstance(size, int) and size >= 0 else None

    def file_url(self, file_path: str) -> str:
        """Where the file ``file_path`` (from `get_file()`) is downloaded: the Bot API
        host's ``/file/bot<token>/<file_path>`` (secret: it carries the token)."""
        return f"{self._base_url}/file/bot{self._token}/{file_path}"

    @property
    def file_host(self) -> str:
        """The host received files are downloaded from (the Bot API's own)."""
        return urlsplit(self._base_url).hostname or ""

    def delete_webhook(self) -> None:
        """``deleteWebhook`` (pending updates are kept): ``getUpdates`` answers 409 Conflict
        while a webhook is set."""
        self._client.delete_webhook(body=DeleteWebhookRequest(), timeout=self._timeout)

    def get_updates(
        self,
        offset: int | None,
        timeout_s: int,
        allowed_updates: Sequence[str],
    ) -> list[dict[str, Any]]:
        """``getUpdates``: the updates from ``offset`` on (every lower id is confirmed),
        waiting up to ``timeout_s`` seconds for the first; the HTTP read timeout is that
        plus the usual read timeout. Each update is the plain JSON object (parsed by
        `parse_update()`, one at a time)."""
        body = GetUpdatesRequest(timeout_=timeout_s, allowed_updates=list(allowed_updates))
        if offset is not None:
            body.offset = offset
        timeout = (self._timeout[0], self._timeout[1] + timeout_s)
        response = self._client.get_updates(body=body, timeout=timeout)
        return [] if response.result is UNSET else list(response.result)


# -- the start-up check -----------------------------------------------------------------
def check_credentials(config: TelegramConfig, *, timeout: float) -> None:
    """Ask Telegram who the bot is (`getMe`, one attempt bounded by `timeout` seconds).

    A token Telegram refuses raises `channelkit.errors.CredentialCheckFailed` naming
    `botToken` ("was refused by Telegram (HTTP 401: Unauthorized)"). The webhook
    secret is the bot's own choice, so there is nothing to ask about it.
    """
    api = TelegramApi(
        config.bot_token,
        base_url=config.api_base_url,
        timeout_s=timeout,
        retry=RetryPolicy.never(),
    )
    try:
        probe(api.get_me_username, field="botToken", platform="Telegram")
    finally:
        api.client.close()

"""The iLink bot calls the Weixin adapter makes, in one small wrapper.

Endpoints (unofficial protocol, as used by qwen-code): ``POST /ilink/bot/getupdates``
(long polling for new messages), ``POST /ilink/bot/getconfig``
(typing ticket), ``POST /ilink/bot/sendtyping`` (status 1 typing / 2 cancel) and
``POST /ilink/bot/sendmessage`` (text, or an image / file item naming media on the
CDN), ``POST /ilink/bot/getuploadurl`` (a CDN upload slot, `channelkit.platforms.weixin.files`).
`WeixinApi` is built on the generated
`WeixinClient`, which sends the fixed iLink headers
(``AuthorizationType: ilink_bot_token``, ``iLink-App-Id: bot``,
``iLink-App-ClientVersion``, ``Authorization: Bearer <token>``) and maps ``ret != 0``
to the `channelkit.errors` hierarchy; this wrapper adds a fresh ``X-WECHAT-UIN``
(base64 of 4 random bytes) per request and ``base_info.channel_version`` to every body.
The token is never logged.
"""

from __future__ import annotations

import base64
import logging
import os
import uuid

from channelkit.clients.weixin import (
    BaseInfo,
    GetConfigRequest,
    GetUpdatesRequest,
    GetUpdatesResponse,
    GetUploadUrlRequest,
    GetUploadUrlResponse,
    MessageItem,
    SendMessageRequest,
    SendTypingRequest,
    TextItem,
    WeixinClient,
    WeixinMessage,
)
from channelkit.errors import ApiError
from channelkit.http import RetryPolicy
from channelkit.http.transport import DEFAULT_POOL_SIZE

__all__ = ["TYPING_CANCEL", "TYPING_ON", "WeixinApi"]

logger = logging.getLogger(__name__)

#: ``sendtyping`` status values.
TYPING_ON = 1
TYPING_CANCEL = 2

_CONNECT_TIMEOUT_S = 3.05


def _uin() -> str:
    return base64.b64encode(os.urandom(4)).decode("ascii")


class WeixinApi:
    """``getupdates``, ``getconfig``, ``sendtyping`` and ``sendmessage`` on the iLink bot API.

    The client made here (unless ``client`` is given) keeps ``pool_size`` connections to
    the host: the adapter passes `ChannelConfig.api_pool_size`, one for each thread that
    may call at once."""

    def __init__(
        self,
        token: str,
        *,
        base_url: str = "https://ilinkai.weixin.qq.com",
        channel_version: str = "2.1.3",
        timeout_s: float = 10.0,
        retry: RetryPolicy | None = None,
        client: WeixinClient | None = None,
        pool_size: int = DEFAULT_POOL_SIZE,
    ) -> None:
        self._base_url = base_url.rstrip("/")
        self._channel_version = channel_version
        self._timeout = (_CONNECT_TIMEOUT_S, timeout_s)
        self._client = client or WeixinClient(
            token=token,
            base_url=self._base_url,
            timeout=self._timeout,
            retry=retry,
            max_workers=pool_size,
        )

    def __repr__(self) -> str:
        return f"WeixinApi(base_url={self._base_url!r})"

    @property
    def client(self) -> WeixinClient:
        """The generated client underneath."""
        return self._client

    def _base_info(self) -> BaseInfo:
        return BaseInfo(channel_version=self._channel_version)

    def get_typing_ticket(self, user_id: str, context_token: str | None = None) -> str:
        """``getconfig`` for ``user_id``; returns its ``typing_ticket``."""
        body = GetConfigRequest(ilink_user_id=user_id, base_info=self._base_info())
        if context_token:
            body.context_token = context_token
        response = self._client.get_config(body=body, x_wechat_uin=_uin(), timeout=self._timeout)
        ticket = response.typing_ticket
        if not isinstance(ticket, str) or not ticket:
            raise ApiError("weixin getconfig: no typing_ticket in the response", status=200)
        return ticket

    def send_typing(self, user_id: str, ticket: str, status: int) -> None:
        """``sendtyping`` with ``status`` 1 (typing) or 2 (cancel)."""
        body = SendTypingRequest(
            ilink_user_id=user_id,
            typing_ticket=ticket,
            status=status,
            base_info=self._base_info(),
        )
        self._client.send_typing(body=body, x_wechat_uin=_uin(), timeout=self._timeout)

    def send_text(self, to_user_id: str, text: str, context_token: str | None = None) -> None:
        """``sendmessage`` with one text item (a finished bot message)."""
        self.send_items(
            to_user_id, [MessageItem(type=1, text_item=TextItem(text=text))], context_token
        )

    def send_items(
        self, to_user_id: str, items: list[MessageItem], context_token: str | None = None
    ) -> str:
        """``sendmessage`` with ``items`` (a finished bot message); its ``client_id``
        (iLink answers no message id: the client's own id names the message)."""
        client_id = str(uuid.uuid4())
        msg = WeixinMessage(
            to_user_id=to_user_id,
            from_user_id="",
            client_id=client_id,
            message_type=2,
            message_state=2,
            item_list=items,
        )
        if context_token:
            msg.context_token = context_token
        self._client.send_message(
            body=SendMessageRequest(msg=msg, base_info=self._base_info()),
            x_wechat_uin=_uin(),
            timeout=self._timeout,
        )
        return client_id

    def get_upload_url(
        self,
        *,
        filekey: str,
        media_type: int,
        to_user_id: str,
        rawsize: int,
        rawfilemd5: str,
        filesize: int,
        aeskey: str,
        no_need_thumb: bool = True,
    ) -> GetUploadUrlResponse:
        """``getuploadurl`` for one file: its CDN upload slot
        (`channelkit.platforms.weixin.files`)."""
        body = GetUploadUrlRequest(
            filekey=filekey,
            media_type=media_type,
            to_user_id=to_user_id,
            rawsize=rawsize,
            rawfilemd5=rawfilemd5,
            filesize=filesize,
            no_need_thumb=no_need_thumb,
            aeskey=aeskey,
            base_info=self._base_info(),
        )
        return self._client.get_upload_url(body=body, x_wechat_uin=_uin(), timeout=self._timeout)

    def get_updates(self, cursor: str, timeout_s: float) -> GetUpdatesResponse:
        """``getupdates`` from ``cursor`` (``get_updates_buf``; empty at first), waiting up
        to ``timeout_s`` seconds for the answer (a `ReadTimeout` then)."""
        body = GetUpdatesRequest(get_updates_buf=cursor, base_info=self._base_info())
        return self._client.get_updates(
            body=body, x_wechat_uin=_uin(), timeout=(self._timeout[0], timeout_s)
        )

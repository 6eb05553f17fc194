"""The only module of the DingTalk adapter that talks HTTP.

`CardApi` wraps the DingTalk OpenAPI calls the adapter makes - Card OpenAPI
(``createAndDeliver``, ``/card/streaming``, ``/card/instances``), robot group / one-to-one
sends, the eye reaction (``emotion/reply``, ``emotion/recall``) and session-webhook
Markdown replies - so the rest of the adapter and its tests depend on this small surface.

Every call has an overall deadline (``requestTimeout``, 10 s: connect, send and the
whole answer), token fetches included (`CardApi.create()`), is attempted once (the
presenter decides what a failure means; there is no background retry queue) and raises
`ChannelKitError` subclasses: ``TransportError`` for timeouts and
connection failures, ``ApiError`` subclasses (``RateLimited``, ``ServerError``,
``AuthError``, ``BadRequest``...) for platform errors. A ``createAndDeliver`` answered 200
with a failed per-space delivery raises `CardDeliveryError` naming the template.

All ``cardParamMap`` values are sent as strings: strings as-is, everything else as compact
JSON (``2`` -> ``"2"``, ``True`` -> ``"true"``, lists/objects -> JSON text).
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from channelkit.clients.dingtalk import (
    BatchSendOtoRequest,
    CardData,
    CardUpdateOptions,
    CreateAndDeliverCardRequest,
    DingtalkClient,
    ImGroupOpenDeliverModel,
    ImOpenSpaceModel,
    ImRobotOpenDeliverModel,
    OpenStreamConnectionRequest,
    OrgGroupSendRequest,
    RobotEmotionRequest,
    RobotMessageFileDownloadRequest,
    StreamingUpdateCardRequest,
    StreamSubscription,
    TextEmotion,
    UpdateCardRequest,
)
from channelkit.errors import (
    ApiError,
    AuthError,
    BadRequest,
    CardDeliveryError,
    ChannelKitError,
    ConfigurationError,
    DeserializationError,
)
from channelkit.http.auth import DingTalkTokenProvider, TokenProvider
from channelkit.http.errormap import ErrorSpec, map_error
from channelkit.http.model import UNSET
from channelkit.http.retry import RetryPolicy
from channelkit.http.transport import DEFAULT_POOL_SIZE, Transport, platform_timeout
from channelkit.platforms.common.credentials import check_timeout, probe

if TYPE_CHECKING:
    from channelkit.platforms.dingtalk.config import DingtalkConfig

__all__ = [
    "EYE_EMOTION",
    "QUESTION_CARD_TEMPLATE_ID",
    "STATUS_CARD_TEMPLATE_ID",
    "TEMPLATE_REJECTION_CODES",
    "CardApi",
    "CardDeliveryError",
    "CardTarget",
    "check_credentials",
    "is_chat_rejection",
    "is_template_rejection",
    "log_card_error",
    "stringify_param_map",
]

logger = logging.getLogger(__name__)

#: Built-in status card template (one card per visible output segment).
STATUS_CARD_TEMPLATE_ID = "675cde2f-f526-40cb-b828-f5b2b57b8b77.schema"
#: Built-in question (form) card template.
QUESTION_CARD_TEMPLATE_ID = "c2a6355b-9724-4f7e-9653-d33fcb3311bb.schema"

#: The eye reaction added while a run works when status cards are off.
EYE_EMOTION: Mapping[str, Any] = {
    "emotionType": 2,
    "emotionName": "👀",
    "textEmotion": {
        "emotionId": "2659900",
        "emotionName": "👀",
        "text": "👀",
        "backgroundId": "im_bg_1",
    },
}

_ERRORS = ErrorSpec(code_field="code", message_field="message", request_id_field="requestid")


@dataclass(frozen=True)
class CardTarget:
    """Where a card is delivered: a group (open conversation id) or a user (staff id)."""

    chat_id: str
    is_group: bool

    @property
    def open_space_id(self) -> str:
        """The ``openSpaceId`` for this target."""
        space = "IM_GROUP" if self.is_group else "IM_ROBOT"
        return f"dtv1.card//{space}.{self.chat_id}"


def _stringify(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def stringify_param_map(params: Mapping[str, Any]) -> dict[str, str]:
    """Every value of a ``cardParamMap`` as DingTalk wants it: a string."""
    return {str(key): _stringify(value) for key, value in params.items()}


def _eye_emotion_request(
    robot_code: str, open_msg_id: str, open_conversation_id: str
) -> RobotEmotionRequest:
    text = EYE_EMOTION["textEmotion"]
    return RobotEmotionRequest(
        robot_code=robot_code,
        open_msg_id=open_msg_id,
        open_conversation_id=open_conversation_id,
        emotion_type=EYE_EMOTION["emotionType"],
        emotion_name=EYE_EMOTION["emotionName"],
        text_emotion=TextEmotion(
            emotion_id=text["emotionId"],
            emotion_name=text["emotionName"],
            text=text["text"],
            background_id=text["backgroundId"],
        ),
    )


def _markdown_param(title: str, text: str) -> str:
    return json.dumps({"title": title, "text": text}, ensure_ascii=False)


class _CallableTokens:
    """Adapts a plain ``() -> token`` callable to the TokenProvider protocol."""

    refreshable = False

    def __init__(self, fn: Callable[[], str]) -> None:
        self._fn = fn

    def get_token(self) -> str:
        return self._fn()

    def invalidate(self, token: str | None = None) -> None:
        return None


class CardApi:
    """DingTalk OpenAPI calls used by the adapter (see the module docstring).

    ``robot_code`` is the app's client id. Calls go through the generated
    `DingtalkClient` (``client=``, or one built from
    ``token_provider`` - e.g. ``channelkit.http.auth.DingTalkTokenProvider`` - with no
    automatic retries); a token rejected with 401 is refreshed and the call retried once.
    ``callback_route_key`` is the key registered with ``/v1.0/card/callbacks/register``
    for the ``/dingtalk/card`` URL.
    """

    def __init__(
        self,
        robot_code: str,
        token_provider: TokenProvider | Callable[[], str] | None = None,
        *,
        base_url: str = "https://api.dingtalk.com",
        timeout: float = 10.0,
        transport: Transport | None = None,
        callback_route_key: str | None = None,
        client: DingtalkClient | None = None,
    ) -> None:
        self.robot_code = robot_code
        self.callback_route_key = callback_route_key
        self._timeout = platform_timeout(timeout)
        self._transport = transport or Transport()
        if client is None:
            if token_provider is None:
                raise ConfigurationError(
                    "a token provider or a client is required", "token_provider"
                )
            provider = (
                token_provider
                if isinstance(token_provider, TokenProvider)
                else _CallableTokens(token_provider)
            )
            client = DingtalkClient(
                token_provider=provider,
                base_url=base_url,
                timeout=self._timeout,
                retry=RetryPolicy(max_attempts=1),
                session=self._transport.session,
            )
        self._client = client

    @property
    def client(self) -> DingtalkClient:
        """The generated client this layer calls (a sender may share it)."""
        return self._client

    @property
    def timeout(self) -> tuple[float, float]:
        """The ``(connect, overall)`` timeout of every call, in seconds."""
        return self._timeout

    # -- Stream mode ----------------------------------------------------------------------
    def open_stream_connection(
        self, client_secret: str, topics: Sequence[str], *, user_agent: str = "channelkit"
    ) -> tuple[str, str]:
        """``POST /v1.0/gateway/connections/open``: ``(endpoint, ticket)`` for a Stream
        mode WebSocket receiving ``topics`` as ``CALLBACK`` frames (no access token; the
        client id and secret authenticate the call)."""
        body = OpenStreamConnectionRequest(
            client_id=self.robot_code,
            client_secret=client_secret,
            subscriptions=[StreamSubscription(type="CALLBACK", topic=t) for t in topics],
            ua=user_agent,
            local_ip="127.0.0.1",
        )
        response = self._client.open_stream_connection(body=body, timeout=self._timeout)
        endpoint, ticket = response.endpoint, response.ticket
        if not isinstance(endpoint, str) or not endpoint or not isinstance(ticket, str):
            raise ChannelKitError("the Stream gateway answered without an endpoint or ticket")
        return endpoint, ticket

    @classmethod
    def create(
        cls,
        client_id: str,
        client_secret: str,
        *,
        base_url: str = "https://api.dingtalk.com",
        timeout: float = 10.0,
        callback_route_key: str | None = None,
        token_provider: TokenProvider | Callable[[], str] | None = None,
        pool_size: int = DEFAULT_POOL_SIZE,
    ) -> CardApi:
        """The adapter's API from the app credentials: the access-token fetch shares the
        calls' connection pool and their overall deadline ``timeout`` (``requestTimeout``).

        The pool keeps ``pool_size`` connections to each host: the adapter passes
        `ChannelConfig.api_pool_size`, one for each thread that may call at once."""
        transport = Transport(pool_size=pool_size)
        provider = token_provider or DingTalkTokenProvider(
            client_id,
            client_secret,
            base_url=base_url,
            transport=transport,
            timeout=platform_timeout(timeout),
        )
        return cls(
            client_id,
            provider,
            base_url=base_url,
            timeout=timeout,
            transport=transport,
            callback_route_key=callback_route_key,
        )

    def close(self) -> None:
        """Release the connection pool (the token fetches' too)."""
        self._transport.close()

    # -- Card OpenAPI ---------------------------------------------------------------------
    def create_and_deliver(
        self,
        template_id: str,
        out_track_id: str,
        target: CardTarget,
        card_param_map: Mapping[str, Any],
    ) -> None:
        """``POST /v1.0/card/instances/createAndDeliver``.

        Callbacks are requested over HTTP (``callbackType: "HTTP"`` with the registered
        ``callbackRouteKey``) when a route key was given, else over Stream.
        """
        extension = {"dynamicSummary": "true"}
        body = CreateAndDeliverCardRequest(
            card_template_id=template_id,
            out_track_id=out_track_id,
            card_data=CardData(card_param_map=stringify_param_map(card_param_map)),
            callback_type="HTTP" if self.callback_route_key else "STREAM",
            im_group_open_space_model=ImOpenSpaceModel(support_forward=True),
            im_robot_open_space_model=ImOpenSpaceModel(support_forward=True),
            open_space_id=target.open_space_id,
            user_id_type=1,
        )
        if self.callback_route_key:
            body.callback_route_key = self.callback_route_key
        if target.is_group:
            body.im_group_open_deliver_model = ImGroupOpenDeliverModel(
                robot_code=self.robot_code, extension=extension
            )
        else:
            body.im_robot_open_deliver_model = ImRobotOpenDeliverModel(
                space_type="IM_ROBOT", robot_code=self.robot_code, extension=extension
            )
        try:
            response = self._client.create_and_deliver_card(body=body, timeout=self._timeout)
        except ApiError as exc:
            if not getattr(exc, "template_id", None):
                exc.template_id = template_id  # type: ignore[attr-defined]
            raise
        result = response.result
        if result is UNSET or result.deliver_results is UNSET:
            return
        for item in result.deliver_results:
            if item.success is False:
                message = item.error_msg or "DingTalk card delivery failed"
                raise CardDeliveryError(template_id, str(message), body=response.to_dict())

    def stream(
        self,
        out_track_id: str,
        key: str,
        content: str,
        *,
        finalize: bool = False,
        is_error: bool = False,
    ) -> None:
        """``PUT /v1.0/card/streaming`` with a full snapshot (``isFull`` true)."""
        body = StreamingUpdateCardRequest(
            out_track_id=out_track_id,
            guid=uuid.uuid4().hex,
            key=key,
            content=content,
            is_full=True,
            is_finalize=finalize,
            is_error=is_error,
        )
        self._client.streaming_update_card(body=body, timeout=self._timeout)

    def update_instance(self, out_track_id: str, card_param_map: Mapping[str, Any]) -> None:
        """``PUT /v1.0/card/instances`` merging variables by key."""
        body = UpdateCardRequest(
            out_track_id=out_track_id,
            card_data=CardData(card_param_map=stringify_param_map(card_param_map)),
            card_update_options=CardUpdateOptions(update_card_data_by_key=True),
        )
        self._client.update_card_instance(body=body, timeout=self._timeout)

    # -- robot messages -------------------------------------------------------------------
    def send_group_markdown(self, open_conversation_id: str, title: str, text: str) -> None:
        """``POST /v1.0/robot/groupMessages/send`` with ``sampleMarkdown``."""
        body = OrgGroupSendRequest(
            robot_code=self.robot_code,
            open_conversation_id=open_conversation_id,
            msg_key="sampleMarkdown",
            msg_param=_markdown_param(title, text),
        )
        self._client.send_robot_group_message(body=body, timeout=self._timeout)

    def send_direct_markdown(self, user_ids: Sequence[str], title: str, text: str) -> None:
        """``POST /v1.0/robot/oToMessages/batchSend`` with ``sampleMarkdown``."""
        body = BatchSendOtoRequest(
            robot_code=self.robot_code,
            user_ids=list(user_ids),
            msg_key="sampleMarkdown",
            msg_param=_markdown_param(title, text),
        )
        self._client.batch_send_robot_oto_messages(body=body, timeout=self._timeout)

    def send_webhook_markdown(
        self, webhook_url: str, title: str, text: str, at_user_ids: Sequence[str] = ()
    ) -> None:
        """Reply through an inbound message's ``sessionWebhook`` (Markdown)."""
        body: dict[str, Any] = {"msgtype": "markdown", "markdown": {"title": title, "text": text}}
        if at_user_ids:
            body["at"] = {"atUserIds": list(at_user_ids), "isAtAll": False}
        response = self._transport.request(
            "POST",
            webhook_url,
            timeout=self._timeout,
            headers={"Content-Type": "application/json"},
            json_body=body,
            has_body=True,
        )
        try:
            parsed: Any = response.json() if response.content else None
        except (ValueError, RecursionError):
            parsed = None
        if response.status_code >= 300:
            error = map_error(
                response.status_code, response.headers, parsed, _ERRORS, clock=time.time
            )
            raise error or ChannelKitError(f"session webhook failed: HTTP {response.status_code}")
        # Success is the documented {"errcode": 0}; anything else (an error code, a body
        # that is not that object, garbage, an empty body) is a failed call.
        errcode = parsed.get("errcode") if isinstance(parsed, Mapping) else None
        if errcode in (0, "0") and parsed.get("success") is not False:
            return
        if isinstance(parsed, Mapping) and errcode is not None:
            raise BadRequest(
                str(parsed.get("errmsg") or "session webhook rejected the message"),
                status=response.status_code,
                code=errcode,
                body=parsed,
            )
        raise DeserializationError(
            "errcode", (response.text or "")[:200], "session webhook answer is not {errcode: 0}"
        )

    # -- reactions ------------------------------------------------------------------------
    def reply_emotion(self, open_msg_id: str, open_conversation_id: str) -> None:
        """Add the eye reaction to an inbound message (``POST /v1.0/robot/emotion/reply``)."""
        body = _eye_emotion_request(self.robot_code, open_msg_id, open_conversation_id)
        self._client.reply_robot_emotion(body=body, timeout=self._timeout)

    def message_file_url(self, download_code: str, robot_code: str | None = None) -> str:
        """The temporary download URL of a file a person sent the robot
        (``POST /v1.0/robot/messageFiles/download`` with the message's ``downloadCode``;
        ``robot_code`` defaults to the app's). `DeserializationError` without a URL."""
        body = RobotMessageFileDownloadRequest(
            download_code=download_code, robot_code=robot_code or self.robot_code
        )
        response = self._client.download_robot_message_file(body=body, timeout=self._timeout)
        url = response.download_url
        if not isinstance(url, str) or not url:
            raise DeserializationError("downloadUrl", None, "the download gave no URL")
        return url

    def recall_emotion(self, open_msg_id: str, open_conversation_id: str) -> None:
        """Remove the eye reaction from an inbound message (``.../emotion/recall``)."""
        body = _eye_emotion_request(self.robot_code, open_msg_id, open_conversation_id)
        self._client.recall_robot_emotion(body=body, timeout=self._timeout)


# -- failures ----------------------------------------------------------------------------

#: Codes with which DingTalk refuses a card template itself. ``param.invalid`` is not
#: one of them: it names a bad parameter of one card, and only that card falls back.
TEMPLATE_REJECTION_CODES = frozenset(
    {
        "param.templateNotExist",
        "param.templateUnpublished",
        "param.cardTemplateIdEmpty",
    }
)


def is_template_rejection(exc: BaseException) -> bool:
    """True when DingTalk refused the card type for everyone: its template, or the app's
    credentials. Such a failure switches the card type off globally for a cool-down; any
    other failure degrades one chat (`is_chat_rejection()`) or one card."""
    if isinstance(exc, CardDeliveryError):
        return False  # one chat's delivery, see is_chat_rejection
    if isinstance(exc, AuthError):
        return True
    return isinstance(exc, ApiError) and str(exc.code) in TEMPLATE_REJECTION_CODES


def is_chat_rejection(exc: BaseException) -> bool:
    """True when DingTalk accepted the card but refused to deliver it into the chat
    (``deliverResults[].success`` false): that chat alone gets text for a while."""
    return isinstance(exc, CardDeliveryError)


def log_card_error(operation: str, exc: BaseException, template_id: str, out_track_id: str) -> None:
    """One structured error line for a failed Card OpenAPI call (never with content)."""
    code = getattr(exc, "code", None)
    status = getattr(exc, "status", None)
    request_id = getattr(exc, "request_id", None)
    level = logging.ERROR if is_template_rejection(exc) else logging.WARNING
    logger.log(
        level,
        "dingtalk %s failed: template=%s outTrackId=%s status=%s code=%s requestId=%s error=%s",
        operation,
        template_id,
        out_track_id,
        status,
        code,
        request_id,
        type(exc).__name__,
        extra={
            "dingtalk_operation": operation,
            "dingtalk_template_id": template_id,
            "dingtalk_code": code,
            "dingtalk_status": status,
        },
    )


# -- the start-up check -----------------------------------------------------------------
def check_credentials(config: DingtalkConfig, *, timeout: float) -> None:
    """Exchange `clientId` and `clientSecret` for an access token (the token provider's
    own request, one attempt bounded by `timeout` seconds; the token is dropped).

    DingTalk does not say which of the two is wrong, so a refusal raises
    `channelkit.errors.CredentialCheckFailed` naming `clientId/clientSecret`. The card
    callback secret is DingTalk's signature key for callbacks and cannot be asked about.
    """
    transport = Transport()
    provider = DingTalkTokenProvider(
        config.client_id,
        config.client_secret,
        base_url=config.api_base_url,
        transport=transport,
        timeout=check_timeout(timeout),
    )
    try:
        probe(provider.fetch, field="clientId/clientSecret", platform="DingTalk")
    finally:
        transport.close()

"""The channelkit error hierarchy: every exception class of the SDK is defined here.

Every exception the SDK raises on purpose derives from `ChannelKitError`.
Platform HTTP failures are `ApiError` subclasses carrying the HTTP status, the
platform's own error code, the request id the platform returned and whether a retry
may succeed. Platforms that answer HTTP 200 with a non-zero business code (DingTalk's
``errcode``, Feishu's ``code``, Telegram's ``ok: false``) map into the same classes.
A second base keeps the builtin family where callers expect one: bad values are also
``ValueError``, timeouts also ``TimeoutError``, a closed pool or scheduler also
``RuntimeError``.

The modules that raise these errors re-export them, so
``from channelkit.runtime.pool import PoolClosed`` keeps working. The tree::

    Exception
     └── ChannelKitError
          ├── ConfigurationError (+ ValueError)     bad configuration or arguments
          │    └── PresentationError                  invalid presentation / delivery
          ├── TransportError                          no HTTP response arrived
          │    ├── ConnectTimeout (+ TimeoutError)
          │    └── ReadTimeout (+ TimeoutError)
          ├── ApiError                                the platform answered an error
          │    ├── AuthError
          │    ├── RateLimited
          │    ├── NotFound
          │    ├── BadRequest
          │    │    └── CardDeliveryError             DingTalk createAndDeliver per space
          │    └── ServerError
          ├── DeserializationError (+ ValueError)     a response did not match its schema
          ├── DeliveryPinError                        a required pin failed after sending
          ├── ChannelClosed                           the channel accepts no more messages
          ├── ChannelBusy                             too many runs queued
          ├── PoolClosed (+ RuntimeError)             work submitted to a shut-down pool
          ├── SchedulerClosed (+ RuntimeError)        timer requested from a stopped scheduler
          ├── QuestionError                           a function agent's question got no answer
          │    ├── QuestionCancelled
          │    └── QuestionExpired
          ├── AcpError                                the ACP (stdio) agent bridge
          │    ├── AgentProcessError
          │    ├── AcpRequestError
          │    └── AcpTimeoutError (+ TimeoutError)
          ├── StateStoreUnavailable                   the shared state store (Redis) is unreachable
          ├── CredentialCheckFailed                   a credential failed its start-up check
          ├── IngressRejected                         a Feishu callback failed verification
          ├── RequestBodyRejected                     a request body refused before any handler
          │    ├── BodyTooLarge                       larger than the limit (413)
          │    └── BadContentLength                   Content-Length is not plain digits (400)
          │         └── UnreadableBody                the body stream failed while read (400)
          ├── AttachmentError                         a file could not be fetched or sent
          │    ├── AttachmentTooLarge                 over the per-file or per-message cap
          │    ├── AttachmentRefused                  off-list redirect, path outside the root
          │    ├── AttachmentFailed                   the transfer failed (HTTP error, timeout)
          │    └── FileNotDelivered                   an agent's file did not reach the chat
          ├── DecryptionError (+ ValueError)          a Feishu encrypted body is malformed
          ├── InvalidForm (+ ValueError)              a Feishu form does not answer the questions
          ├── UpdateParseError (+ ValueError)         a Telegram Update has an unexpected shape
          └── Throttled                               a write waits for its chat's rate-limit token
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from channelkit.ingress import IngressResponse

__all__ = [
    "AcpError",
    "AcpRequestError",
    "AcpTimeoutError",
    "AgentProcessError",
    "ApiError",
    "AttachmentError",
    "AttachmentFailed",
    "AttachmentRefused",
    "AttachmentTooLarge",
    "AuthError",
    "BadContentLength",
    "BadRequest",
    "BodyTooLarge",
    "CardDeliveryError",
    "ChannelBusy",
    "ChannelClosed",
    "ChannelKitError",
    "ConfigurationError",
    "ConnectTimeout",
    "CredentialCheckFailed",
    "DecryptionError",
    "DeliveryPinError",
    "DeserializationError",
    "FileNotDelivered",
    "IngressRejected",
    "InvalidForm",
    "NotFound",
    "PoolClosed",
    "PresentationError",
    "QuestionCancelled",
    "QuestionError",
    "QuestionExpired",
    "RateLimited",
    "ReadTimeout",
    "RequestBodyRejected",
    "SchedulerClosed",
    "ServerError",
    "StateStoreUnavailable",
    "Throttled",
    "TransportError",
    "UnreadableBody",
    "UpdateParseError",
    "join_path",
]


class ChannelKitError(Exception):
    """Root of every error channelkit raises."""


class ConfigurationError(ChannelKitError, ValueError):
    """Invalid configuration or arguments; ``path`` names the offending field."""

    def __init__(self, message: str, path: str | None = None) -> None:
        self.path = path
        super().__init__(f"{path}: {message}" if path else message)


def join_path(prefix: str, path: str | None) -> str:
    """Join a parent path (``blocks[2]``) and a child path (``buttons[0].label``)."""
    if not path:
        return prefix
    if not prefix:
        return path
    if path.startswith("["):
        return prefix + path
    return f"{prefix}.{path}"


class PresentationError(ConfigurationError):
    """A presentation, delivery or reply payload is invalid.

    ``path`` names the offending field, e.g. ``blocks[2].buttons[0].label``.
    """

    def __init__(self, message: str, path: str | None = None) -> None:
        self.reason = message
        super().__init__(message, path)

    def under(self, prefix: str) -> PresentationError:
        """Return the same error with ``prefix`` prepended to its path."""
        return PresentationError(self.reason, join_path(prefix, self.path))


class TransportError(ChannelKitError):
    """The request never produced an HTTP response (connect/read timeout, reset, DNS)."""

    def __init__(self, message: str, *, timeout: bool = False) -> None:
        self.timeout = timeout
        super().__init__(message)


class ConnectTimeout(TransportError, TimeoutError):
    """No connection was established within the connect timeout (safe to retry)."""

    def __init__(self, message: str, *, timeout: bool = True) -> None:
        super().__init__(message, timeout=timeout)


class ReadTimeout(TransportError, TimeoutError):
    """The server did not answer within the read timeout (the request may have arrived)."""

    def __init__(self, message: str, *, timeout: bool = True) -> None:
        super().__init__(message, timeout=timeout)


class ApiError(ChannelKitError):
    """A platform answered with an error, by HTTP status or by business code."""

    def __init__(
        self,
        message: str,
        *,
        status: int,
        code: str | int | None = None,
        request_id: str | None = None,
        retryable: bool = False,
        body: Any = None,
    ) -> None:
        self.status = status
        self.code = code
        self.message = message
        self.request_id = request_id
        self.retryable = retryable
        self.body = body
        detail = f"HTTP {status}"
        if code is not None:
            detail += f", code {code}"
        if request_id:
            detail += f", request id {request_id}"
        super().__init__(f"{message} ({detail})")


class AuthError(ApiError):
    """Credentials or access token rejected (HTTP 401/403 or an auth business code)."""


class RateLimited(ApiError):
    """The platform throttled the call; ``retry_after`` is in seconds when known."""

    def __init__(self, message: str, *, retry_after: float | None = None, **kwargs: Any) -> None:
        kwargs.setdefault("retryable", True)
        self.retry_after = retry_after
        super().__init__(message, **kwargs)


class NotFound(ApiError):
    """The addressed object (message, card, chat) does not exist."""


class BadRequest(ApiError):
    """The platform rejected the request as malformed."""


class CardDeliveryError(BadRequest):
    """``createAndDeliver`` succeeded over HTTP but a space reported ``success: false``."""

    def __init__(self, template_id: str, message: str, body: Any = None) -> None:
        self.template_id = template_id
        super().__init__(f"{template_id}: {message}", status=200, code="deliverFailed", body=body)


class ServerError(ApiError):
    """The platform failed (HTTP 5xx or a transient business code)."""

    def __init__(self, message: str, **kwargs: Any) -> None:
        kwargs.setdefault("retryable", True)
        super().__init__(message, **kwargs)


class DeserializationError(ChannelKitError, ValueError):
    """A platform response did not match its schema; ``path`` names the field."""

    def __init__(self, path: str, value: Any, message: str | None = None) -> None:
        self.path = path
        self.value = value
        shown = repr(value)
        if len(shown) > 80:
            shown = shown[:77] + "..."
        super().__init__(f"{path}: {message or 'unexpected value'} (got {shown})")


class DeliveryPinError(ChannelKitError):
    """Pinning a delivered message failed while the pin was ``required``.

    Raised only after the message was sent: ``message_id`` is the delivered message
    (never lost), ``message_ids`` every message the delivery produced.
    """

    def __init__(
        self,
        message: str,
        *,
        platform: str,
        target: str,
        message_id: str | None,
        message_ids: tuple[str, ...] = (),
    ) -> None:
        self.platform = platform
        self.target = target
        self.message_id = message_id
        self.message_ids = message_ids
        suffix = f" (platform {platform}, message id {message_id})" if message_id else ""
        super().__init__(message + suffix)


class ChannelClosed(ChannelKitError):
    """The channel was closed; it accepts no more messages."""


class ChannelBusy(ChannelKitError):
    """A run could not be queued: ``limit`` names the bound that was reached
    (``max_queued_runs``, ``max_queued_per_owner`` or ``max_queued_per_chat``)."""

    def __init__(self, message: str, *, limit: str = "max_queued_runs") -> None:
        super().__init__(message)
        self.limit = limit


class PoolClosed(ChannelKitError, RuntimeError):
    """Work was submitted to a pool (or limiter) that is shut down."""


class SchedulerClosed(ChannelKitError, RuntimeError):
    """A timer was requested from a stopped scheduler."""


class QuestionError(ChannelKitError):
    """A question or permission request ended without an answer."""

    def __init__(self, message: str, request_id: str) -> None:
        self.request_id = request_id
        super().__init__(message)


class QuestionCancelled(QuestionError):
    """The user cancelled the question, or the turn was cancelled."""


class QuestionExpired(QuestionError):
    """Nobody answered within the timeout."""


class AcpError(ChannelKitError):
    """Base class of the ACP bridge's errors."""


class AgentProcessError(AcpError):
    """The agent process could not be started, died, or the bridge was closed."""

    def __init__(self, message: str, *, returncode: int | None = None) -> None:
        self.returncode = returncode
        super().__init__(message)


class AcpRequestError(AcpError):
    """The agent answered a request with a JSON-RPC error."""

    def __init__(self, method: str, code: Any, message: str, data: Any = None) -> None:
        self.method = method
        self.code = code
        self.message = message
        self.data = data
        super().__init__(f"{method}: agent error {code}: {message}")


class AcpTimeoutError(AcpError, TimeoutError):
    """The agent did not answer a request within its timeout."""

    def __init__(self, method: str, timeout: float) -> None:
        self.method = method
        self.timeout = timeout
        super().__init__(f"{method}: no answer from the agent within {timeout:g} s")


class StateStoreUnavailable(ChannelKitError):
    """The shared state store cannot be reached (connection refused, reset or timed out).

    Every `RedisStore` method raises it instead of a raw
    redis-py exception; the message never carries the URL's password. The store
    reconnects by itself once the server answers again. ``cause_class`` names the
    backend's failure (e.g. ``ConnectionError``, ``TimeoutError``) when known.
    """

    cause_class: str = ""


class CredentialCheckFailed(ChannelKitError):
    """A platform's start-up check of a channel's credentials failed.

    ``field`` names the credential as the configuration spells it (``botToken``;
    ``clientId/clientSecret`` when the platform cannot tell which of two was wrong);
    ``reason`` completes the sentence (``was refused by Telegram (HTTP 401:
    Unauthorized)``). ``refused`` is True when the platform said no, False when the
    check could not be made (no answer in time, a server error). Neither ever holds a
    secret.
    """

    def __init__(self, field: str, reason: str, *, refused: bool = True) -> None:
        self.field = field
        self.reason = reason
        self.refused = refused
        super().__init__(f"{field} {reason}")


class RequestBodyRejected(ChannelKitError):
    """A web request's body was refused while it was read, before any handler ran."""


class BodyTooLarge(RequestBodyRejected):
    """The request body exceeds the limit (answer 413)."""


class BadContentLength(RequestBodyRejected):
    """The Content-Length header is not plain ASCII digits (answer 400)."""


class UnreadableBody(BadContentLength):
    """The body stream failed while it was read (answer 400, like a bad framing)."""


class AttachmentError(ChannelKitError):
    """An attachment could not be fetched, stored or sent; ``name`` names the file."""

    def __init__(self, message: str, *, name: str) -> None:
        self.name = name
        super().__init__(message)


class AttachmentTooLarge(AttachmentError):
    """The file (or the message's files together) exceeds a cap.

    ``limit`` is the cap in bytes, ``which`` says which one (``per_file`` or
    ``per_message``), ``size`` the declared or counted size that crossed it (at most
    one byte past the cap when counted while streaming).
    """

    def __init__(self, *, name: str, limit: int, size: int, which: str = "per_file") -> None:
        self.limit = limit
        self.size = size
        self.which = which
        scope = "per message" if which == "per_message" else "per file"
        super().__init__(
            f"{name}: larger than the limit of {limit} bytes {scope} (at least {size} bytes)",
            name=name,
        )


class AttachmentRefused(AttachmentError):
    """Refused before any byte was read or written: a redirect to a host outside the
    allow-list, an outbound path outside the allowed root, or an unusable name.
    ``reason`` completes the sentence after the name."""

    def __init__(self, *, name: str, reason: str) -> None:
        self.reason = reason
        super().__init__(f"{name}: {reason}", name=name)


class AttachmentFailed(AttachmentError):
    """The transfer itself failed (an HTTP error status, a timeout, a reset connection);
    ``status`` is the HTTP status when one arrived, ``retryable`` whether a retry may
    succeed (timeouts, resets, 429 and 5xx)."""

    def __init__(
        self, *, name: str, reason: str, status: int | None = None, retryable: bool = False
    ) -> None:
        self.reason = reason
        self.status = status
        self.retryable = retryable
        super().__init__(f"{name}: {reason}", name=name)


class FileNotDelivered(AttachmentError):
    """An agent's file (`Turn.send_file`, `ChannelBase.send_file`) did not reach the chat.

    ``reason`` completes the sentence after the name (``the platform refused it (HTTP
    413: Request Entity Too Large)``); ``told`` is True when the person got the one text
    line naming the file and the reason instead; ``attempts`` counts the upload attempts
    made (0: refused before any byte was read or sent); ``cause`` is the last error.
    """

    def __init__(
        self,
        *,
        name: str,
        reason: str,
        told: bool = False,
        attempts: int = 0,
        cause: BaseException | None = None,
    ) -> None:
        self.reason = reason
        self.told = told
        self.attempts = attempts
        self.cause = cause
        super().__init__(f"{name}: not delivered: {reason}", name=name)


class IngressRejected(ChannelKitError):
    """A Feishu callback failed verification; ``status`` is the HTTP status to answer."""

    def __init__(self, status: int, reason: str) -> None:
        self.status = status
        self.reason = reason
        super().__init__(f"{status}: {reason}")

    def response(self) -> IngressResponse:
        """The rejection as an HTTP response (no details leaked beyond the reason)."""
        from channelkit.ingress import IngressResponse  # errors stays a leaf module

        return IngressResponse.json(self.status, {"code": self.status, "msg": self.reason})


class DecryptionError(ChannelKitError, ValueError):
    """The ciphertext is malformed (bad base64, length, padding or UTF-8/JSON)."""


class InvalidForm(ChannelKitError, ValueError):
    """The submitted form does not answer the stored questions."""


class UpdateParseError(ChannelKitError, ValueError):
    """An ``Update`` did not have the expected shape; ``path`` names the field."""

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        super().__init__(f"{path}: {message}")


class Throttled(ChannelKitError):
    """A write must wait ``wait`` seconds for its chat's token in the shared per-chat
    rate limit (`channelkit.platforms.common.rate_limit`). Not a failure: the delivery
    chain books the write again on the scheduler without counting an attempt."""

    def __init__(self, wait: float) -> None:
        super().__init__(f"rate limited here: next token in {wait:.2f} s")
        self.wait = wait

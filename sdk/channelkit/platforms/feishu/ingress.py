"""Verify and parse Feishu HTTP callbacks (events and card actions).

The checks, in order (see docs/platforms/feishu.md):

1. The body is a JSON object (else 400).
2. With an Encrypt Key configured:
   - the body must be ``{"encrypt": "<base64>"}`` (a plaintext body is rejected);
   - if ``X-Lark-Signature`` is present it must equal
     ``sha256_hex(timestamp + nonce + encrypt_key + raw_body)`` and
     ``X-Lark-Request-Timestamp`` must be within ``max_clock_skew_s`` of the wall clock;
   - the body is decrypted (AES-256-CBC, key ``sha256(encrypt_key)``, IV = first 16
     bytes); a bad ciphertext is rejected;
   - every request except the URL-verification challenge MUST carry a valid signature
     (Feishu does not sign the challenge).
   Without an Encrypt Key an ``encrypt`` body is rejected.
3. The Verification Token must match (``token`` of a challenge or a v1 body,
   ``header.token`` of a v2 body), compared in constant time.
4. A timestamp header, when present, must be fresh (a replayed/stale challenge or
   event is rejected even if its token is right).
5. One use only: an accepted signature is remembered until its timestamp leaves the
   skew window, and a second request carrying it is refused (403). Without an Encrypt
   Key (plain mode) nothing is signed: the Verification Token is a bearer secret that
   every request carries, so an event must also carry a fresh creation time
   (``header.create_time``, else ``X-Lark-Request-Timestamp``) and its ``event_id`` is
   one-use for the same window. A plain event replayed after the window is refused.

What is covered: with an Encrypt Key the signature covers the timestamp, the nonce and
the whole raw body, so nothing in a signed body can be altered. In plain mode nothing is
covered; anyone who captured one request knows the token and can forge any body, which
is why an Encrypt Key is recommended.

Nothing here mutates adapter state; a rejected request is answered with 400/401 and
dropped. Bodies are never logged (they may hold answers).
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from channelkit.attachments.model import Attachment
from channelkit.errors import DecryptionError, IngressRejected
from channelkit.ingress import IngressRequest, loads_json
from channelkit.platforms.common.contract import Interaction
from channelkit.platforms.common.replay import ReplayGuard, sent_at_seconds
from channelkit.platforms.feishu.crypto import decrypt_event, verify_signature
from channelkit.platforms.feishu.files import parse_resources

__all__ = [
    "CardAction",
    "FeishuIngressVerifier",
    "FeishuMessage",
    "IngressRejected",
    "VerifiedCallback",
    "card_interaction",
    "parse_card_action",
    "parse_message_event",
]

logger = logging.getLogger(__name__)

TIMESTAMP_HEADER = "X-Lark-Request-Timestamp"
NONCE_HEADER = "X-Lark-Request-Nonce"
SIGNATURE_HEADER = "X-Lark-Signature"
#: Longest ``encrypt`` field decrypted without a signature. Only the URL-verification
#: challenge is accepted unsigned and it is a few hundred bytes; refusing bigger unsigned
#: bodies before decrypting keeps unauthenticated requests from costing AES work
#: proportional to their size (the cipher is pure Python).
MAX_UNSIGNED_ENCRYPT_CHARS = 4096
#: At most this many digits in ``X-Lark-Request-Timestamp``.
_MAX_TIMESTAMP_DIGITS = 15


@dataclass(frozen=True)
class VerifiedCallback:
    """A verified (and decrypted) callback body."""

    kind: Literal["challenge", "event"]
    payload: Mapping[str, Any]
    challenge: str | None = None

    @property
    def event_type(self) -> str:
        """``header.event_type`` (v2), ``event.type`` / ``type`` (v1), or ``""``."""
        header = self.payload.get("header")
        if isinstance(header, Mapping):
            value = header.get("event_type")
            if isinstance(value, str):
                return value
        event = self.payload.get("event")
        if isinstance(event, Mapping) and isinstance(event.get("type"), str):
            return str(event["type"])
        value = self.payload.get("type")
        return value if isinstance(value, str) else ""

    @property
    def event_id(self) -> str | None:
        """``header.event_id`` (v2) or ``uuid`` (v1) for de-duplication."""
        header = self.payload.get("header")
        if isinstance(header, Mapping) and isinstance(header.get("event_id"), str):
            return str(header["event_id"])
        value = self.payload.get("uuid")
        return value if isinstance(value, str) else None


class FeishuIngressVerifier:
    """Checks token, signature, encryption and freshness of Feishu callbacks.

    ``time`` returns the wall clock in seconds (inject the channel clock's ``time``).
    """

    def __init__(
        self,
        verification_token: str,
        encrypt_key: str | None,
        *,
        time: Callable[[], float],
        max_clock_skew_s: float = 300.0,
        replay: ReplayGuard | None = None,
    ) -> None:
        self._token = verification_token
        self._encrypt_key = encrypt_key or None
        self._time = time
        self._skew = max_clock_skew_s
        #: signatures (and plain-mode event ids) already accepted
        self.replay = replay if replay is not None else ReplayGuard(time)

    def verify(self, request: IngressRequest) -> VerifiedCallback:
        """Verify ``request``; raises `IngressRejected` on any failure."""
        try:
            body = loads_json(request.body)
        except ValueError:
            raise IngressRejected(400, "body is not JSON") from None
        if not isinstance(body, dict):
            raise IngressRejected(400, "body is not a JSON object")

        headers = request.headers
        timestamp = headers.get(TIMESTAMP_HEADER)
        sent_at: float | None = None
        if timestamp is not None:
            sent_at = self._check_fresh(timestamp)

        signed = False
        signature: Any = None
        if self._encrypt_key is not None:
            encrypted = body.get("encrypt")
            if not isinstance(encrypted, str):
                raise IngressRejected(400, "expected an encrypted body")
            signature = headers.get(SIGNATURE_HEADER)
            if signature is not None:
                nonce = headers.get(NONCE_HEADER)
                if timestamp is None or nonce is None:
                    raise IngressRejected(401, "signature headers incomplete")
                key = self._encrypt_key
                if not _is_hex_signature(signature) or not isinstance(nonce, str):
                    raise IngressRejected(401, "bad signature")
                if not verify_signature(timestamp, nonce, key, request.body, signature):
                    raise IngressRejected(401, "bad signature")
                signed = True
            elif len(encrypted) > MAX_UNSIGNED_ENCRYPT_CHARS:
                raise IngressRejected(401, "signature required")
            try:
                payload = decrypt_event(self._encrypt_key, encrypted)
            except DecryptionError:
                raise IngressRejected(400, "cannot decrypt body") from None
            if not isinstance(payload, dict):
                raise IngressRejected(400, "decrypted body is not a JSON object")
        else:
            if "encrypt" in body:
                raise IngressRejected(400, "encrypted body but no encrypt key configured")
            payload = body

        is_challenge = payload.get("type") == "url_verification"
        if self._encrypt_key is not None and not signed and not is_challenge:
            raise IngressRejected(401, "signature required")
        self._check_token(payload)
        if is_challenge:
            challenge = payload.get("challenge")
            if not isinstance(challenge, str) or not challenge:
                raise IngressRejected(400, "challenge missing")
            return VerifiedCallback(kind="challenge", payload=payload, challenge=challenge)
        if signed and sent_at is not None:
            if not self.replay.admit(("sig", str(signature).strip().lower()), sent_at + self._skew):
                raise IngressRejected(403, "signature already used")
        elif not signed:
            self._admit_plain(payload, sent_at)
        return VerifiedCallback(kind="event", payload=payload)

    def _admit_plain(self, payload: Mapping[str, Any], sent_at: float | None) -> None:
        """Plain mode: a fresh creation time and a one-use event id (else 401)."""
        header = payload.get("header")
        created: Any = header.get("create_time") if isinstance(header, Mapping) else None
        if created is None:
            created = payload.get("ts")
        if isinstance(created, int) and not isinstance(created, bool):
            created = str(created)
        at = self._check_fresh(created, digits=19) if isinstance(created, str) else sent_at
        if at is None:
            raise IngressRejected(401, "no creation time")
        event_id: Any = header.get("event_id") if isinstance(header, Mapping) else None
        if event_id is None:
            event_id = payload.get("uuid")
        if (
            isinstance(event_id, str)
            and event_id
            and not self.replay.admit(("event", event_id), at + self._skew)
        ):
            raise IngressRejected(403, "event already received")

    def _check_fresh(self, timestamp: Any, *, digits: int = _MAX_TIMESTAMP_DIGITS) -> float:
        # plain ASCII digits only: float() would also take "nan" (which passes every
        # comparison), "inf", "1e9", "1_700_000_000" and non-ASCII digits
        text = timestamp.strip() if isinstance(timestamp, str) else ""
        if not text or len(text) > digits or not (text.isascii() and text.isdigit()):
            raise IngressRejected(401, "bad timestamp")
        sent = float(int(text))
        if sent > 1e14:  # microseconds (card action create_time)
            sent /= 1_000_000.0
        elif sent > 1e11:  # milliseconds
            sent /= 1000.0
        if abs(self._time() - sent) > self._skew:
            raise IngressRejected(401, "stale timestamp")
        return sent

    def _check_token(self, payload: Mapping[str, Any]) -> None:
        if not self._token:  # none configured (long connection mode): nothing matches
            raise IngressRejected(401, "bad verification token")
        token: Any = None
        header = payload.get("header")
        if isinstance(header, Mapping):
            token = header.get("token")
        if token is None:
            token = payload.get("token")
        if not isinstance(token, str) or not hmac.compare_digest(
            # surrogatepass: a JSON "\ud800" must compare unequal, not raise
            token.encode("utf-8", "surrogatepass"),
            self._token.encode("utf-8"),
        ):
            raise IngressRejected(401, "bad verification token")


def _is_hex_signature(value: Any) -> bool:
    """A SHA-256 hex digest: 64 ASCII hex digits (surrounding blanks allowed)."""
    if not isinstance(value, str):
        return False
    text = value.strip()
    return len(text) == 64 and text.isascii() and all(c in "0123456789abcdefABCDEF" for c in text)


# --- parsing ------------------------------------------------------------------------


@dataclass(frozen=True)
class FeishuMessage:
    """A parsed ``im.message.receive_v1`` event."""

    message_id: str
    chat_id: str
    sender_open_id: str
    text: str
    chat_type: str = "p2p"
    root_id: str | None = None
    thread_id: str | None = None
    sender_type: str = "user"
    mentions: tuple[str, ...] = ()
    #: the ``open_id`` of every structured mention but ``@_all`` ("" when it has none)
    mention_open_ids: tuple[str, ...] = ()
    #: the images and files it carries (`channelkit.platforms.feishu.files`)
    attachments: tuple[Attachment, ...] = ()

    @property
    def is_group(self) -> bool:
        return self.chat_type != "p2p"

    def mentions_bot(self, bot_open_id: str | None) -> bool:
        """Whether the message mentions the bot: its ``open_id`` among the structured
        mentions, or (``bot_open_id`` unknown) any structured mention of somebody;
        ``@_all`` never counts and the text is never searched for names."""
        if bot_open_id is not None:
            return bot_open_id in self.mention_open_ids
        return bool(self.mention_open_ids)


@dataclass(frozen=True)
class CardAction:
    """A parsed card action callback (``card.action.trigger`` or the legacy shape)."""

    operator_open_id: str | None
    open_message_id: str | None
    open_chat_id: str | None
    value: Mapping[str, Any] = field(default_factory=dict)
    form_value: Mapping[str, Any] | None = None
    name: str | None = None
    #: the callback's ``header.event_id`` (a redelivery repeats it), when present
    event_id: str | None = None
    #: when Feishu sent the callback (``header.create_time``, epoch seconds), if known
    sent_at: float | None = None

    @property
    def action(self) -> str:
        """``value.action`` or ``""``."""
        action = self.value.get("action")
        return action if isinstance(action, str) else ""


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _text_from_post(content: Mapping[str, Any]) -> str:
    # post: {"title": ..., "content": [[{"tag": "text", "text": ...}, ...], ...]}
    blocks = content.get("content")
    if not isinstance(blocks, list):
        for value in content.values():  # locale-wrapped {"zh_cn": {...}}
            if isinstance(value, Mapping):
                return _text_from_post(value)
        return ""
    lines = []
    for line in blocks:
        if isinstance(line, list):
            parts = [
                str(item.get("text", ""))
                for item in line
                if isinstance(item, Mapping) and item.get("tag") in ("text", "a", "md")
            ]
            lines.append("".join(parts))
    return "\n".join(lines).strip()


def parse_message_event(payload: Mapping[str, Any]) -> FeishuMessage | None:
    """Parse an ``im.message.receive_v1`` body; None for anything else or unusable."""
    event = payload.get("event")
    if not isinstance(event, Mapping):
        return None
    message = event.get("message")
    sender = event.get("sender")
    if not isinstance(message, Mapping) or not isinstance(sender, Mapping):
        return None
    sender_id = sender.get("sender_id")
    open_id = _str(sender_id.get("open_id")) if isinstance(sender_id, Mapping) else None
    message_id = _str(message.get("message_id"))
    chat_id = _str(message.get("chat_id"))
    if open_id is None or message_id is None or chat_id is None:
        return None
    msg_type = message.get("message_type")
    try:
        content = loads_json(str(message.get("content") or "{}"))
    except ValueError:
        return None
    if not isinstance(content, Mapping):
        return None
    attachments = parse_resources(message_id, str(msg_type), content)
    if msg_type == "text":
        text = str(content.get("text", ""))
    elif msg_type == "post":
        text = _text_from_post(content)
    elif attachments:  # an image, file, audio or video message: no text of its own
        text = ""
    else:
        return None
    mention_names: list[str] = []
    mention_ids: list[str] = []
    mentions = message.get("mentions")
    if isinstance(mentions, list):
        for mention in mentions:
            if isinstance(mention, Mapping):
                key = mention.get("key")
                if isinstance(key, str) and key:
                    text = text.replace(key, "")
                name = mention.get("name")
                if isinstance(name, str):
                    mention_names.append(name)
                ids = mention.get("id")
                if key != "@_all":  # @all names everybody, never the bot
                    mentioned = _str(ids.get("open_id")) if isinstance(ids, Mapping) else None
                    mention_ids.append(mentioned or "")
    return FeishuMessage(
        message_id=message_id,
        chat_id=chat_id,
        sender_open_id=open_id,
        text=" ".join(text.split()) if "\n" not in text else text.strip(),
        chat_type=str(message.get("chat_type") or "p2p"),
        root_id=_str(message.get("root_id")),
        thread_id=_str(message.get("thread_id")),
        sender_type=str(sender.get("sender_type") or "user"),
        mentions=tuple(mention_names),
        mention_open_ids=tuple(mention_ids),
        attachments=attachments,
    )


def parse_card_action(payload: Mapping[str, Any]) -> CardAction | None:
    """Parse a card action body (schema 2.0 ``event`` or legacy top-level shape).

    The operator identity is read only from ``operator.open_id`` (v2) or the top-level
    ``open_id`` (legacy); ids nested in the action value are never trusted.
    """
    event = payload.get("event") if payload.get("schema") == "2.0" else None
    if isinstance(event, Mapping):
        operator = event.get("operator")
        context = event.get("context")
        action = event.get("action")
        op = _str(operator.get("open_id")) if isinstance(operator, Mapping) else None
        message_id = _str(context.get("open_message_id")) if isinstance(context, Mapping) else None
        chat_id = _str(context.get("open_chat_id")) if isinstance(context, Mapping) else None
    else:
        action = payload.get("action")
        op = _str(payload.get("open_id"))
        message_id = _str(payload.get("open_message_id"))
        chat_id = _str(payload.get("open_chat_id"))
    if not isinstance(action, Mapping):
        return None
    value = action.get("value")
    if isinstance(value, str):
        try:
            value = loads_json(value)
        except ValueError:
            value = {}
    if not isinstance(value, Mapping):
        value = {}
    form_value = action.get("form_value")
    header = payload.get("header")
    event_id = header.get("event_id") if isinstance(header, Mapping) else None
    return CardAction(
        operator_open_id=op,
        open_message_id=message_id,
        open_chat_id=chat_id,
        value=dict(value),
        form_value=dict(form_value) if isinstance(form_value, Mapping) else None,
        name=_str(action.get("name")),
        event_id=event_id if isinstance(event_id, str) else None,
        sent_at=sent_at_seconds(header.get("create_time")) if isinstance(header, Mapping) else None,
    )


def card_interaction(action: CardAction) -> Interaction:
    """The platform contract's `Interaction` of a parsed card action.

    A callback with form values is a `form_submit`, any other a `button`; the token is
    the action value's ``token`` / ``request`` / ``segment`` (whichever the card set),
    the value its ``action``, and `raw` the `CardAction` itself.
    """
    token = next(
        (v for k in ("token", "request", "segment") if isinstance(v := action.value.get(k), str)),
        None,
    )
    return Interaction(
        kind="form_submit" if action.form_value is not None else "button",
        platform="feishu",
        actor_id=action.operator_open_id,
        chat_id=action.open_chat_id,
        token=token,
        value=action.action or None,
        form=action.form_value or {},
        raw=action,
    )

"""DingTalk ingress: signature checks and parsing of robot messages and card callbacks.

Everything here is pure (no I/O, no shared state) so the web handlers can run it
synchronously before they ACK.

Robot message callback (HTTP mode), headers ``timestamp`` (milliseconds) and ``sign``::

    sign = base64(hmac_sha256(key=app_secret, msg=timestamp + "\\n" + app_secret))

rejected when a header is missing (401), the signature differs or the timestamp is more
than one hour away from now (403).

Card action callback (HTTP mode), headers ``x-ddpaas-signature-timestamp`` and
``x-ddpaas-signature``, checked only when an ``apiSecret`` was registered::

    signature = base64(hmac_sha256(key=api_secret, msg=timestamp))

(only the timestamp is signed, not the body). Missing headers -> 401, mismatch or more
than one hour of skew -> 403. Timestamps below 10^11 are taken as seconds, others as
milliseconds; a timestamp that is not 1-15 ASCII digits is rejected (403).

What the signatures cover: only the timestamp. The body (sender ids, text,
``sessionWebhook``) is not authenticated, so anyone holding one captured
``timestamp``/``sign`` pair could attach any body to it. Passing a
`ReplayGuard` as ``replay`` makes each
signature one-use: it is remembered until its timestamp leaves the skew window and a
second request carrying it is refused (403), so a captured pair is worthless once the
genuine request arrived. Two genuine requests signed in the same millisecond carry the
same signature; the second is refused too (DingTalk cannot tell them apart for us).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from channelkit.attachments.model import Attachment
from channelkit.ingress import loads_json
from channelkit.platforms.common.contract import Interaction
from channelkit.platforms.common.replay import ReplayGuard
from channelkit.platforms.dingtalk.files import parse_media

logger = logging.getLogger(__name__)

__all__ = [
    "CARD_SIGNATURE_HEADER",
    "CARD_TIMESTAMP_HEADER",
    "ROBOT_SIGN_HEADER",
    "ROBOT_TIMESTAMP_HEADER",
    "CardCallback",
    "RobotMessage",
    "card_interaction",
    "card_signature",
    "check_card_signature",
    "check_robot_signature",
    "parse_card_actor_id",
    "parse_card_callback",
    "parse_robot_message",
    "robot_signature",
    "trusted_session_webhook",
]

ROBOT_TIMESTAMP_HEADER = "timestamp"
ROBOT_SIGN_HEADER = "sign"
CARD_TIMESTAMP_HEADER = "x-ddpaas-signature-timestamp"
CARD_SIGNATURE_HEADER = "x-ddpaas-signature"

_DEFAULT_SKEW_SECONDS = 3600.0


def _hmac_b64(key: str, message: str) -> str:
    digest = hmac.new(key.encode("utf-8"), message.encode("utf-8"), hashlib.sha256).digest()
    return base64.b64encode(digest).decode("ascii")


def robot_signature(timestamp: str, app_secret: str) -> str:
    """The ``sign`` header DingTalk sends with a robot message for ``timestamp``."""
    return _hmac_b64(app_secret, f"{timestamp}\n{app_secret}")


def card_signature(timestamp: str, api_secret: str) -> str:
    """The ``x-ddpaas-signature`` header DingTalk sends with a card callback."""
    return _hmac_b64(api_secret, timestamp)


#: At most this many digits in a timestamp header (milliseconds need 13 until 2286).
_MAX_TIMESTAMP_DIGITS = 15


def _timestamp_seconds(raw: str) -> float | None:
    """Seconds since the epoch of a timestamp header; None unless it is plain digits.

    Only ASCII digits are accepted (no sign, exponent, underscore, whitespace inside or
    non-ASCII digits) and at most 15 of them, so a hostile header can neither overflow
    the float conversion nor pass as an unusual spelling of a valid number.
    """
    text = raw.strip() if isinstance(raw, str) else ""
    if not text or len(text) > _MAX_TIMESTAMP_DIGITS or not (text.isascii() and text.isdigit()):
        return None
    value = int(text)
    return value / 1000.0 if value >= 100_000_000_000 else float(value)


def _check(
    timestamp: str | None,
    signature: str | None,
    expected_fn: Any,
    now: float,
    max_skew: float,
    replay: ReplayGuard | None = None,
    kind: str = "",
) -> int | None:
    # Rejections are logged with the reason only, never with the header values.
    if not isinstance(timestamp, str) or not isinstance(signature, str):
        return _rejected(kind, 401, "signature headers missing")
    if not timestamp or not signature:
        return _rejected(kind, 401, "signature headers empty")
    ts = _timestamp_seconds(timestamp)
    if ts is None or abs(now - ts) > max_skew:
        return _rejected(kind, 403, "timestamp malformed or outside the allowed skew")
    expected: str = expected_fn(timestamp)
    given = signature.strip()
    if not hmac.compare_digest(expected.encode("ascii"), given.encode("ascii", "replace")):
        return _rejected(kind, 403, "bad signature")
    if replay is not None and not replay.admit((kind, given), ts + max_skew):
        # a replay, or a second genuine request signed in the same millisecond
        return _rejected(kind, 403, "signature already used")
    return None


def _rejected(kind: str, status: int, reason: str) -> int:
    logger.warning("DingTalk %s callback rejected (%d): %s", kind or "signed", status, reason)
    return status


def check_robot_signature(
    headers: Mapping[str, str],
    app_secret: str,
    *,
    now: float,
    max_skew_seconds: float = _DEFAULT_SKEW_SECONDS,
    replay: ReplayGuard | None = None,
) -> int | None:
    """None if the robot callback is authentic, else the HTTP status to answer (401/403).

    ``now`` is wall-clock time in seconds since the epoch. With ``replay`` the signature
    is one-use (a second request carrying it answers 403).
    """
    return _check(
        headers.get(ROBOT_TIMESTAMP_HEADER),
        headers.get(ROBOT_SIGN_HEADER),
        lambda ts: robot_signature(ts, app_secret),
        now,
        max_skew_seconds,
        replay,
        "robot",
    )


def check_card_signature(
    headers: Mapping[str, str],
    api_secret: str,
    *,
    now: float,
    max_skew_seconds: float = _DEFAULT_SKEW_SECONDS,
    replay: ReplayGuard | None = None,
) -> int | None:
    """None if the card callback is authentic, else the HTTP status to answer (401/403).

    With ``replay`` the signature is one-use (a second request carrying it answers 403).
    """
    return _check(
        headers.get(CARD_TIMESTAMP_HEADER),
        headers.get(CARD_SIGNATURE_HEADER),
        lambda ts: card_signature(ts, api_secret),
        now,
        max_skew_seconds,
        replay,
        "card",
    )


# -- robot messages -----------------------------------------------------------------------
@dataclass(frozen=True)
class RobotMessage:
    """A robot inbound message, reduced to what the adapter uses.

    ``owner_key`` is ``senderStaffId`` when present, else ``senderId``: the identity card
    actions are compared against.
    """

    msg_id: str
    conversation_id: str
    is_group: bool
    owner_key: str
    text: str
    sender_id: str = ""
    sender_staff_id: str | None = None
    sender_nick: str | None = None
    msgtype: str = "text"
    session_webhook: str | None = None
    session_webhook_expires_ms: int | None = None
    robot_code: str | None = None
    conversation_title: str | None = None
    #: group messages: the robot itself is in ``atUsers`` (`mentions_robot`)
    mentions_bot: bool | None = None
    #: the pictures and files it carries (`channelkit.platforms.dingtalk.files`)
    attachments: tuple[Attachment, ...] = ()
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)


def _str(value: Any) -> str | None:
    if isinstance(value, str):
        stripped = value.strip()
        if stripped:
            return stripped
    return None


def _is_map(value: Any) -> bool:
    # decoded JSON objects are dicts: skip the (slower) ABC check for them
    return type(value) is dict or isinstance(value, Mapping)


def _message_text(payload: Mapping[str, Any]) -> str:
    text = payload.get("text")
    if isinstance(text, Mapping) and isinstance(text.get("content"), str):
        return str(text["content"]).strip()
    content = payload.get("content")
    if isinstance(content, Mapping):
        rich = content.get("richText")
        if isinstance(rich, list):
            parts = [
                str(item["text"])
                for item in rich
                if isinstance(item, Mapping) and isinstance(item.get("text"), str)
            ]
            return "".join(parts).strip()
        if isinstance(content.get("recognition"), str):
            return str(content["recognition"]).strip()
    return ""


#: Hosts a ``sessionWebhook`` may point at (DingTalk's documented reply endpoint).
SESSION_WEBHOOK_HOSTS = frozenset({"oapi.dingtalk.com"})


def trusted_session_webhook(value: Any) -> str | None:
    """``value`` if it is an ``https`` URL on a DingTalk host, else None.

    The body of a robot message is not signed, so a ``sessionWebhook`` is used only when
    it points at DingTalk itself (no user info, default port); any other value is dropped
    and replies go through the robot API.
    """
    text = _str(value)
    if text is None or len(text) > 2048 or not text.isascii():
        return None
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        return None
    if parts.scheme != "https" or parts.hostname not in SESSION_WEBHOOK_HOSTS:
        return None
    if parts.username is not None or parts.password is not None or port not in (None, 443):
        return None
    if "\\" in text or any(ord(c) < 0x21 for c in text):
        return None
    return text


def mentions_robot(payload: Mapping[str, Any]) -> bool | None:
    """Whether a group message @-mentions the robot itself (None: the body cannot tell).

    The structured ``atUsers`` list decides: the robot is addressed when its
    ``chatbotUserId`` is one of the ``dingtalkId`` values (``@all`` lists nobody, so it
    never counts). Without a ``chatbotUserId`` and ``atUsers`` to compare,
    ``isInAtList`` decides; the text is never searched for an ``@`` name.
    """
    robot = _str(payload.get("chatbotUserId"))
    at_users = payload.get("atUsers")
    if robot is not None and isinstance(at_users, list):
        return any(_is_map(u) and _str(u.get("dingtalkId")) == robot for u in at_users)
    flag = payload.get("isInAtList")
    return flag if isinstance(flag, bool) else None


def parse_robot_message(payload: Any) -> RobotMessage | None:
    """Parse a robot message body (already JSON-decoded); None when it is not usable."""
    if not isinstance(payload, Mapping):
        return None
    msg_id = _str(payload.get("msgId"))
    conversation_id = _str(payload.get("conversationId"))
    sender_id = _str(payload.get("senderId")) or ""
    staff_id = _str(payload.get("senderStaffId"))
    owner_key = staff_id or sender_id
    if not msg_id or not conversation_id or not owner_key:
        return None
    expires = payload.get("sessionWebhookExpiredTime")
    return RobotMessage(
        msg_id=msg_id,
        conversation_id=conversation_id,
        is_group=(group := str(payload.get("conversationType", "1")) == "2"),
        owner_key=owner_key,
        text=_message_text(payload),
        sender_id=sender_id,
        sender_staff_id=staff_id,
        sender_nick=_str(payload.get("senderNick")),
        msgtype=_str(payload.get("msgtype")) or "text",
        session_webhook=trusted_session_webhook(payload.get("sessionWebhook")),
        session_webhook_expires_ms=expires if isinstance(expires, int) else None,
        robot_code=_str(payload.get("robotCode")),
        conversation_title=_str(payload.get("conversationTitle")),
        mentions_bot=mentions_robot(payload) if group else None,
        attachments=parse_media(str(payload.get("msgtype") or ""), payload.get("content")),
        raw=payload,
    )


# -- card callbacks -----------------------------------------------------------------------
@dataclass(frozen=True)
class CardCallback:
    """A card action callback, normalized.

    ``actor_id`` comes only from the top-level ``userId``/``senderStaffId``/``senderId``
    (nested ids are ignored so a form cannot spoof its author).
    """

    out_track_id: str
    action_id: str
    actor_id: str
    form_data: Mapping[str, Any] = field(default_factory=dict)
    has_business_payload: bool = False
    is_cancel: bool = False


def _maybe_json(value: Any) -> Any:
    if isinstance(value, str):
        stripped = value.strip()
        if stripped[:1] in ("{", "["):
            try:
                return loads_json(stripped)
            except ValueError:
                return None
        return None
    return value


def _json_map(value: Any) -> Mapping[str, Any] | None:
    """``value`` as a mapping (decoding JSON text), else None."""
    parsed = _maybe_json(value)
    return parsed if parsed is not None and _is_map(parsed) else None


def _as_root(value: Any) -> Mapping[str, Any] | None:
    if isinstance(value, str | bytes):
        try:
            value = loads_json(value)
        except ValueError:
            return None
    return value if _is_map(value) else None


def _first(sources: tuple[Mapping[str, Any], ...], key: str) -> str | None:
    """The first non-blank string under ``key`` in ``sources``."""
    for source in sources:
        value = source.get(key)
        if value is not None:
            found = _str(value)
            if found:
                return found
    return None


def _first_map(sources: tuple[Mapping[str, Any], ...], key: str) -> Mapping[str, Any] | None:
    """The first mapping (or JSON object text) under ``key`` in ``sources``."""
    for source in sources:
        value = source.get(key)
        if value is not None:
            found = _json_map(value)
            if found is not None:
                return found
    return None


def _top_level_actor(root: Mapping[str, Any]) -> str | None:
    for key in ("userId", "senderStaffId", "senderId"):
        found = _str(root.get(key))
        if found:
            return found
    return None


def parse_card_actor_id(value: Any) -> str | None:
    """The acting user of a callback: first non-blank top-level id, else None."""
    root = _as_root(value)
    return None if root is None else _top_level_actor(root)


def parse_card_callback(value: Any) -> CardCallback | None:
    """Normalize a card callback (object or JSON text); None if malformed or incomplete.

    Runs on the web thread before the ACK: the actor is checked first (no actor, no
    further decoding) and embedded JSON is decoded once.
    """
    root = _as_root(value)
    if root is None:
        return None
    actor_id = _top_level_actor(root)
    if actor_id is None:
        return None  # fails closed: nothing else is worth decoding
    embedded: list[Mapping[str, Any]] = []
    for key in ("value", "content"):
        raw = root.get(key)
        parsed = _json_map(raw) if raw is not None else None
        if parsed is not None:
            embedded.append(parsed)
    private: list[Mapping[str, Any]] = []
    for source in (*embedded, root):
        raw = source.get("cardPrivateData")
        cpd = _json_map(raw) if raw is not None else None
        if cpd is not None:
            private.append(cpd)
    sources: tuple[Mapping[str, Any], ...] = (*embedded, *private, root)

    action_id: str | None = None
    for cpd in private:
        ids = cpd.get("actionIds")
        if isinstance(ids, list) and ids:
            action_id = _str(ids[0])
            if action_id:
                break
    if action_id is None:
        action_id = _first(sources, "actionValue") or _first(sources, "eventKey")
        action_id = action_id or _first(sources, "actionId")
    out_track_id = _first(sources, "outTrackId")
    if not out_track_id or not action_id:
        return None

    params = _first_map(sources, "params")
    form = _first_map(sources, "formData")
    if form is None and params is not None:
        form = _json_map(params.get("form"))
    has_cancel = params is not None and "user_cancel" in params
    is_cancel = bool(
        has_cancel and params is not None and params.get("user_cancel") in ("true", True, 1, "1")
    )
    return CardCallback(
        out_track_id=out_track_id,
        action_id=action_id,
        actor_id=actor_id,
        form_data=form if form is not None else {},
        has_business_payload=form is not None or has_cancel,
        is_cancel=is_cancel,
    )


def card_interaction(callback: CardCallback) -> Interaction:
    """The platform contract's `Interaction` of a parsed card callback.

    A callback with form data is a `form_submit`, any other action (Stop, Cancel) a
    `button`; the token is the card's outTrackId, the value its action id, and `raw`
    the `CardCallback` itself.
    """
    return Interaction(
        kind="form_submit" if callback.form_data else "button",
        platform="dingtalk",
        actor_id=callback.actor_id,
        token=callback.out_track_id,
        value=callback.action_id,
        form=callback.form_data,
        raw=callback,
    )

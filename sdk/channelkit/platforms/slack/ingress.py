"""Slack ingress: request signatures, the Events API and interactivity payloads.

Verification (`SlackVerifier`): ``X-Slack-Signature`` is
``v0=`` + hex HMAC-SHA256 of ``v0:{X-Slack-Request-Timestamp}:{raw body}`` keyed by the
signing secret, compared in constant time; the timestamp must be within five minutes of
now (the injected clock); and a signature is accepted once
(`ReplayGuard`, remembered until its
timestamp leaves the window). Anything else is answered 401 before the body is parsed.

`SlackEvents` is the route handler. A JSON body is an Events API request:
``url_verification`` is answered with its ``challenge``; an ``event_callback`` is handed
to the channel (``on_event``). A form-encoded body with ``payload=`` is an
interactivity payload (``block_actions``), handed to ``on_interaction``. Both return the
ACK with the work deferred to its ``after`` (ACK first, work after). Retries
(``X-Slack-Retry-Num``) carry the same ``event_id`` and are deduplicated by the channel.
`action_interaction()` turns one action of a ``block_actions`` payload into the
platform contract's ``Interaction`` (a ``button``) for the channel's router.

`parse_message()` turns ``message`` / ``app_mention`` events into
`SlackMessage` (None for bot messages, subtypes, edits and events without text).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from channelkit.attachments.model import Attachment
from channelkit.ingress import IngressRequest, IngressResponse
from channelkit.platforms.common.config import register_secrets
from channelkit.platforms.common.contract import Interaction
from channelkit.platforms.common.replay import ReplayGuard, signed_headers_problem
from channelkit.platforms.slack.files import parse_files

__all__ = [
    "SIGNATURE_HEADER",
    "SIGNATURE_WINDOW_S",
    "TIMESTAMP_HEADER",
    "SlackAction",
    "SlackEvents",
    "SlackMessage",
    "SlackVerifier",
    "action_interaction",
    "parse_message",
    "sign",
]

logger = logging.getLogger(__name__)

SIGNATURE_HEADER = "X-Slack-Signature"
TIMESTAMP_HEADER = "X-Slack-Request-Timestamp"
RETRY_HEADER = "X-Slack-Retry-Num"
#: Seconds a signed timestamp stays acceptable (either side of now).
SIGNATURE_WINDOW_S = 300.0
#: Largest request body read (bytes).
MAX_BODY_BYTES = 1_000_000

_MENTION = re.compile(r"<@[A-Z0-9]+(?:\|[^>]*)?>")
#: What a ``v0`` signature header looks like (ASCII only).
_SIGNATURE = re.compile(r"v0=[0-9a-fA-F]{64}", re.ASCII)


def sign(secret: str, timestamp: str, body: bytes) -> str:
    """The ``v0=`` signature Slack sends for ``body`` at ``timestamp``."""
    base = b"v0:" + timestamp.encode("ascii") + b":" + body
    return "v0=" + hmac.new(secret.encode("utf-8"), base, hashlib.sha256).hexdigest()


class SlackVerifier:
    """``v0`` signature + freshness + one use; see the module docstring."""

    def __init__(
        self, signing_secret: str, time: Callable[[], float], *, window: float = SIGNATURE_WINDOW_S
    ) -> None:
        self._secret = signing_secret
        register_secrets(signing_secret)
        self._time = time
        self._window = window
        self._seen = ReplayGuard(time, ttl=2 * window)

    def verify(self, headers: Mapping[str, str], body: bytes) -> str | None:
        """None when the request is authentic, fresh and first; else why it is not."""
        timestamp = headers.get(TIMESTAMP_HEADER, "")
        signature = headers.get(SIGNATURE_HEADER, "")
        problem = signed_headers_problem(
            timestamp, signature, pattern=_SIGNATURE, now=self._time(), window=self._window
        )
        if problem is not None:
            return problem
        if not hmac.compare_digest(sign(self._secret, timestamp, body), signature):
            return "bad signature"
        if not self._seen.admit(signature, int(timestamp) + self._window):
            return "signature already used"
        return None


@dataclass(frozen=True)
class SlackMessage:
    """A person's message addressed to the bot."""

    channel: str
    user: str
    text: str
    ts: str
    thread_ts: str | None
    channel_type: str | None
    team: str | None
    mention: bool
    #: the files shared with the message (``files`` of a ``file_share`` message or of a
    #: mention), downloaded when the run starts (`channelkit.platforms.slack.files`)
    attachments: tuple[Attachment, ...] = ()


def parse_message(event: Mapping[str, Any], team: str | None = None) -> SlackMessage | None:
    """A ``message`` / ``app_mention`` event as a `SlackMessage`; None for bot
    messages, any subtype but ``file_share`` (edits, joins, bot posts...), and events
    without a user, or without text and files. A mention's ``<@U...>`` markup is
    removed from the text; a message with files may have no text."""
    kind = event.get("type")
    if kind not in ("message", "app_mention"):
        return None
    subtype = event.get("subtype")
    if event.get("bot_id") or event.get("bot_profile") or subtype not in (None, "file_share"):
        return None
    user, text, channel, ts = (event.get(k) for k in ("user", "text", "channel", "ts"))
    if not all(isinstance(v, str) and v for v in (user, channel, ts)) or not isinstance(text, str):
        return None
    assert isinstance(user, str) and isinstance(channel, str) and isinstance(ts, str)
    mention = kind == "app_mention"
    if mention:
        text = _MENTION.sub("", text).strip()
    attachments = parse_files(event.get("files"))
    if not text.strip() and not attachments:
        return None
    thread_ts = event.get("thread_ts")
    channel_type = event.get("channel_type")
    return SlackMessage(
        channel=channel,
        user=user,
        text=text,
        ts=ts,
        thread_ts=thread_ts if isinstance(thread_ts, str) and thread_ts else None,
        channel_type=channel_type if isinstance(channel_type, str) else None,
        team=event.get("team") if isinstance(event.get("team"), str) else team,
        mention=mention,
        attachments=attachments,
    )


@dataclass(frozen=True)
class SlackAction:
    """One action of a ``block_actions`` payload (the ``raw`` of its ``Interaction``):
    the action and the whole payload it came in."""

    action: Mapping[str, Any]
    payload: Mapping[str, Any]

    @property
    def message_ts(self) -> str | None:
        """The ``ts`` of the message whose button was clicked, when the payload says."""
        ts = _text(_mapping(self.payload.get("container")).get("message_ts"))
        return ts or _text(_mapping(self.payload.get("message")).get("ts"))


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def action_interaction(action: Mapping[str, Any], payload: Mapping[str, Any]) -> Interaction:
    """The platform contract's ``Interaction`` of one ``block_actions`` action: a
    ``button`` whose ``token`` is the ``action_id`` and ``value`` the button's ``value``
    (a select's chosen option value); ``actor_id`` the clicking user, ``chat_id`` the
    channel and ``thread_id`` the clicked message's thread (``thread_ts``), when the
    payload carries them; ``raw`` is a `SlackAction`."""
    value = action.get("value")
    if value is None:
        value = _mapping(action.get("selected_option")).get("value")
    message, container = _mapping(payload.get("message")), _mapping(payload.get("container"))
    return Interaction(
        kind="button",
        platform="slack",
        actor_id=_text(_mapping(payload.get("user")).get("id")),
        chat_id=_text(_mapping(payload.get("channel")).get("id")),
        thread_id=_text(message.get("thread_ts")) or _text(container.get("thread_ts")),
        token=_text(action.get("action_id")),
        value=value if isinstance(value, str) else None,
        raw=SlackAction(action, payload),
    )


EventHandler = Callable[[Mapping[str, Any], bool], IngressResponse]
InteractionHandler = Callable[[Mapping[str, Any]], IngressResponse]


class SlackEvents:
    """The Events API / interactivity route handler (see the module docstring)."""

    def __init__(
        self, verifier: SlackVerifier, on_event: EventHandler, on_interaction: InteractionHandler
    ) -> None:
        self._verifier = verifier
        self._on_event = on_event
        self._on_interaction = on_interaction

    def __call__(self, request: IngressRequest) -> IngressResponse:
        body = request.body
        if len(body) > MAX_BODY_BYTES:
            return IngressResponse.json(413, {"ok": False})
        refused = self._verifier.verify(request.headers, body)
        if refused is not None:
            logger.warning("slack request refused: %s", refused)
            return IngressResponse.json(401, {"ok": False})
        content_type = request.headers.get("Content-Type", "")
        try:
            if "application/x-www-form-urlencoded" in content_type or body.startswith(b"payload="):
                form = parse_qs(body.decode("utf-8"), strict_parsing=False)
                payload = json.loads(form.get("payload", [""])[0])
                if not isinstance(payload, dict):
                    raise ValueError("payload is not an object")
                return self._on_interaction(payload)
            data = json.loads(body)
            if not isinstance(data, dict):
                raise ValueError("body is not an object")
        except (ValueError, UnicodeDecodeError):
            return IngressResponse.json(400, {"ok": False})
        if data.get("type") == "url_verification":
            return IngressResponse.json(200, {"challenge": str(data.get("challenge", ""))})
        if data.get("type") != "event_callback":
            return IngressResponse.json(200, {})
        retry = RETRY_HEADER in request.headers
        return self._on_event(data, retry)

"""Discord's HTTP interactions endpoint: Ed25519 verification, one use, PING answered.

With an *Interactions Endpoint URL* set in the developer portal, Discord POSTs every
interaction (slash commands, button presses, select menus, modal submits) to it instead
of sending ``INTERACTION_CREATE`` over the gateway, and checks the endpoint with PINGs,
forged ones included.

Verification (`DiscordVerifier`): ``X-Signature-Ed25519`` is the hex Ed25519 signature
of ``X-Signature-Timestamp`` (epoch seconds) followed by the raw body, made with the
application's key; it is checked against the application's *public key* (hex, from the
developer portal's General Information page). The timestamp must be within
`SIGNATURE_WINDOW_S` of now (the injected clock), and a request is accepted once: the
SHA-256 of its signed message (timestamp + body) is remembered by a bounded
`ReplayGuard` until the timestamp leaves the window, so a replay is refused however its
signature is spelled. Anything else is answered 401 before the body is parsed.

The library is ``cryptography`` (pyca): maintained, audited, wheels for every platform
channelkit supports, and its Ed25519 (OpenSSL) refuses non-canonical signatures. It is
imported when a verifier is made; without it the error names the extra to install
(``pip install 'channelkit[discord]'``).

`DiscordInteractions` is the route handler: a verified PING (type 1) is answered with
PONG (``{"type": 1}``); every other interaction type goes to ``on_interaction(payload)``,
which returns the ACK (for a channel: a deferred response, type 5 or 6, with the work
in its ``after``) within Discord's 3 seconds; anything else is a 400.
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from channelkit.attachments.model import Attachment
from channelkit.core.catalog import Messages, messages, resolve_locale
from channelkit.errors import ConfigurationError
from channelkit.ingress import Headers, IngressRequest, IngressResponse, loads_json
from channelkit.platforms.common.replay import ReplayGuard, signed_headers_problem
from channelkit.platforms.discord.files import parse_attachments

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

__all__ = [
    "INTERACTION_APPLICATION_COMMAND",
    "INTERACTION_AUTOCOMPLETE",
    "INTERACTION_MESSAGE_COMPONENT",
    "INTERACTION_MODAL_SUBMIT",
    "INTERACTION_PING",
    "MAX_BODY_BYTES",
    "RESPONSE_CHANNEL_MESSAGE",
    "RESPONSE_DEFERRED_CHANNEL_MESSAGE",
    "RESPONSE_DEFERRED_UPDATE_MESSAGE",
    "RESPONSE_MODAL",
    "RESPONSE_PONG",
    "RESPONSE_UPDATE_MESSAGE",
    "SIGNATURE_HEADER",
    "SIGNATURE_WINDOW_S",
    "THREAD_TYPES",
    "TIMESTAMP_HEADER",
    "ComponentClick",
    "DiscordInteractions",
    "DiscordMessage",
    "DiscordVerifier",
    "clicker_texts",
    "deferred_update",
    "ephemeral",
    "modal",
    "modal_values",
    "parse_component",
    "parse_message",
    "strip_mentions",
]

logger = logging.getLogger(__name__)

SIGNATURE_HEADER = "X-Signature-Ed25519"
TIMESTAMP_HEADER = "X-Signature-Timestamp"
#: Seconds a signed timestamp stays acceptable (either side of now).
SIGNATURE_WINDOW_S = 300.0
#: Largest request body accepted (bytes).
MAX_BODY_BYTES = 1_000_000

#: Interaction types (the ``type`` of the POSTed payload).
INTERACTION_PING = 1
INTERACTION_APPLICATION_COMMAND = 2
INTERACTION_MESSAGE_COMPONENT = 3
INTERACTION_AUTOCOMPLETE = 4
INTERACTION_MODAL_SUBMIT = 5
_HANDED_ON = frozenset(
    {
        INTERACTION_APPLICATION_COMMAND,
        INTERACTION_MESSAGE_COMPONENT,
        INTERACTION_AUTOCOMPLETE,
        INTERACTION_MODAL_SUBMIT,
    }
)

#: Interaction response types (the ``type`` of the ACK body).
RESPONSE_PONG = 1
RESPONSE_CHANNEL_MESSAGE = 4
RESPONSE_DEFERRED_CHANNEL_MESSAGE = 5
RESPONSE_DEFERRED_UPDATE_MESSAGE = 6
RESPONSE_UPDATE_MESSAGE = 7
RESPONSE_MODAL = 9

_SIGNATURE = re.compile(r"[0-9a-fA-F]{128}", re.ASCII)
_PUBLIC_KEY = re.compile(r"[0-9a-fA-F]{64}", re.ASCII)

InteractionHandler = Callable[[Mapping[str, Any]], IngressResponse]


def _load_public_key(public_key: str) -> Ed25519PublicKey:
    if not isinstance(public_key, str) or not _PUBLIC_KEY.fullmatch(public_key.strip()):
        raise ConfigurationError(
            "must be the application's public key: 64 hex characters (developer portal, "
            "General Information)",
            "public_key",
        )
    try:
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    except ImportError:
        raise ConfigurationError(
            "Discord's interactions endpoint verifies Ed25519 signatures with the "
            "`cryptography` package: pip install 'channelkit[discord]'",
            "public_key",
        ) from None
    try:
        return Ed25519PublicKey.from_public_bytes(bytes.fromhex(public_key.strip()))
    except ValueError:
        raise ConfigurationError("is not a valid Ed25519 public key", "public_key") from None


class DiscordVerifier:
    """Ed25519 signature + freshness + one use; see the module docstring.

    ``time`` returns wall-clock epoch seconds (the injected clock's ``time``).
    """

    def __init__(
        self,
        public_key: str,
        time: Callable[[], float],
        *,
        window: float = SIGNATURE_WINDOW_S,
    ) -> None:
        if window <= 0:
            raise ConfigurationError("must be positive", "window")
        self._key = _load_public_key(public_key)
        self._time = time
        self._window = window
        self._seen = ReplayGuard(time, ttl=2 * window)

    def verify(self, headers: Mapping[str, str], body: bytes) -> str | None:
        """None when the request is authentic, fresh and first; else why it is not."""
        from cryptography.exceptions import InvalidSignature

        if not isinstance(headers, Headers):
            headers = Headers(headers)  # names are case-insensitive
        timestamp = headers.get(TIMESTAMP_HEADER, "")
        signature = headers.get(SIGNATURE_HEADER, "")
        problem = signed_headers_problem(
            timestamp, signature, pattern=_SIGNATURE, now=self._time(), window=self._window
        )
        if problem is not None:
            return problem
        message = timestamp.encode("ascii") + body
        try:
            self._key.verify(bytes.fromhex(signature), message)
        except InvalidSignature:
            return "bad signature"
        if not self._seen.admit(hashlib.sha256(message).digest(), int(timestamp) + self._window):
            return "signature already used"
        return None

    def remembered(self) -> int:
        """Requests remembered for replay refusal (bounded)."""
        return len(self._seen)


class DiscordInteractions:
    """The interactions endpoint's route handler; see the module docstring.

    ``on_interaction(payload)`` receives every verified interaction but PING and returns
    the ACK (it must not wait on the network: Discord wants it within 3 seconds).
    """

    def __init__(self, verifier: DiscordVerifier, on_interaction: InteractionHandler) -> None:
        self._verifier = verifier
        self._on_interaction = on_interaction
        self._counts_lock = threading.Lock()
        #: requests by outcome (``pings``, ``interactions``, ``refused``, ``malformed``)
        self.counts: dict[str, int] = {}

    def __call__(self, request: IngressRequest) -> IngressResponse:
        """Verify, answer PING, hand anything else to ``on_interaction``."""
        if request.method.upper() != "POST":
            return IngressResponse.text(405, "POST only")
        if len(request.body) > MAX_BODY_BYTES:
            self._count("malformed")
            return IngressResponse.text(413, "request body too large")
        refusal = self._verifier.verify(request.headers, request.body)
        if refusal is not None:
            self._count("refused")
            logger.warning("refused a Discord interaction request: %s", refusal)
            return IngressResponse.text(401, "invalid request signature")
        try:
            payload = loads_json(request.body)
        except ValueError:
            payload = None
        kind = payload.get("type") if isinstance(payload, dict) else None
        if not isinstance(payload, dict) or isinstance(kind, bool) or not isinstance(kind, int):
            self._count("malformed")
            return IngressResponse.text(400, "not an interaction")
        if kind == INTERACTION_PING:
            self._count("pings")
            return IngressResponse.json(200, {"type": RESPONSE_PONG})
        if kind not in _HANDED_ON:
            self._count("malformed")
            return IngressResponse.text(400, f"unknown interaction type {kind}")
        self._count("interactions")
        return self._on_interaction(payload)

    def _count(self, outcome: str) -> None:
        with self._counts_lock:
            self.counts[outcome] = self.counts.get(outcome, 0) + 1


# -- the payloads the channel acts on (no network, never raises) ---------------------------
#: Channel types of threads (announcement, public and private threads).
THREAD_TYPES = frozenset({10, 11, 12})
#: Message types a person writes (default, reply).
_PERSON_MESSAGE_TYPES = frozenset({0, 19})
_MENTION = re.compile(r"<@!?(\d+)>")


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _user_of(payload: Mapping[str, Any]) -> Mapping[str, Any]:
    """The acting user: `member.user` in a guild, `user` in a DM (or `author`)."""
    member = payload.get("member")
    if isinstance(member, Mapping) and isinstance(member.get("user"), Mapping):
        user: Mapping[str, Any] = member["user"]
        return user
    for key in ("user", "author"):
        value = payload.get(key)
        if isinstance(value, Mapping):
            return value
    return {}


@dataclass(frozen=True)
class DiscordMessage:
    """A person's message: where, who, the text, and whether it mentions the bot."""

    message_id: str
    channel_id: str
    guild_id: str | None
    author_id: str
    author_name: str | None
    text: str
    mention: bool
    #: the files attached to it (`channelkit.platforms.discord.files`)
    attachments: tuple[Attachment, ...] = ()


def strip_mentions(text: str, bot_id: str) -> str:
    """`text` without the bot's mention tokens (`<@id>`, `<@!id>`), trimmed."""
    return _MENTION.sub(lambda m: "" if m.group(1) == bot_id else m.group(0), text).strip()


def parse_message(data: Mapping[str, Any], bot_id: str) -> DiscordMessage | None:
    """A person's `MESSAGE_CREATE`, else None (bots, webhooks, system messages, the
    bot's own messages, messages without text or attachments). `mention` is true when
    the message mentions the bot or replies to one of its messages."""
    message_id = _text(data.get("id"))
    channel_id = _text(data.get("channel_id"))
    author = data.get("author")
    kind = data.get("type", 0)
    if message_id is None or channel_id is None or not isinstance(author, Mapping):
        return None
    if kind not in _PERSON_MESSAGE_TYPES or data.get("webhook_id") is not None:
        return None
    author_id = _text(author.get("id"))
    if author_id is None or author.get("bot") is True or author_id == bot_id:
        return None
    content = data.get("content")
    if not isinstance(content, str):
        return None
    mentioned = any(
        isinstance(user, Mapping) and user.get("id") == bot_id
        for user in data.get("mentions") or ()
    ) or any(m == bot_id for m in _MENTION.findall(content))
    replied = data.get("referenced_message")
    if isinstance(replied, Mapping) and isinstance(replied.get("author"), Mapping):
        mentioned = mentioned or replied["author"].get("id") == bot_id  # a reply to the bot
    text = strip_mentions(content, bot_id) if mentioned else content.strip()
    attachments = parse_attachments(data.get("attachments"))
    if not text and not attachments:
        return None
    name = _text(author.get("global_name")) or _text(author.get("username"))
    return DiscordMessage(
        message_id=message_id,
        channel_id=channel_id,
        guild_id=_text(data.get("guild_id")),
        author_id=author_id,
        author_name=name,
        text=text,
        mention=mentioned,
        attachments=attachments,
    )


@dataclass(frozen=True)
class ComponentClick:
    """A message component interaction (type 3) or a modal submit (type 5)."""

    interaction_id: str
    token: str
    kind: int
    custom_id: str
    user_id: str
    user_name: str | None
    channel_id: str | None
    guild_id: str | None
    message_id: str | None
    values: tuple[str, ...] = ()
    channel_type: int | None = None
    parent_id: str | None = None
    fields: Mapping[str, str] = field(default_factory=dict)
    #: the language the clicking person's Discord client uses (``"zh-CN"``, ``"de"``,
    #: ``"en-US"``; Discord sends it with every interaction but a PING), or None
    locale: str | None = None

    @property
    def is_modal(self) -> bool:
        """True for a modal submit."""
        return self.kind == 5


def modal_values(components: object) -> dict[str, str]:
    """The text inputs of a modal submit: `custom_id -> value` (action rows and labels)."""
    found: dict[str, str] = {}
    stack = list(components) if isinstance(components, list) else []
    while stack:
        item = stack.pop(0)
        if not isinstance(item, Mapping):
            continue
        if isinstance(item.get("custom_id"), str) and isinstance(item.get("value"), str):
            found[item["custom_id"]] = item["value"]
        for key in ("components", "component"):
            inner = item.get(key)
            if isinstance(inner, list):
                stack.extend(inner)
            elif isinstance(inner, Mapping):
                stack.append(inner)
    return found


def parse_component(payload: Mapping[str, Any]) -> ComponentClick | None:
    """A component click or modal submit, else None."""
    kind = payload.get("type")
    data = payload.get("data")
    interaction_id = _text(payload.get("id"))
    token = _text(payload.get("token"))
    if kind not in (3, 5) or not isinstance(data, Mapping):
        return None
    custom_id = _text(data.get("custom_id"))
    user = _user_of(payload)
    user_id = _text(user.get("id"))
    if interaction_id is None or token is None or custom_id is None or user_id is None:
        return None
    message = payload.get("message")
    channel = payload.get("channel")
    channel_id = _text(payload.get("channel_id"))
    channel_type: int | None = None
    parent_id: str | None = None
    if isinstance(channel, Mapping):
        channel_id = channel_id or _text(channel.get("id"))
        raw_type = channel.get("type")
        channel_type = raw_type if isinstance(raw_type, int) else None
        parent_id = _text(channel.get("parent_id"))
    values = data.get("values")
    return ComponentClick(
        interaction_id=interaction_id,
        token=token,
        kind=int(kind),
        custom_id=custom_id,
        user_id=user_id,
        user_name=_text(user.get("global_name")) or _text(user.get("username")),
        channel_id=channel_id,
        guild_id=_text(payload.get("guild_id")),
        message_id=_text(message.get("id")) if isinstance(message, Mapping) else None,
        values=tuple(v for v in values if isinstance(v, str)) if isinstance(values, list) else (),
        channel_type=channel_type,
        parent_id=parent_id,
        fields=modal_values(data.get("components")) if kind == 5 else {},
        locale=_text(payload.get("locale")),
    )


# -- interaction response bodies (the HTTP answer, or the Gateway interaction's callback) --
_EPHEMERAL = 1 << 6


def deferred_update() -> dict[str, Any]:
    """ACK a component click now; the message is edited afterwards (type 6)."""
    return {"type": RESPONSE_DEFERRED_UPDATE_MESSAGE}


def ephemeral(text: str) -> dict[str, Any]:
    """Answer with a notice only the person who acted sees (type 4, flags 64)."""
    return {
        "type": RESPONSE_CHANNEL_MESSAGE,
        "data": {"content": text, "flags": _EPHEMERAL, "allowed_mentions": {"parse": []}},
    }


def clicker_texts(click: ComponentClick, texts_for: Callable[[str | None], Messages]) -> Messages:
    """The catalog texts for the person who clicked: their Discord client's language
    (the interaction's `locale`) when the catalog has it, else ``texts_for(user id)``
    (the language remembered for them, else the channel's ``locale``)."""
    locale = resolve_locale(click.locale)
    return messages(locale) if locale is not None else texts_for(click.user_id)


def modal(custom_id: str, title: str, inputs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Open a modal (type 9) with one action row per text input."""
    rows = [{"type": 1, "components": [dict(item)]} for item in inputs]
    return {
        "type": RESPONSE_MODAL,
        "data": {"custom_id": custom_id, "title": title[:45], "components": rows},
    }

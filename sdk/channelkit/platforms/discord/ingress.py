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
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from channelkit.errors import ConfigurationError
from channelkit.ingress import Headers, IngressRequest, IngressResponse, loads_json
from channelkit.platforms.common.replay import ReplayGuard, signed_headers_problem

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
    "TIMESTAMP_HEADER",
    "DiscordInteractions",
    "DiscordVerifier",
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

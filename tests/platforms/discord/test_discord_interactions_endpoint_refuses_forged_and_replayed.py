"""Discord's interactions endpoint: Ed25519 over timestamp + body with the application's
public key; a forged, stale or replayed request changes nothing; PING gets PONG."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest
from channelkit.errors import ConfigurationError
from channelkit.ingress import Headers, IngressRequest, IngressResponse
from channelkit.platforms.discord.ingress import (
    RESPONSE_DEFERRED_UPDATE_MESSAGE,
    SIGNATURE_WINDOW_S,
    DiscordInteractions,
    DiscordVerifier,
)
from channelkit.runtime.clock import FakeClock
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat


class App:
    def __init__(self) -> None:
        self.key = Ed25519PrivateKey.generate()
        self.public_hex = self.key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw).hex()
        self.clock = FakeClock()
        self.handled: list[Mapping[str, Any]] = []
        self.endpoint = DiscordInteractions(
            DiscordVerifier(self.public_hex, self.clock.time), self.on_interaction
        )

    def on_interaction(self, payload: Mapping[str, Any]) -> IngressResponse:
        self.handled.append(payload)
        return IngressResponse.json(200, {"type": RESPONSE_DEFERRED_UPDATE_MESSAGE})

    def request(
        self,
        payload: Any,
        *,
        at: float | None = None,
        key: Ed25519PrivateKey | None = None,
        body: bytes | None = None,
    ) -> IngressRequest:
        data = body if body is not None else json.dumps(payload).encode()
        timestamp = str(int(self.clock.time() if at is None else at))
        signature = (key or self.key).sign(timestamp.encode() + data).hex()
        headers = Headers({"x-signature-ed25519": signature, "x-signature-timestamp": timestamp})
        return IngressRequest("POST", "/discord/interactions", headers, data)


def component(custom_id: str = "ck:stop:1") -> dict[str, Any]:
    return {"type": 3, "id": "9001", "token": "t", "data": {"custom_id": custom_id}}


def test_ping_is_answered_with_pong() -> None:
    app = App()
    response = app.endpoint(app.request({"type": 1}))
    assert response.status == 200 and json.loads(response.body) == {"type": 1}
    assert app.handled == []


def test_a_verified_interaction_is_handed_on_once_and_its_replay_refused() -> None:
    app = App()
    request = app.request(component())
    first = app.endpoint(request)
    assert first.status == 200 and json.loads(first.body) == {"type": 6}
    again = app.endpoint(request)
    assert again.status == 401
    # the same signed bytes with the signature spelled in upper case: still a replay
    upper = Headers(
        {
            "X-Signature-Ed25519": request.headers["X-Signature-Ed25519"].upper(),
            "X-Signature-Timestamp": request.headers["X-Signature-Timestamp"],
        }
    )
    assert app.endpoint(IngressRequest("POST", "/", upper, request.body)).status == 401
    assert len(app.handled) == 1


def test_forged_requests_change_nothing() -> None:
    app = App()
    forger = Ed25519PrivateKey.generate()
    assert app.endpoint(app.request(component(), key=forger)).status == 401
    genuine = app.request(component())
    tampered = IngressRequest(
        "POST", "/", genuine.headers, genuine.body.replace(b"ck:stop:1", b"ck:stop:2")
    )
    assert app.endpoint(tampered).status == 401
    missing = IngressRequest("POST", "/", Headers({}), genuine.body)
    assert app.endpoint(missing).status == 401
    garbled = Headers({"X-Signature-Ed25519": "zz" * 64, "X-Signature-Timestamp": "１２３"})
    assert app.endpoint(IngressRequest("POST", "/", garbled, genuine.body)).status == 401
    assert app.endpoint(app.request({"type": 1}, key=forger)).status == 401  # PING too
    assert app.handled == []
    assert app.endpoint.counts["refused"] == 5
    # refusals did not use up the genuine request
    assert app.endpoint(genuine).status == 200 and len(app.handled) == 1


def test_a_timestamp_outside_the_window_is_refused() -> None:
    app = App()
    now = app.clock.time()
    assert app.endpoint(app.request(component(), at=now - SIGNATURE_WINDOW_S - 1)).status == 401
    assert app.endpoint(app.request(component(), at=now + SIGNATURE_WINDOW_S + 1)).status == 401
    assert app.endpoint(app.request(component(), at=now - SIGNATURE_WINDOW_S + 1)).status == 200


def test_malformed_bodies_and_unknown_types_are_400_after_verification() -> None:
    app = App()
    assert app.endpoint(app.request(None, body=b"{not json")).status == 400
    assert app.endpoint(app.request({"type": 42})).status == 400
    assert app.endpoint(app.request({"type": True})).status == 400
    assert app.handled == []


def test_a_bad_public_key_names_the_field() -> None:
    with pytest.raises(ConfigurationError, match="public_key"):
        DiscordVerifier("not-hex", FakeClock().time)


def test_without_cryptography_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "cryptography.hazmat.primitives.asymmetric.ed25519", None)
    with pytest.raises(ConfigurationError, match=r"channelkit\[discord\]"):
        DiscordVerifier("ab" * 32, FakeClock().time)


def test_header_names_are_case_insensitive_for_a_plain_dict() -> None:
    app = App()
    request = app.request(component())
    plain = {k.lower(): v for k, v in request.headers.items()}
    verifier = DiscordVerifier(app.public_hex, app.clock.time)
    assert verifier.verify(plain, request.body) is None
    assert verifier.verify(plain, request.body) == "signature already used"

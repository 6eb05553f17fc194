"""``channelkit playground --platform discord --ingress interactions``: the channel's
interactions endpoint, over real HTTP, answers the emulator's PING with PONG; a click
replayed as it was signed, or forged (the owner's Stop signed with another key), is
refused with 401 and changes nothing: the run goes on; the owner's real Stop stops it."""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from typing import Any

from channelkit.playground import Playground
from channelkit.playground.emulator import CallbackDelivery
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from playground_helpers import send, wait

LONG = 20.0
TEAMMATE = "70017001"


def stop_button(pg: Playground) -> str | None:
    """The id of the message showing a Stop button, or None."""
    for message_id, view in pg.emulator.state()["views"].items():
        if any((b["data"] or "").startswith("ck:stop:") for row in view["keyboard"] for b in row):
            return str(message_id)
    return None


def test_forged_or_replayed_clicks_change_nothing_and_ping_is_answered() -> None:
    with Playground(platform="discord", ingress="interactions", demo_delay=0.05) as pg:
        emulator: Any = pg.emulator
        sent: list[tuple[str, dict[str, str], bytes]] = []
        lock = threading.Lock()
        deliver = emulator.deliver

        def recording(url: str, headers: Mapping[str, str], body: bytes) -> CallbackDelivery:
            with lock:
                sent.append((url, dict(headers), body))
            return deliver(url, headers, body)  # type: ignore[no-any-return]

        emulator.deliver = recording
        assert emulator.gateway.wait_identified(LONG)

        ping = emulator.ping()
        assert (ping.status, json.loads(ping.body)) == (200, {"type": 1})

        send(pg, "long")
        message_id = wait(lambda: stop_button(pg), "the Stop button", LONG)
        # a teammate's Stop: a genuine, signed click that only earns a private notice
        assert emulator.card_action(message_id, "stop", user_id=TEAMMATE).status == 200
        assert [n["user"] for n in emulator.ephemerals()] == [TEAMMATE]
        url, headers, body = sent[-1]

        replayed = deliver(url, headers, body)
        assert replayed.status == 401

        payload = json.loads(body)
        payload["user"]["id"] = emulator.user_id  # as if the owner pressed Stop (a DM)
        forged_body = json.dumps(payload).encode()
        stamp = headers["X-Signature-Timestamp"]
        forged_key = Ed25519PrivateKey.generate()
        forged = {
            **headers,
            "X-Signature-Ed25519": forged_key.sign(stamp.encode() + forged_body).hex(),
        }
        assert deliver(url, forged, forged_body).status == 401
        tampered = deliver(url, headers, forged_body)  # the teammate's signature, changed body
        assert tampered.status == 401

        assert stop_button(pg) == message_id  # the run goes on
        assert [n["user"] for n in emulator.ephemerals()] == [TEAMMATE]  # nothing new

        assert emulator.card_action(message_id, "stop").status == 200  # the owner's own
        wait(lambda: stop_button(pg) is None, "the run to stop", LONG)
        assert pg.channel.wait_idle(LONG)

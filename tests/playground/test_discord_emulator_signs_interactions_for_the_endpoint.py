"""The Discord emulator's signed interactions against channelkit's interactions endpoint
(Ed25519 with the emulator's generated key pair): PING is answered PONG; a forged,
tampered, stale or replayed request is refused and changes nothing; a click's answer
(update in place, an ephemeral message, a modal) is applied as Discord applies it."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
import requests
from channelkit.ingress import Headers, IngressRequest, IngressResponse
from channelkit.platforms.discord.ingress import DiscordInteractions, DiscordVerifier
from channelkit.playground.discord import BOT_USER_ID, GROUP_CHANNEL, DiscordEmulator
from channelkit.playground.emulator import CallbackDelivery
from channelkit.playground.server import LocalServer
from channelkit.runtime.clock import FakeClock
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

TOKEN = "playground-discord-bot-token"
URL = "http://127.0.0.1:9/discord/interactions"  # never dialled: delivered in process


class Endpoint:
    """channelkit's endpoint fed by the emulator's deliver seam; it records what it
    handed on and answers with ``answer``."""

    def __init__(self, emulator: DiscordEmulator, clock: FakeClock) -> None:
        self.handled: list[Mapping[str, Any]] = []
        self.answer: dict[str, Any] = {"type": 6}
        self.lock = threading.Lock()
        verifier = DiscordVerifier(emulator.public_key, clock.time)
        self.route = DiscordInteractions(verifier, self.on_interaction)

    def on_interaction(self, payload: Mapping[str, Any]) -> IngressResponse:
        with self.lock:
            self.handled.append(payload)
        return IngressResponse.json(200, self.answer)

    def __call__(self, url: str, headers: Mapping[str, str], body: bytes) -> CallbackDelivery:
        request = IngressRequest("POST", "/discord/interactions", Headers(headers), body)
        response = self.route(request)
        response.run_after()
        return CallbackDelivery(response.status, response.body.decode("utf-8"))


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[DiscordEmulator, Endpoint, LocalServer, FakeClock]]:
    clock = FakeClock(wall_start=time.time())
    emulator = DiscordEmulator(
        bot_token=TOKEN, interactions_url=URL, ingress="interactions", clock=clock
    )
    endpoint = Endpoint(emulator, clock)
    emulator.deliver = endpoint
    server = LocalServer()
    emulator.base_url = server.url
    server.start(emulator)
    yield emulator, endpoint, server, clock
    emulator.close()
    server.stop()


@pytest.fixture
def rig(
    served: tuple[DiscordEmulator, Endpoint, LocalServer, FakeClock],
) -> tuple[DiscordEmulator, Endpoint, LocalServer, FakeClock]:
    emulator, endpoint, _, _ = served
    emulator.reset()
    endpoint.handled.clear()
    endpoint.answer = {"type": 6}
    return served


def post_message(server: LocalServer, body: dict[str, Any]) -> dict[str, Any]:
    response = requests.post(
        f"{server.url}/api/v10/channels/{GROUP_CHANNEL}/messages",
        json=body,
        headers={"Authorization": f"Bot {TOKEN}"},
        timeout=5,
    )
    assert response.status_code == 200, response.text
    return dict(response.json())


BUTTONS = {
    "content": "Pick one",
    "components": [
        {
            "type": 1,
            "components": [
                {"type": 2, "style": 1, "label": "Yes", "custom_id": "opaque-yes"},
                {"type": 2, "style": 4, "label": "Stop", "custom_id": "opaque-stop"},
            ],
        }
    ],
}


def test_ping_is_answered_pong(rig: Any) -> None:
    emulator, endpoint, _, _ = rig
    before = endpoint.route.counts.get("pings", 0)
    result = emulator.ping()
    assert result.status == 200
    assert json.loads(result.body) == {"type": 1}
    assert endpoint.route.counts["pings"] == before + 1
    assert endpoint.handled == []


def test_a_forged_tampered_stale_or_replayed_request_changes_nothing(rig: Any) -> None:
    emulator, endpoint, server, clock = rig
    message = post_message(server, BUTTONS)
    result = emulator.card_action(message["id"], "tap", {"data": "opaque-yes"})
    assert result.status == 200
    assert len(endpoint.handled) == 1
    payload = dict(endpoint.handled[0])
    body = json.dumps(payload).encode()
    stamp = str(int(clock.time()))

    forged_key = Ed25519PrivateKey.generate()
    forged = {
        "X-Signature-Ed25519": forged_key.sign(stamp.encode() + body).hex(),
        "X-Signature-Timestamp": stamp,
    }
    assert endpoint(URL, forged, body).status == 401

    signed = emulator.signed_headers(body)
    tampered = body.replace(b"opaque-yes", b"opaque-stop")
    assert endpoint(URL, signed, tampered).status == 401

    stale = emulator.signed_headers(body, timestamp=str(int(clock.time()) - 3600))
    assert endpoint(URL, stale, body).status == 401

    assert endpoint(URL, signed, body).status == 200  # first use of this signature
    assert endpoint(URL, signed, body).status == 401  # the same request again
    assert len(endpoint.handled) == 2  # the click, then the one fresh signed copy
    assert endpoint.route.counts["refused"] >= 4
    assert emulator.view(message["id"])["text"] == "Pick one"  # nothing changed


def test_an_update_answer_edits_the_clicked_message_in_place(rig: Any) -> None:
    emulator, endpoint, server, _ = rig
    message = post_message(server, BUTTONS)
    endpoint.answer = {"type": 7, "data": {"content": "Chosen: Yes", "components": []}}
    result = emulator.card_action(message["id"], "tap", {"data": "opaque-yes"})
    assert result.status == 200
    (clicked,) = endpoint.handled
    assert clicked["type"] == 3
    assert clicked["data"] == {"custom_id": "opaque-yes", "component_type": 2}
    assert clicked["member"]["user"]["id"] == emulator.user_id  # a guild channel
    assert clicked["message"]["id"] == message["id"]
    view = emulator.view(message["id"])
    assert view["text"] == "Chosen: Yes"
    assert view["keyboard"] == [] and view["state"] == "edited"
    (interaction,) = emulator.interactions()
    assert interaction["responded"] == 7


def test_an_ephemeral_answer_is_seen_by_the_clicker_alone(rig: Any) -> None:
    emulator, endpoint, server, _ = rig
    message = post_message(server, BUTTONS)
    endpoint.answer = {"type": 4, "data": {"content": "Only the owner can stop this.", "flags": 64}}
    result = emulator.card_action(message["id"], "stop", user_id="70017001")
    assert result.status == 200
    assert endpoint.handled[0]["data"]["custom_id"] == "opaque-stop"
    (notice,) = emulator.ephemerals()
    assert notice["user"] == "70017001"
    assert notice["text"] == "Only the owner can stop this."
    assert emulator.view(message["id"])["text"] == "Pick one"


def test_a_deferred_answer_then_followup_and_original_edit(rig: Any) -> None:
    emulator, endpoint, server, _ = rig
    message = post_message(server, BUTTONS)
    endpoint.answer = {"type": 5, "data": {"flags": 64}}
    assert emulator.card_action(message["id"], "tap", {"data": "opaque-yes"}).status == 200
    token = endpoint.handled[0]["token"]
    (thinking,) = emulator.ephemerals()
    assert "thinking" in thinking["text"]
    edited = requests.patch(
        f"{server.url}/api/v10/webhooks/{BOT_USER_ID}/{token}/messages/@original",
        json={"content": "Done thinking."},
        timeout=5,
    )
    assert edited.status_code == 200, edited.text
    followup = requests.post(
        f"{server.url}/api/v10/webhooks/{BOT_USER_ID}/{token}",
        json={"content": "One more thing.", "flags": 64},
        timeout=5,
    )
    assert followup.status_code == 200, followup.text
    assert [n["text"] for n in emulator.ephemerals()] == ["Done thinking.", "One more thing."]
    again = requests.post(
        f"{server.url}/api/v10/interactions/{endpoint.handled[0]['id']}/{token}/callback",
        json={"type": 6},
        timeout=5,
    )
    assert again.status_code == 400 and again.json()["code"] == 40060  # answered once


def test_a_modal_answer_opens_a_modal_whose_submit_is_a_modal_interaction(rig: Any) -> None:
    emulator, endpoint, server, _ = rig
    message = post_message(server, BUTTONS)
    endpoint.answer = {
        "type": 9,
        "data": {
            "custom_id": "opaque-modal",
            "title": "Other",
            "components": [
                {
                    "type": 1,
                    "components": [
                        {"type": 4, "custom_id": "opaque-text", "label": "Answer", "style": 2}
                    ],
                }
            ],
        },
    }
    assert emulator.card_action(message["id"], "tap", {"data": "opaque-yes"}).status == 200
    view = emulator.view(message["id"])
    assert view["modal"]["title"] == "Other" and "modal" in view["actions"]
    endpoint.answer = {"type": 7, "data": {"content": "Answered: blue", "components": []}}
    assert emulator.card_action(message["id"], "modal", {"opaque-text": "blue"}).status == 200
    submitted = endpoint.handled[-1]
    assert submitted["type"] == 5
    assert submitted["data"]["custom_id"] == "opaque-modal"
    assert submitted["data"]["components"][0]["components"][0]["value"] == "blue"
    view = emulator.view(message["id"])
    assert view["text"] == "Answered: blue" and view["modal"] is None

"""The Discord emulator's interactions carry the clicking person's client language as
``locale``, as Discord's do: ``default_locale`` ("en-US") unless ``set_locale()`` or
``POST /_emulator/locale`` gave that person another; a Stop button is found and shown
(``stopLabel``) in any language the SDK labels it in."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
import requests
from channelkit.core.catalog import CATALOG
from channelkit.playground.discord import GROUP_CHANNEL, DiscordEmulator
from channelkit.playground.emulator import CallbackDelivery
from channelkit.playground.server import LocalServer
from channelkit.runtime.clock import FakeClock

TOKEN = "playground-discord-bot-token"
URL = "http://127.0.0.1:9/discord/interactions"  # never dialled: delivered in process
STRANGER = "70017001"


class Recorder:
    """The bot's interactions endpoint: records each payload, answers a deferred update."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.payloads: list[Mapping[str, Any]] = []

    def __call__(self, url: str, headers: Mapping[str, str], body: bytes) -> CallbackDelivery:
        with self.lock:
            self.payloads.append(json.loads(body))
        return CallbackDelivery(200, json.dumps({"type": 6}))

    def last_locale(self) -> Any:
        with self.lock:
            return self.payloads[-1].get("locale")


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[DiscordEmulator, Recorder, LocalServer]]:
    clock = FakeClock(wall_start=time.time())
    emulator = DiscordEmulator(
        bot_token=TOKEN, interactions_url=URL, ingress="interactions", clock=clock
    )
    recorder = Recorder()
    emulator.deliver = recorder
    server = LocalServer()
    emulator.base_url = server.url
    server.start(emulator)
    yield emulator, recorder, server
    emulator.close()
    server.stop()


@pytest.fixture
def rig(
    served: tuple[DiscordEmulator, Recorder, LocalServer],
) -> tuple[DiscordEmulator, Recorder, LocalServer]:
    emulator, _, _ = served
    emulator.reset()
    emulator.default_locale = "en-US"
    return served


def _message(server: LocalServer, stop_label: str) -> str:
    body = {
        "content": "working",
        "components": [
            {
                "type": 1,
                "components": [
                    {"type": 2, "style": 4, "label": stop_label, "custom_id": "opaque-stop"}
                ],
            }
        ],
    }
    response = requests.post(
        f"{server.url}/api/v10/channels/{GROUP_CHANNEL}/messages",
        json=body,
        headers={"Authorization": f"Bot {TOKEN}"},
        timeout=5,
    )
    assert response.status_code == 200, response.text
    return str(response.json()["id"])


def _set_locale(server: LocalServer, body: dict[str, Any]) -> requests.Response:
    return requests.post(f"{server.url}/_emulator/locale", json=body, timeout=5)


def test_a_click_carries_the_persons_client_language(rig: Any) -> None:
    emulator, recorder, server = rig
    message = _message(server, "Stop")
    emulator.card_action(message, "tap", {"data": "opaque-stop"})
    assert recorder.last_locale() == "en-US"  # Discord's default client language
    assert _set_locale(server, {"userId": STRANGER, "locale": "de"}).status_code == 200
    emulator.card_action(message, "tap", {"data": "opaque-stop"}, user_id=STRANGER)
    assert recorder.last_locale() == "de"
    emulator.card_action(message, "tap", {"data": "opaque-stop"})
    assert recorder.last_locale() == "en-US"  # only that person's client changed
    emulator.default_locale = "zh-CN"  # the playground: people use the channel's language
    emulator.card_action(message, "tap", {"data": "opaque-stop"})
    assert recorder.last_locale() == "zh-CN"
    assert _set_locale(server, {"userId": STRANGER, "locale": None}).status_code == 200
    emulator.card_action(message, "tap", {"data": "opaque-stop"}, user_id=STRANGER)
    assert recorder.last_locale() == "zh-CN"


def test_a_bad_locale_request_names_its_field(rig: Any) -> None:
    _, _, server = rig
    missing = _set_locale(server, {"locale": "de"})
    assert missing.status_code == 400 and missing.json()["error"].startswith("userId:")
    blank = _set_locale(server, {"userId": STRANGER, "locale": " "})
    assert blank.status_code == 400 and blank.json()["error"].startswith("locale:")


def test_reset_forgets_the_peoples_languages(rig: Any) -> None:
    emulator, recorder, server = rig
    emulator.set_locale(STRANGER, "de")
    emulator.reset()
    message = _message(server, "Stop")
    emulator.card_action(message, "tap", {"data": "opaque-stop"}, user_id=STRANGER)
    assert recorder.last_locale() == "en-US"


@pytest.mark.parametrize("locale", ["zh-CN", "de"])
def test_a_stop_button_in_another_language_is_still_the_stop_button(rig: Any, locale: str) -> None:
    emulator, recorder, server = rig
    label = CATALOG[locale]["button.stop"]
    message = _message(server, label)
    view = emulator.view(message)
    assert view is not None and view["stopLabel"] == label and "stop" in view["actions"]
    emulator.card_action(message, "stop", user_id=STRANGER)
    with recorder.lock:
        assert recorder.payloads[-1]["data"]["custom_id"] == "opaque-stop"

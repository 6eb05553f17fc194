"""Telegram's command menu is registered once at start-up for every catalog language:
the default menu (no ``language_code``) in the channel's ``locale`` (English when not
set), then one ``setMyCommands`` with ``language_code`` ``zh`` and one with ``de``, each
with the catalog's descriptions in that language (issue 27). Over the Telegram emulator,
which records the menu of each ``language_code``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from channelkit.core.catalog import CATALOG
from channelkit.platforms.telegram.adapter import BOT_COMMANDS, MENU_LANGUAGES
from channelkit.playground import Playground, TelegramEmulator
from playground_helpers import calls, state

JSON = {"content-type": "application/json"}
NAMES = [name for name, _ in BOT_COMMANDS]


def _menu(locale: str) -> list[dict[str, str]]:
    return [{"command": n, "description": CATALOG[locale][f"menu.{n}"]} for n in NAMES]


def _menu_calls(pg: Playground) -> list[dict[str, Any]]:
    return [c["body"] for c in calls(pg) if c["path"].endswith("/setMyCommands")]


@pytest.fixture(scope="module")
def playground() -> Iterator[Playground]:
    with Playground(platform="telegram", demo_delay=0.01, ingress="webhook") as pg:
        yield pg


def test_startup_registers_the_default_menu_then_one_per_catalog_language(
    playground: Playground,
) -> None:
    assert MENU_LANGUAGES == ("zh", "de")
    bodies = _menu_calls(playground)
    assert [b.get("language_code") for b in bodies] == [None, "zh", "de"]
    assert bodies[0]["commands"] == _menu("en")
    menus = state(playground)["commandsByLanguage"]
    assert menus == {"zh": _menu("zh-CN"), "de": _menu("de")}
    assert state(playground)["commands"] == _menu("en")
    # the English menu is what it always was
    assert {"command": "cancel", "description": "Cancel the running request"} in _menu("en")


def test_the_default_menu_follows_the_channel_locale() -> None:
    with Playground(
        platform="telegram", demo_delay=0.01, ingress="webhook", channel_options={"locale": "de"}
    ) as pg:
        bodies = _menu_calls(pg)
        assert [b.get("language_code") for b in bodies] == [None, "zh", "de"]
        assert bodies[0]["commands"] == _menu("de")
        assert state(pg)["commands"] == _menu("de")


def test_the_emulator_refuses_a_language_code_that_is_no_iso_639_1_code() -> None:
    emulator = TelegramEmulator(bot_token="1:t")

    def post(language: object) -> Any:
        body = {"commands": [{"command": "help", "description": "x"}], "language_code": language}
        return emulator.handle_api(
            "POST", "/bot1:t/setMyCommands", {}, JSON, json.dumps(body).encode()
        )

    for bad in ("deu", "DE", "de-AT", 7):
        reply = post(bad)
        assert reply is not None and reply.status == 400, bad
        assert "language_code" in reply.payload["description"]
    assert emulator.state()["commandsByLanguage"] == {}
    assert post("de").status == 200
    assert emulator.state()["commandsByLanguage"] == {
        "de": [{"command": "help", "description": "x"}]
    }

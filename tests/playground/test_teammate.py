"""Only the person who started a run may stop it: a teammate's Stop over real HTTP."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import requests
from channelkit.playground import Playground
from playground_helpers import click, send, state, view, views, wait


@pytest.fixture(params=["dingtalk", "feishu"])
def playground(request: pytest.FixtureRequest) -> Iterator[Playground]:
    with Playground(demo_delay=0.01, platform=request.param) as pg:
        yield pg


def _running_card(pg: Playground) -> str:
    start = send(pg, "long")
    card = wait(
        lambda: next((v for v in views(pg)[start:] if v.get("actions") == ["stop"]), None),
        "a running card with Stop",
    )
    return str(card["id"])


def test_a_teammates_stop_is_refused_and_the_owner_still_stops(playground: Playground) -> None:
    pg = playground
    card_id = _running_card(pg)
    answer = click(pg, card_id, "stop", user_id="teammate")
    if pg.platform == "feishu":
        # Feishu answers the click itself with a warning toast
        assert json.loads(answer["body"])["toast"]["type"] == "warning"
    else:
        # DingTalk: one notice, sent through the outbound path
        wait(
            lambda: any(
                e["kind"] == "message" and "Only the task owner" in e.get("text", "")
                for e in state(pg)["timeline"]
            ),
            "the owner-only notice",
        )
    assert view(pg, card_id)["state"] == "running"
    assert view(pg, card_id)["actions"] == ["stop"]
    click(pg, card_id, "stop")
    wait(lambda: view(pg, card_id)["state"] == "stopped", "the owner's Stop")


def test_user_id_is_validated(playground: Playground) -> None:
    card_id = _running_card(playground)
    for bad in ("", "has space", "x" * 65, 7):
        response = requests.post(
            f"{playground.url}/_emulator/cards/{card_id}/action",
            json={"action": "stop", "userId": bad},
            timeout=5,
        )
        assert response.status_code == 400
        assert response.json()["error"].startswith("userId:")
    click(playground, card_id, "stop")

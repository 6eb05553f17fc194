"""The playground started in-process and driven over real HTTP, like the page does."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import requests
from channelkit.playground import Playground

STATUS = "675cde2f-f526-40cb-b828-f5b2b57b8b77.schema"


@pytest.fixture(scope="module")
def playground() -> Iterator[Playground]:
    with Playground(demo_delay=0.01) as pg:
        yield pg


def _wait(predicate: Callable[[], Any], what: str, timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def _state(pg: Playground) -> dict[str, Any]:
    response = requests.get(f"{pg.url}/_emulator/state", timeout=5)
    assert response.status_code == 200
    return dict(response.json())


def _cards(pg: Playground) -> list[dict[str, Any]]:
    state = _state(pg)
    return [state["views"][e["card"]] for e in state["timeline"] if e["kind"] == "card"]


def _send(pg: Playground, text: str) -> int:
    before = len(_cards(pg))
    response = requests.post(f"{pg.url}/_emulator/send", json={"text": text}, timeout=5)
    assert response.status_code == 200
    assert response.json()["status"] == 200  # the channel ACKed the signed robot callback
    return before


def _click_until(pg: Playground, card_id: str, action: str, until: str, form: Any = None) -> None:
    deadline = time.monotonic() + 10
    while True:
        response = requests.post(
            f"{pg.url}/_emulator/cards/{card_id}/action",
            json={"action": action, "form": form or {}},
            timeout=5,
        )
        assert response.status_code == 200 and response.json()["status"] == 200
        try:
            _wait(
                lambda: _state(pg)["views"][card_id]["state"] == until,
                f"{card_id} -> {until}",
                timeout=0.5,
            )
            return
        except AssertionError:
            if time.monotonic() > deadline:
                raise


def _new_card(pg: Playground, start: int, kind: str, state: str | None = None) -> dict[str, Any]:
    def find() -> dict[str, Any] | None:
        for card in _cards(pg)[start:]:
            if card["kind"] == kind and (state is None or card["state"] == state):
                return card
        return None

    return dict(_wait(find, f"a {kind} card ({state})"))


def test_page_and_static_files_are_served(playground: Playground) -> None:
    page = requests.get(f"{playground.url}/", timeout=5)
    assert page.status_code == 200 and "channelkit playground" in page.text
    js = requests.get(f"{playground.url}/static/playground.js", timeout=5)
    assert js.status_code == 200 and "javascript" in js.headers["Content-Type"]
    assert requests.get(f"{playground.url}/static/../app.py", timeout=5).status_code == 404
    assert requests.get(f"{playground.url}/healthz", timeout=5).json() == {"ok": True}


def test_full_conversation_reaches_every_card_state(playground: Playground) -> None:
    pg = playground
    start = _send(pg, "hello")
    question = _new_card(pg, start, "question", "pending")
    first = _cards(pg)[start]
    assert first["kind"] == "status" and first["state"] == "completed"
    assert "You wrote: **hello**" in first["content"]
    _click_until(pg, question["id"], "submit", "submitted", {"0": "Blue", "1": ["Cheese", "Basil"]})
    continuation = _wait(
        lambda: next(
            (
                c
                for c in _cards(pg)[start + 2 :]
                if c["kind"] == "status" and c["state"] == "completed"
            ),
            None,
        ),
        "the continuation card",
    )
    assert "You picked **Blue** and **Cheese, Basil**" in continuation["content"]

    # Stop on a long run
    start = _send(pg, "long")
    running = _new_card(pg, start, "status", "running")
    _wait(lambda: _state(pg)["views"][running["id"]]["actions"] == ["stop"], "the Stop button")
    _click_until(pg, running["id"], "stop", "stopped")
    stopped = _state(pg)["views"][running["id"]]
    assert stopped["statusLine"].startswith("Stopped · channelkit-demo · ")
    assert stopped["actions"] == []

    # cancel a question
    start = _send(pg, "again")
    question = _new_card(pg, start, "question", "pending")
    _click_until(pg, question["id"], "cancel", "cancelled")
    after = _new_card(pg, start + 2, "status", "completed")
    assert "No answers" in after["content"]

    # a failing run
    start = _send(pg, "fail")
    failed = _new_card(pg, start, "status", "failed")
    # the streaming close (isError) and the final instance update are two writes: wait
    # for the second before reading the status line
    _wait(
        lambda: _state(pg)["views"][failed["id"]]["statusLine"].startswith("Failed"),
        "the Failed status line",
    )

    states = {(c["kind"], c["state"]) for c in _cards(pg)}
    assert {
        ("status", "completed"),
        ("status", "stopped"),
        ("status", "failed"),
        ("question", "submitted"),
        ("question", "cancelled"),
    } <= states

    calls = requests.get(f"{pg.url}/_emulator/calls", timeout=5).json()["calls"]
    creates = [c for c in calls if c["path"] == "/v1.0/card/instances/createAndDeliver"]
    running_maps = [
        c["body"]["cardData"]["cardParamMap"]
        for c in creates
        if c["body"]["cardTemplateId"] == STATUS
    ]
    assert running_maps and all(m["flowStatus"] == "2" for m in running_maps)
    assert all(c["status"] == 200 for c in calls)
    since = calls[-1]["seq"]
    later = requests.get(f"{pg.url}/_emulator/calls?since={since}", timeout=5).json()["calls"]
    assert all(c["seq"] > since for c in later)
    callbacks = requests.get(f"{pg.url}/_emulator/callbacks", timeout=5).json()["callbacks"]
    assert {c["kind"] for c in callbacks} == {"robot", "card"}
    assert all(c["status"] == 200 for c in callbacks)


def test_emulator_input_validation(playground: Playground) -> None:
    url = playground.url
    assert requests.post(f"{url}/_emulator/send", json={"text": " "}, timeout=5).status_code == 400
    missing = requests.post(
        f"{url}/_emulator/cards/nope/action", json={"action": "stop"}, timeout=5
    )
    assert missing.status_code == 404
    state = requests.get(f"{url}/_emulator/state?since=999999&wait=0.05", timeout=5)
    assert state.status_code == 200

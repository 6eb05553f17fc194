"""Helpers for driving a running Playground over real HTTP, as the page does."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import requests
from channelkit.playground import Playground


def wait(
    predicate: Callable[[], Any],
    what: str,
    timeout: float = 10.0,
    tick: Callable[[], None] | None = None,
) -> Any:
    """Poll ``predicate`` until truthy; ``tick`` runs between polls (e.g. a clock step)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        if tick is not None:
            tick()
        time.sleep(0.01)


def state(pg: Playground) -> dict[str, Any]:
    response = requests.get(f"{pg.url}/_emulator/state", timeout=5)
    assert response.status_code == 200
    return dict(response.json())


def views(pg: Playground) -> list[dict[str, Any]]:
    """The views of the bot's cards/messages in timeline order."""
    current = state(pg)
    return [current["views"][e["card"]] for e in current["timeline"] if e["kind"] == "card"]


def calls(pg: Playground, since: int = 0) -> list[dict[str, Any]]:
    response = requests.get(f"{pg.url}/_emulator/calls?since={since}", timeout=5)
    assert response.status_code == 200
    return list(response.json()["calls"])


def callbacks(pg: Playground) -> list[dict[str, Any]]:
    response = requests.get(f"{pg.url}/_emulator/callbacks", timeout=5)
    assert response.status_code == 200
    return list(response.json()["callbacks"])


def send(pg: Playground, text: str) -> int:
    """The person sends ``text``; returns how many bot cards/messages existed before."""
    before = len(views(pg))
    response = requests.post(f"{pg.url}/_emulator/send", json={"text": text}, timeout=5)
    assert response.status_code == 200, response.text
    assert response.json()["status"] == 200, response.json()  # the channel ACKed it
    return before


def click(
    pg: Playground, card_id: str, action: str, form: Any = None, *, user_id: str | None = None
) -> dict[str, Any]:
    """The person clicks ``action`` on a card (``form``: answers or ``{"data": ...}``);
    ``user_id`` clicks as somebody else in the chat."""
    payload: dict[str, Any] = {"action": action, "form": form or {}}
    if user_id is not None:
        payload["userId"] = user_id
    response = requests.post(f"{pg.url}/_emulator/cards/{card_id}/action", json=payload, timeout=5)
    assert response.status_code == 200, response.text
    body = dict(response.json())
    assert body["status"] == 200, body
    return body


def new_view(
    pg: Playground,
    start: int,
    kind: str,
    state_: str | None = None,
    *,
    timeout: float = 10.0,
    tick: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """The first bot card/message after index ``start`` of ``kind`` (and state)."""

    def find() -> dict[str, Any] | None:
        for view in views(pg)[start:]:
            if view["kind"] == kind and (state_ is None or view["state"] == state_):
                return view
        return None

    return dict(wait(find, f"a {kind} view ({state_})", timeout, tick))


def view(pg: Playground, card_id: str) -> dict[str, Any]:
    return dict(state(pg)["views"][card_id])

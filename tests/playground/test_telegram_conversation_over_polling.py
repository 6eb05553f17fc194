"""The Telegram playground without a public URL: the channel long-polls ``getUpdates``.

``Playground(platform="telegram")`` defaults to polling: the SDK deletes the webhook,
polls the emulator, and every user message and button tap reaches it as a polled
``Update`` (``/_emulator/callbacks`` records ``transport: "polling"``). The demo
conversation (message -> inline-keyboard questions -> taps -> continuation) and
``/cancel`` behave exactly as over the webhook.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from channelkit.playground import Playground
from playground_helpers import callbacks, calls, click, send, state, view, views, wait

LONG = 20.0  # generous bound for a loaded 2-core CI machine


@pytest.fixture(scope="module")
def playground() -> Iterator[Playground]:
    with Playground(platform="telegram", demo_delay=0.01) as pg:
        yield pg


def _methods(recorded: list[dict[str, Any]]) -> list[str]:
    return [c["path"].rsplit("/", 1)[1] for c in recorded]


def _questions(pg: Playground, start: int) -> list[dict[str, Any]]:
    def find() -> list[dict[str, Any]] | None:
        pending = [v for v in views(pg)[start:] if v["state"] == "pending"]
        return pending if len(pending) == 2 else None

    return list(wait(find, "two question messages with inline keyboards", LONG))


def _tap(pg: Playground, message_id: str, text: str) -> None:
    current = view(pg, message_id)
    data = next(b["data"] for row in current["keyboard"] for b in row if b["text"].endswith(text))
    click(pg, message_id, "tap", {"data": data})
    wait(
        lambda: view(pg, message_id)["updates"] > current["updates"]
        or view(pg, message_id)["keyboard"] != current["keyboard"],
        f"the message to change after tapping {text}",
        LONG,
    )


def _all_fetched(pg: Playground) -> list[dict[str, Any]]:
    delivered = [c for c in callbacks(pg) if c["kind"] in ("message", "callback_query")]
    return delivered if delivered and all(c.get("fetched") for c in delivered) else []


def test_polling_is_the_default_and_the_webhook_is_deleted(playground: Playground) -> None:
    pg = playground
    assert pg.ingress == "polling"
    (connection,) = pg.channel.connections
    wait(lambda: connection.state().status == "connected", "the poller to connect", LONG)
    wait(lambda: "getUpdates" in _methods(calls(pg)), "a getUpdates call", LONG)
    methods = _methods(calls(pg))
    assert "setWebhook" not in methods
    assert methods.index("deleteWebhook") < methods.index("getUpdates")
    polls = [c for c in calls(pg) if c["path"].endswith("/getUpdates")]
    assert polls[0]["body"]["allowed_updates"] == ["message", "callback_query"]
    assert state(pg)["ingress"] == "polling" and state(pg)["webhook"] is None
    assert pg.channel.ingress_routes() == []  # no webhook route is mounted


def test_conversation_message_questions_taps_and_continuation(playground: Playground) -> None:
    pg = playground
    start = send(pg, "hello")
    first, second = _questions(pg, start)
    assert "Which color" in first["text"] and "Which toppings" in second["text"]
    _tap(pg, first["id"], "Blue")
    _tap(pg, second["id"], "Cheese")
    _tap(pg, second["id"], "Submit")
    final = wait(
        lambda: next((v for v in views(pg)[start + 2 :] if "You picked" in v["text"]), None),
        "the continuation message",
        LONG,
    )
    assert "<b>Blue</b>" in final["text"] and "<b>Cheese</b>" in final["text"]
    assert view(pg, first["id"])["text"].endswith("✅ Submitted: Blue")

    delivered = wait(lambda: _all_fetched(pg), "every update fetched by getUpdates", LONG)
    assert {c["transport"] for c in delivered} == {"polling"}
    assert [c["kind"] for c in delivered][:4] == [
        "message",
        "callback_query",
        "callback_query",
        "callback_query",
    ]
    taps = pg.emulator.callback_answers()  # type: ignore[attr-defined]
    assert len(taps) == 3 and all(t["answered"] for t in taps)  # each tap answered once
    # confirmed: the emulator keeps nothing the SDK has handed on
    wait(lambda: pg.emulator.pending_updates() == [], "every update confirmed", LONG)  # type: ignore[attr-defined]


def test_cancel_over_polling_cancels_the_waiting_questions(playground: Playground) -> None:
    pg = playground
    start = send(pg, "hello")
    first, second = _questions(pg, start)
    send(pg, "/cancel")

    def cancelled() -> bool:
        return all(
            view(pg, q["id"])["keyboard"] == [] and "Cancelled" in view(pg, q["id"])["text"]
            for q in (first, second)
        )

    wait(cancelled, "both questions cancelled", LONG)
    assert all(c["transport"] == "polling" for c in wait(lambda: _all_fetched(pg), "fetched", LONG))
    assert not pg.channel.pending_request_ids()


def test_close_stops_the_poller_at_once() -> None:
    pg = Playground(platform="telegram", demo_delay=0.01).start()
    try:
        (connection,) = pg.channel.connections
        wait(lambda: connection.state().status == "connected", "the poller to connect", LONG)
        emulator: Any = pg.emulator
        wait(lambda: emulator.waiting_polls() >= 1, "a long poll in progress", LONG)
    finally:
        began = time.monotonic()
        pg.close()  # the long poll (25 s) is cut: close does not wait for it
    assert time.monotonic() - began < 15.0
    assert connection.state().status == "stopped"
    assert connection._thread is not None and not connection._thread.is_alive()

"""The Feishu playground without a public URL: the channel's long connection.

``Playground(platform="feishu", ingress="websocket")``: the SDK asks the emulator's
``POST /callback/ws/endpoint`` for a WebSocket URL, connects to its gateway on
127.0.0.1, and every user message and card click arrives as a protobuf data frame
(``/_emulator/callbacks`` records ``transport: "websocket"``), ACKed on the socket (a
card click's ACK carries the toast). The demo conversation (message -> streamed card ->
form submitted -> continuation) and Stop behave exactly as over HTTP callbacks.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import requests
from channelkit.playground import Playground
from playground_helpers import callbacks, calls, click, new_view, send, state, view, views, wait

LONG = 20.0  # generous bound for a loaded 2-core CI machine


@pytest.fixture(scope="module")
def playground() -> Iterator[Playground]:
    with Playground(platform="feishu", ingress="websocket", demo_delay=0.01) as pg:
        yield pg


def _click_until(pg: Playground, card_id: str, action: str, until: str, form: object) -> None:
    for attempt in range(5):
        click(pg, card_id, action, form)
        try:
            wait(lambda: view(pg, card_id)["state"] == until, f"{card_id} -> {until}", 2.0)
            return
        except AssertionError:
            if attempt == 4:
                raise


def test_the_channel_connects_through_the_endpoint_and_mounts_no_routes(
    playground: Playground,
) -> None:
    pg = playground
    (connection,) = pg.channel.connections
    wait(lambda: connection.state().status == "connected", "the long connection", LONG)
    endpoint_calls = [c for c in calls(pg) if c["path"] == "/callback/ws/endpoint"]
    assert endpoint_calls and endpoint_calls[0]["method"] == "POST"
    assert endpoint_calls[0]["body"] == {"AppID": "cli_playground", "AppSecret": "***"}
    assert state(pg)["ingress"] == "websocket"
    assert pg.channel.ingress_routes() == []
    # the HTTP callback routes are not mounted: a POST there reaches no handler
    response = requests.post(f"{pg.url}/feishu/events", json={"type": "x"}, timeout=5)
    assert response.status_code == 404


def test_message_streamed_card_form_and_continuation_over_the_socket(
    playground: Playground,
) -> None:
    pg = playground
    start = send(pg, "hello")
    question = new_view(pg, start, "question", "pending", timeout=LONG)
    first = views(pg)[start]
    assert first["kind"] == "status" and first["state"] == "completed"
    assert "You wrote: **hello**" in first["content"]

    _click_until(pg, question["id"], "submit", "submitted", {"0": "Blue", "1": ["Cheese"]})
    continuation = new_view(pg, start + 2, "status", "completed", timeout=LONG)
    assert "You picked **Blue** and **Cheese**" in continuation["content"]
    assert view(pg, question["id"])["toast"]["type"] == "success"  # from the ACK's data

    delivered = callbacks(pg)
    assert {c["kind"] for c in delivered} == {"event", "card"}
    assert all(c["transport"] == "websocket" and c["status"] == 200 for c in delivered)
    assert all("url" not in c for c in delivered)


def test_stop_over_the_socket_cancels_exactly_its_run(playground: Playground) -> None:
    pg = playground
    before = {v["id"]: v["state"] for v in views(pg)}
    start = send(pg, "long")
    running = new_view(pg, start, "status", "running", timeout=LONG)
    wait(lambda: view(pg, running["id"])["actions"] == ["stop"], "the Stop button", LONG)
    _click_until(pg, running["id"], "stop", "stopped", None)
    stopped = view(pg, running["id"])
    assert stopped["statusLine"] == "Stopped" and stopped["actions"] == []
    # earlier cards keep their state: the Stop reached only its own run
    after = {v["id"]: v["state"] for v in views(pg)}
    assert {k: after[k] for k in before} == before
    # the next message runs normally
    start = send(pg, "hello")
    new_view(pg, start, "question", "pending", timeout=LONG)
    stops = [c for c in callbacks(pg) if c["kind"] == "card" and "stopped" in c["response"].lower()]
    assert len(stops) == 1 and stops[0]["transport"] == "websocket"
    card_writes = [c for c in calls(pg) if running["id"] in c["path"]]
    final = json.loads(card_writes[-1]["body"]["card"]["data"])
    assert "ck_stop" not in json.dumps(final)  # the finalized card has no Stop button

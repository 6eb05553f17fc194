"""The Slack playground over real HTTP, for both ingress modes: the Events API (signed
POSTs to ``/slack/events`` and ``/slack/interactivity``) and Socket Mode (envelopes over
the emulator's gateway, ACKed by the channel's connection).

The same conversation works over both: text -> a streamed segment -> the final answer; a
Block Kit form submitted -> the continuation; Stop by the run's owner cancels exactly
that run; a teammate's Stop gets an ephemeral notice and changes nothing. Socket Mode
survives its faults: a ``disconnect`` envelope (a new connection at once), garbage
frames (ignored), and it ACKs an envelope while the work it started is still blocked.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from channelkit.agents.function import FunctionAgent, Turn
from channelkit.playground import Playground
from playground_helpers import callbacks, calls, click, send, view, views, wait

LONG = 20.0  # generous bound for a loaded 2-core CI machine


@pytest.fixture(scope="module", params=["events", "socket"])
def playground(request: pytest.FixtureRequest) -> Iterator[Playground]:
    with Playground(platform="slack", ingress=request.param, demo_delay=0.03) as pg:
        if request.param == "socket":
            (connection,) = pg.channel.connections
            wait(lambda: connection.state().status == "connected", "Socket Mode", LONG)
        yield pg


def _methods(pg: Playground, since: int = 0) -> list[str]:
    return [c["path"].lstrip("/") for c in calls(pg, since)]


def _last_seq(pg: Playground) -> int:
    recorded = calls(pg)
    return int(recorded[-1]["seq"]) if recorded else 0


def _stop_control(pg: Playground, start: int) -> dict[str, Any]:
    def find() -> dict[str, Any] | None:
        return next((v for v in views(pg)[start:] if "stop" in v["actions"]), None)

    return dict(wait(find, "a live segment with a Stop button", LONG))


def _answer_form(pg: Playground, start: int) -> None:
    form = wait(
        lambda: next((v for v in views(pg)[start:] if v["kind"] == "question"), None),
        "the Block Kit form",
        LONG,
    )
    color, toppings = form["questions"]
    blue = next(o["value"] for o in color["options"] if o["text"] == "Blue")
    cheese = next(o["value"] for o in toppings["options"] if o["text"] == "Cheese")
    click(pg, form["id"], "submit", {color["name"]: blue, toppings["name"]: [cheese]})


def test_the_channel_receives_over_the_chosen_transport(playground: Playground) -> None:
    pg = playground
    send(pg, "hi")
    transports = {c["transport"] for c in callbacks(pg)}
    assert transports == {pg.ingress}
    if pg.ingress == "socket":
        assert pg.channel.ingress_routes() == []
        assert "apps.connections.open" in _methods(pg)
    else:
        assert pg.channel.connections == ()
    _answer_form(pg, 0)  # let the demo's run finish
    _wait_run_end(pg)


def _wait_run_end(pg: Playground) -> None:
    def ended() -> bool:
        stats = pg.channel.run_stats
        return not any(stats.values()) and not any(
            v.get("streaming") or "stop" in v["actions"] for v in views(pg)
        )

    wait(ended, "the run to end (no live segment)", LONG)


def test_text_streams_a_segment_then_the_form_answer_continues(playground: Playground) -> None:
    pg = playground
    wait(lambda: not pg.channel.pending_request_ids(), "no question waiting", LONG)
    since = _last_seq(pg)
    start = send(pg, "hello")
    _answer_form(pg, start)
    continuation = wait(
        lambda: next((v for v in views(pg)[start:] if "You picked" in v.get("text", "")), None),
        "the continuation after the form",
        LONG,
    )
    wait(lambda: not view(pg, continuation["id"])["streaming"], "the stream to stop", LONG)
    final = view(pg, continuation["id"])
    assert "**Blue** and **Cheese**" in final["text"]
    streamed = [c for c in calls(pg, since) if c["path"].endswith("Stream")]
    first = next(v for v in views(pg)[start:] if "You wrote: **hello**" in v.get("text", ""))
    assert "You wrote: **hello**" in first["text"] and not first["streaming"]
    opened = next(c for c in streamed if c["response"]["ts"] == first["id"])
    assert opened["path"] == "/chat.startStream"
    # shown while the agent was still typing: the stream opened with a part of the text
    assert len(opened["body"]["markdown_text"]) < len(first["text"])
    stops = [c for c in streamed if c["path"] == "/chat.stopStream"]
    assert first["id"] in [c["body"]["ts"] for c in stops]
    submitted = [v for v in views(pg)[start:] if v.get("text") == "Submitted"]
    assert len(submitted) == 1  # the form was updated in place
    _wait_run_end(pg)


def test_a_teammates_stop_gets_an_ephemeral_notice_and_the_owners_stop_cancels(
    playground: Playground,
) -> None:
    pg = playground
    wait(lambda: not pg.channel.pending_request_ids(), "no question waiting", LONG)
    start = send(pg, "long")
    control = _stop_control(pg, start)
    stream = next(v for v in views(pg)[start:] if v["streaming"])
    emulator: Any = pg.emulator
    notices_before = len(emulator.ephemerals())
    click(pg, control["id"], "stop", user_id="teammate")
    wait(lambda: len(emulator.ephemerals()) > notices_before, "the ephemeral notice", LONG)
    notice = emulator.ephemerals()[-1]
    assert notice["user"] == "teammate" and "Only the person" in notice["text"]
    assert view(pg, stream["id"])["streaming"]  # the run goes on
    click(pg, control["id"], "stop")
    wait(lambda: not view(pg, stream["id"])["streaming"], "the stream to stop", LONG)
    # the Stop button goes with its message's next update (right after the stream's stop)
    wait(lambda: "stop" not in view(pg, control["id"])["actions"], "the Stop button gone", LONG)
    _wait_run_end(pg)
    # exactly that run: the next message runs normally
    after = send(pg, "again")
    _answer_form(pg, after)
    wait(
        lambda: any("You picked" in v.get("text", "") for v in views(pg)[after:]),
        "the next run to continue",
        LONG,
    )


def test_a_disconnect_envelope_and_garbage_frames_are_survived() -> None:
    with Playground(platform="slack", ingress="socket", demo_delay=0.01) as pg:
        emulator: Any = pg.emulator
        gateway = emulator.gateway
        assert gateway.wait_connected(LONG)
        opens = gateway.counts.get("opens", 0)
        assert gateway.send_raw("this is not json {")
        assert gateway.send_raw('{"no": "envelope"}')
        assert gateway.disconnect()
        assert gateway.wait_connected(LONG, connections=2)
        assert gateway.counts["opens"] == opens + 1  # a new apps.connections.open URL
        socket = pg.channel.socket
        assert socket.counts["garbage"] == 1 and socket.counts["disconnects"] == 1
        start = send(pg, "after the reconnect")
        _answer_form(pg, start)
        assert {c["transport"] for c in callbacks(pg)} == {"socket"}


def test_socket_mode_acks_an_envelope_while_its_work_is_blocked() -> None:
    release = threading.Event()
    entered = threading.Event()

    def blocking(turn: Turn) -> str:
        entered.set()
        release.wait(LONG)
        return "released"

    agent = FunctionAgent(blocking, name="blocking")
    with Playground(platform="slack", ingress="socket", agent=agent) as pg:
        emulator: Any = pg.emulator
        assert emulator.gateway.wait_connected(LONG)
        _, delivery = emulator.send_user_message("block please")
        assert delivery.status == 200  # ACKed
        assert entered.wait(LONG)
        assert not release.is_set()  # the ACK came while the run was still blocked
        release.set()
        wait(
            lambda: any(v.get("text") == "released" for v in views(pg)),
            "the blocked run to answer",
            LONG,
        )
        agent.close()

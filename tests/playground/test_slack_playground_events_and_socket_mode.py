"""The Slack playground over real HTTP, for both ingress modes: the Events API (signed
POSTs to ``/slack/events`` and ``/slack/interactivity``) and Socket Mode (envelopes over
the emulator's gateway, ACKed by the channel's connection).

The same conversation works over both: text -> a streamed segment -> the final answer; a
Block Kit form submitted -> the continuation; Stop by the run's owner cancels exactly
that run; a teammate's Stop gets an ephemeral notice and changes nothing. Socket Mode
survives its faults: a ``disconnect`` envelope (a new connection at once), garbage
frames (ignored), and it ACKs an envelope while the work it started is still blocked.

The form's own sequences, over both modes, with an agent that asks before saying
anything (on a FakeClock, so the form's lifetime passes only when the test advances it):
answered -> the agent gets the answers and the form shows Submitted; Cancel -> the
agent's question is cancelled, the form shows Cancelled; unanswered -> the form ends
Expired and the agent's question ends (the channel settles it with the neutral cancel
its contract documents); a foreign user's Submit gets an ephemeral notice and changes
nothing, then the owner's answer goes through.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from channelkit.agents.function import FunctionAgent, QuestionError, Turn
from channelkit.playground import Playground
from channelkit.playground.demo import DEMO_QUESTIONS
from channelkit.runtime import FakeClock
from playground_helpers import callbacks, calls, click, send, view, views, wait

pytestmark = pytest.mark.slow  # many seconds of real time: its file starts first

LONG = 20.0  # generous bound for a loaded 2-core CI machine


@pytest.fixture(scope="module", params=["events", "socket"])
def playground(request: pytest.FixtureRequest) -> Iterator[Playground]:
    with Playground(platform="slack", ingress=request.param, demo_delay=0.03) as pg:
        # one channel for the whole module: its posts would soon wait a second each for
        # Slack's per-channel token; the pacing has its own contract test
        pg.channel.outbound_pacer.enabled = False
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


# -- the form's sequences: an agent that asks before saying anything -----------------------

FORM_LIFETIME = 270.0  # SlackConfig.question_timeout_s (the playground's default)


class _DirectAsker:
    """Asks the demo's two questions at once (no text before) and records the outcome:
    the answers, or the QuestionError that ended the question."""

    def __init__(self) -> None:
        self.outcomes: queue.Queue[dict[str, str] | QuestionError] = queue.Queue()

    def __call__(self, turn: Turn) -> str:
        try:
            answers = turn.ask(list(DEMO_QUESTIONS))
        except QuestionError as exc:
            self.outcomes.put(exc)
            return "No answers."
        self.outcomes.put(answers)
        return f"Got {answers.get('0')} and {answers.get('1')}."

    def outcome(self) -> dict[str, str] | QuestionError:
        return self.outcomes.get(timeout=LONG)


@dataclass
class _Asking:
    pg: Playground
    asker: _DirectAsker
    clock: FakeClock


@pytest.fixture(params=["events", "socket"])
def asking(request: pytest.FixtureRequest) -> Iterator[_Asking]:
    asker = _DirectAsker()
    agent = FunctionAgent(asker, question_timeout=600.0, name="direct-asker")
    clock = FakeClock(start=time.monotonic(), wall_start=time.time())
    try:
        with Playground(platform="slack", ingress=request.param, agent=agent, clock=clock) as pg:
            if request.param == "socket":
                (connection,) = pg.channel.connections
                wait(lambda: connection.state().status == "connected", "Socket Mode", LONG)
            yield _Asking(pg, asker, clock)
            # the run's last flushes wait for the fake clock: move it until the channel
            # is idle, so closing does not wait out its bound (10 s) for them
            deadline = time.monotonic() + LONG
            while not pg.channel.wait_idle(0.05) and time.monotonic() < deadline:
                clock.advance(0.25)
    finally:
        agent.close()


def _pending_form(pg: Playground, start: int) -> dict[str, Any]:
    """The form, once the channel holds it too: the emulator shows the message as soon as
    ``chat.postMessage`` answers, a moment before the channel registers the form and
    schedules its expiry (a click or a clock step in that moment would miss it)."""
    form = wait(
        lambda: next((v for v in views(pg)[start:] if v["kind"] == "question"), None),
        "the Block Kit form",
        LONG,
    )
    wait(lambda: _expiry_timer(pg, form["id"]), "the channel to hold the form", LONG)
    return dict(form)


def _expiry_timer(pg: Playground, form_id: str) -> Any:
    """The channel's expiry timer of the pending form posted as ``form_id`` (None until
    scheduled), from SlackQuestions' live forms."""
    forms = pg.channel.questions.live_forms()
    return next((f.timer for f in forms if f.ts == form_id and f.timer is not None), None)


def _choices(form: dict[str, Any], color: str, topping: str) -> dict[str, Any]:
    first, second = form["questions"]
    return {
        first["name"]: next(o["value"] for o in first["options"] if o["text"] == color),
        second["name"]: [next(o["value"] for o in second["options"] if o["text"] == topping)],
    }


def _terminal(pg: Playground, form_id: str, label: str) -> dict[str, Any]:
    """The form, updated in place to its terminal ``label`` (no inputs, no buttons)."""
    wait(lambda: view(pg, form_id).get("text") == label, f"the form to show {label}", LONG)
    shown = view(pg, form_id)
    assert shown["kind"] == "message" and shown["keyboard"] == []
    assert "submit" not in shown["actions"] and "cancel" not in shown["actions"]
    return shown


def _form_updates(pg: Playground, form_id: str) -> list[dict[str, Any]]:
    return [
        c["body"]
        for c in calls(pg)
        if c["path"] == "/chat.update" and c["body"].get("ts") == form_id
    ]


def test_a_direct_question_answered_reaches_the_agent_and_the_form_shows_submitted(
    asking: _Asking,
) -> None:
    pg, asker = asking.pg, asking.asker
    since = _last_seq(pg)
    start = send(pg, "ask me")
    form = _pending_form(pg, start)
    # the agent asked before saying anything: no output segment precedes the form
    assert [v["id"] for v in views(pg)[start:]] == [form["id"]]
    posted = [
        c for c in calls(pg, since) if c["path"] in ("/chat.postMessage", "/chat.startStream")
    ]
    assert [c["response"]["ts"] for c in posted] == [form["id"]]
    assert asker.outcomes.empty()
    click(pg, form["id"], "submit", _choices(form, "Blue", "Cheese"))
    assert asker.outcome() == {"0": "Blue", "1": "Cheese"}
    _terminal(pg, form["id"], "Submitted")
    (update,) = _form_updates(pg, form["id"])
    assert "Blue" in str(update["blocks"]) and "Cheese" in str(update["blocks"])
    wait(
        lambda: any("Got Blue and Cheese." in v.get("text", "") for v in views(pg)[start:]),
        "the agent's answer after the form",
        LONG,
        tick=lambda: asking.clock.advance(0.25),  # flushes run on the fake clock
    )
    assert not pg.channel.pending_request_ids()


def test_the_forms_cancel_button_cancels_the_agents_question(asking: _Asking) -> None:
    pg, asker = asking.pg, asking.asker
    start = send(pg, "ask me")
    form = _pending_form(pg, start)
    click(pg, form["id"], "cancel")
    outcome = asker.outcome()
    assert isinstance(outcome, QuestionError) and "cancelled" in str(outcome)
    _terminal(pg, form["id"], "Cancelled")
    wait(lambda: not pg.channel.pending_request_ids(), "no question waiting", LONG)
    assert asker.outcomes.empty()  # one outcome only
    assert len(_form_updates(pg, form["id"])) == 1  # the terminal state is set once


def test_an_unanswered_form_expires_and_so_does_the_agents_question(asking: _Asking) -> None:
    pg, asker, clock = asking.pg, asking.asker, asking.clock
    start = send(pg, "ask me")
    form = _pending_form(pg, start)
    assert _expiry_timer(pg, form["id"]).when == pytest.approx(clock.now() + FORM_LIFETIME)
    clock.advance(FORM_LIFETIME - 5)
    with pytest.raises(queue.Empty):  # not before its lifetime
        asker.outcomes.get(timeout=0.2)
    assert view(pg, form["id"])["kind"] == "question"
    clock.advance(6)
    outcome = asker.outcome()
    # the form is finalized Expired first; the agent's ask then ends with the channel's
    # neutral cancel (core's documented settlement of an expired request)
    assert isinstance(outcome, QuestionError)
    _terminal(pg, form["id"], "Expired")
    wait(lambda: not pg.channel.pending_request_ids(), "no question waiting", LONG)
    assert len(_form_updates(pg, form["id"])) == 1


def test_a_foreign_users_submit_is_refused_then_the_owners_answer_works(
    asking: _Asking,
) -> None:
    pg, asker = asking.pg, asking.asker
    emulator: Any = pg.emulator
    start = send(pg, "ask me")
    form = _pending_form(pg, start)
    click(pg, form["id"], "submit", _choices(form, "Red", "Olives"), user_id="teammate")
    wait(lambda: emulator.ephemerals(), "the ephemeral notice", LONG)
    (notice,) = emulator.ephemerals()
    assert notice["user"] == "teammate" and "Only the person who asked" in notice["text"]
    # nothing changed: the form still waits, the agent still waits, no update was sent
    assert view(pg, form["id"])["kind"] == "question"
    assert view(pg, form["id"])["actions"] == ["submit", "cancel"]
    assert asker.outcomes.empty() and _form_updates(pg, form["id"]) == []
    assert pg.channel.pending_request_ids()
    click(pg, form["id"], "submit", _choices(form, "Blue", "Cheese"))
    assert asker.outcome() == {"0": "Blue", "1": "Cheese"}
    _terminal(pg, form["id"], "Submitted")
    (update,) = _form_updates(pg, form["id"])
    assert "Blue" in str(update["blocks"]) and "Red" not in str(update["blocks"])
    assert len(emulator.ephemerals()) == 1  # the owner got no notice

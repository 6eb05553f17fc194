"""A DingTalk conversation in Stream mode: every user input is a CALLBACK frame.

On the emulator's gateway: a robot message starts a run (status card), the question card
is submitted over the stream, the continuation card completes; Stop over the stream
cancels exactly its run; every CALLBACK frame is ACKed (with its messageId) before the
responder runs, even when the responder blocks.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from channelkit.agents.function import Question, Turn
from channelkit.testing import wait_until
from stream_env import WAIT, StreamEnv

STATUS_TEMPLATE = "675cde2f-f526-40cb-b828-f5b2b57b8b77.schema"


class QuestionAgent:
    """Says a sentence, asks, then blocks in the responder until released."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.env: StreamEnv | None = None

    def __call__(self, turn: Turn) -> str:
        turn.say("Checking the deployment plan. ")
        answers = turn.ask([Question("Which region?", ["Beijing", "Shanghai"], header="Region")])
        assert self.env is not None
        self.env.record("responder", str(answers["0"]))
        assert self.release.wait(WAIT), "the test never released the responder"
        return f"Deploying to {answers['0']}."


@pytest.fixture
def question_env() -> Iterator[tuple[StreamEnv, QuestionAgent]]:
    agent = QuestionAgent()
    env = StreamEnv(agent)
    agent.env = env
    try:
        yield env, agent
    finally:
        agent.release.set()
        env.close()


def _pending_question(env: StreamEnv) -> dict[str, Any] | None:
    return next(
        (v for v in env.views() if v["kind"] == "question" and v["state"] == "pending"), None
    )


def test_message_question_and_continuation_all_arrive_over_the_stream(
    question_env: tuple[StreamEnv, QuestionAgent],
) -> None:
    env, agent = question_env
    _, ack = env.emulator.send_user_message("deploy please")
    assert ack.status == 200 and json.loads(ack.body) == {"success": True}

    question = wait_until(lambda: _pending_question(env), WAIT, what="the question card")
    first = env.views()[0]
    assert first["kind"] == "status" and first["state"] == "completed"
    assert "Checking the deployment plan." in first["content"]

    # the submission is ACKed while the responder it wakes is still blocked
    answer = env.emulator.card_action(question["id"], "submit", {"0": "Shanghai"})
    assert answer.status == 200 and json.loads(answer.body) == {}
    submit = [c for c in env.emulator.callbacks() if c["kind"] == "card"][-1]
    wait_until(lambda: ("responder", "Shanghai") in env.log, WAIT, what="the responder")
    assert not agent.release.is_set()
    assert env.position(("ack", submit["messageId"])) < env.position(("responder", "Shanghai"))

    agent.release.set()

    def finished() -> list[dict[str, Any]] | None:
        views = env.views()
        return views if len(views) == 3 and views[2]["state"] == "completed" else None

    views = wait_until(finished, WAIT, what="the continuation card")
    assert [v["kind"] for v in views] == ["status", "question", "status"]
    assert views[1]["state"] == "submitted"
    assert "Deploying to Shanghai." in views[2]["content"]

    # every delivery went over the stream and was ACKed with its messageId
    callbacks = env.emulator.callbacks()
    assert [(c["kind"], c["transport"]) for c in callbacks] == [
        ("robot", "stream"),
        ("card", "stream"),
    ]
    acked = {ack.message_id: ack.code for ack in env.gateway.acks()}
    assert all(acked[c["messageId"]] == 200 for c in callbacks)
    # cards asked for Stream callbacks, with no route key
    creates = env.emulator.calls("/v1.0/card/instances/createAndDeliver")
    assert [c["body"]["cardTemplateId"] == STATUS_TEMPLATE for c in creates] == [
        True,
        False,
        True,
    ]
    for create in creates:
        assert create["body"]["callbackType"] == "STREAM"
        assert "callbackRouteKey" not in create["body"]
    # the channel mounts no web route in Stream mode
    assert env.channel.ingress_routes() == []


def test_robot_message_is_acked_before_a_blocking_run_starts() -> None:
    release = threading.Event()
    env_box: list[StreamEnv] = []

    def blocking(turn: Turn) -> str:
        env_box[0].record("responder", turn.text)
        assert release.wait(WAIT)
        return "done"

    env = StreamEnv(blocking)
    env_box.append(env)
    try:
        _, ack = env.emulator.send_user_message("hold on")
        assert ack.status == 200  # ACKed although the run blocks
        message_id = env.emulator.callbacks()[-1]["messageId"]
        wait_until(lambda: ("responder", "hold on") in env.log, WAIT, what="the run")
        assert env.position(("ack", message_id)) < env.position(("responder", "hold on"))
        assert not release.is_set()
    finally:
        release.set()
        env.close()


def test_stop_over_the_stream_cancels_exactly_its_run() -> None:
    release = threading.Event()
    outcomes: dict[str, str] = {}

    def working(turn: Turn) -> str:
        turn.say(f"working on {turn.text}. ")
        while not turn.cancelled and not release.wait(0.02):
            pass
        outcomes[turn.text] = "cancelled" if turn.cancelled else "finished"
        return f"{turn.text} done."

    env = StreamEnv(working)
    try:
        for user in ("alice", "bob"):
            env.emulator.user_id = user
            env.emulator.conversation_id = f"cid-{user}"
            _, ack = env.emulator.send_user_message(f"task of {user}")
            assert ack.status == 200

        def running_card(user: str) -> dict[str, Any] | None:
            for card_id, card in env.emulator.cards().items():
                view = env.emulator.state()["views"][card_id]
                if card["space"].endswith(f".{user}") and view["actions"] == ["stop"]:
                    return dict(view)
            return None

        alice = wait_until(lambda: running_card("alice"), WAIT, what="alice's Stop button")
        wait_until(lambda: running_card("bob"), WAIT, what="bob's Stop button")
        env.emulator.user_id = "alice"
        stopped = env.emulator.card_action(alice["id"], "stop")
        assert stopped.status == 200
        wait_until(
            lambda: env.emulator.state()["views"][alice["id"]]["state"] == "stopped",
            WAIT,
            what="alice's card to show stopped",
        )
        wait_until(lambda: "task of alice" in outcomes, WAIT, what="alice's run to end")
        assert outcomes == {"task of alice": "cancelled"}  # bob's run still works
        release.set()
        wait_until(lambda: "task of bob" in outcomes, WAIT, what="bob's run to end")
        assert outcomes["task of bob"] == "finished"
        transports = {(c["kind"], c["transport"]) for c in env.emulator.callbacks()}
        assert transports == {("robot", "stream"), ("card", "stream")}
    finally:
        release.set()
        env.close()

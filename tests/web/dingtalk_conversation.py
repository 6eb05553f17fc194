"""One DingTalk conversation driven through any web integration, asserted on the emulator.

inbound message -> streaming status card -> question card -> submit -> continuation
status card -> completion. The emulator runs as a real HTTP server (the SDK's clients
call it); its callbacks are delivered through whatever ``deliver`` the test installs.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from channelkit.agents.function import FunctionAgent, Question, Turn
from channelkit.platforms.dingtalk import DingtalkChannel, DingtalkConfig
from channelkit.playground import DingtalkEmulator
from channelkit.testing import wait_until as _wait_until

APP_KEY = "ding-test-app"
APP_SECRET = "ding-test-secret"
CARD_SECRET = "ding-card-secret"
STATUS_TEMPLATE = "675cde2f-f526-40cb-b828-f5b2b57b8b77.schema"
QUESTION_TEMPLATE = "c2a6355b-9724-4f7e-9653-d33fcb3311bb.schema"


def conversation_agent(turn: Turn) -> str:
    turn.say("Checking the ")
    turn.say("deployment plan.")
    answers = turn.ask(
        [
            Question("Which region?", ["Beijing", "Shanghai"], header="Region"),
            Question(
                "Which checks?", ["Lint", "Tests", "Docs"], header="Checks", multi_select=True
            ),
        ]
    )
    return f"Deploying to {answers['0']} after {answers['1']}."


def make_channel(api_base_url: str, executor: Any = None) -> DingtalkChannel:
    config = DingtalkConfig.from_dict(
        {
            "clientId": APP_KEY,
            "clientSecret": APP_SECRET,
            "cardCallbackSecret": CARD_SECRET,
            "cardCallbackRouteKey": "channelkit-test",
            "apiBaseUrl": api_base_url,
            "model": "test-model",
            "interactiveCards": {"enabled": True},
            "ingress": "http",
        }
    )
    agent = FunctionAgent(conversation_agent, question_timeout=30)
    return DingtalkChannel(config, agent, executor=executor)


def emulator_options() -> dict[str, Any]:
    return {"app_key": APP_KEY, "app_secret": APP_SECRET, "api_secret": CARD_SECRET}


def wait_until(predicate: Callable[[], Any], timeout: float = 10.0, what: str = "") -> Any:
    """:func:`channelkit.testing.wait_until` with this conversation's 10 s bound (it crosses
    a local HTTP server and worker threads)."""
    return _wait_until(predicate, timeout, what=what)


def click_until(
    emulator: DingtalkEmulator,
    card_id: str,
    action: str,
    form: dict[str, Any] | None = None,
    *,
    until: str,
    timeout: float = 10.0,
) -> None:
    """Click once and wait until the card reaches ``until``.

    One click is enough even when it lands before the SDK saw the ``createAndDeliver``
    answer: a valid owner callback claims the card it proves was delivered.
    """
    result = emulator.card_action(card_id, action, form)
    assert result.status == 200, result
    wait_until(
        lambda: emulator.state()["views"][card_id]["state"] == until,
        timeout=timeout,
        what=f"{card_id} to become {until}",
    )


def _views(emulator: DingtalkEmulator) -> list[dict[str, Any]]:
    state = emulator.state()
    return [state["views"][entry["card"]] for entry in state["timeline"] if entry["kind"] == "card"]


def drive_conversation(emulator: DingtalkEmulator) -> None:
    """Run the conversation and assert the recorded platform calls."""
    msg_id, ack = emulator.send_user_message("deploy please")
    assert ack.status == 200, ack
    assert json.loads(ack.body) == {"success": True}

    question = wait_until(
        lambda: next(
            (v for v in _views(emulator) if v["kind"] == "question" and v["state"] == "pending"),
            None,
        ),
        what="the question card",
    )
    first = _views(emulator)[0]
    assert first["kind"] == "status"
    # The first segment's card was finalized before the question card was created.
    assert first["state"] == "completed"
    assert "Checking the deployment plan." in first["content"]
    assert [q["name"] for q in question["questions"]] == ["0", "1"]
    assert [q["multi"] for q in question["questions"]] == [False, True]

    answers = {"0": "Shanghai", "1": ["Lint", "Tests"]}
    click_until(emulator, question["id"], "submit", answers, until="submitted")

    def finished() -> list[dict[str, Any]] | None:
        views = _views(emulator)
        if len(views) == 3 and views[2]["state"] == "completed":
            return views
        return None

    views = wait_until(finished, what="the continuation card to complete")
    assert [v["kind"] for v in views] == ["status", "question", "status"]
    assert views[1]["state"] == "submitted"
    assert "Deploying to Shanghai after Lint, Tests." in views[2]["content"]
    assert views[2]["statusLine"].startswith("Completed · test-model · ")

    # the emulator records a call once it has answered it, a moment after its view
    # changed: wait until the last card's terminal write (a final update, or a creation
    # already completed) is among the recorded calls
    def recorded() -> list[dict[str, Any]] | None:
        calls = emulator.calls()
        last = [
            c
            for c in calls
            if c["path"] in ("/v1.0/card/instances", "/v1.0/card/instances/createAndDeliver")
            and c["body"].get("outTrackId") == views[2]["id"]
            and c["body"]["cardData"]["cardParamMap"].get("flowStatus") == "3"
        ]
        return calls if last else None

    calls = wait_until(recorded, what="the last card's terminal write to be recorded")
    paths = [(c["method"], c["path"]) for c in calls]
    assert paths[0] == ("POST", "/v1.0/oauth2/accessToken")
    assert all(c["status"] == 200 for c in calls), [c for c in calls if c["status"] != 200]
    creates = [c for c in calls if c["path"] == "/v1.0/card/instances/createAndDeliver"]
    templates = [c["body"]["cardTemplateId"] for c in creates]
    assert templates == [STATUS_TEMPLATE, QUESTION_TEMPLATE, STATUS_TEMPLATE], templates
    for create in creates:
        assert create["body"]["callbackType"] == "HTTP"
        assert create["body"]["openSpaceId"] == f"dtv1.card//IM_ROBOT.{emulator.user_id}"
    # a status card goes out running (Stop on) and streams, or, when its segment ended
    # before the card went out (a busy queue), it is created once, already completed
    statuses = [
        c["body"]["cardData"]["cardParamMap"]
        for c in creates
        if c["body"]["cardTemplateId"] == STATUS_TEMPLATE
    ]
    running = [p for p in statuses if p["flowStatus"] == "2"]
    finished = [p for p in statuses if p["flowStatus"] == "3"]
    assert len(running) + len(finished) == 2
    assert all(p["stop_action"] == "true" for p in running)
    assert all(p["stop_action"] == "false" and p["content"] for p in finished)
    streams = [c["body"] for c in calls if c["path"] == "/v1.0/card/streaming"]
    assert all(s["isFull"] is True for s in streams)
    # one closed stream per running card, and one terminal update for it
    assert sum(1 for s in streams if s["isFinalize"]) == len(running)
    updates = [c["body"] for c in calls if c["path"] == "/v1.0/card/instances"]
    finals = [u for u in updates if u["cardData"]["cardParamMap"].get("flowStatus") == "3"]
    assert len(finals) == len(running)
    assert any(u["cardData"]["cardParamMap"].get("card_status") == "submitted" for u in updates)
    # the secret never appears in the recorded calls
    assert APP_SECRET not in json.dumps(calls)
    # the eye reaction is attached while the run is live and recalled when it ends (with
    # status cards on too); the recall is the run's last hook, so wait for it
    wait_until(lambda: emulator.reactions(msg_id) == [])
    assert any(c["path"] == "/v1.0/robot/emotion/reply" for c in calls)

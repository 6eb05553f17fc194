"""Clicking a presentation's button on the playground reaches the agent as the platform
delivers it, over real HTTP as the page does it: the demo agent answers ``present`` with
a presentation, the person taps "Say hello" and the agent receives its value as a
message from that person in that chat (Telegram: a ``callback_query`` carrying the
button's ``callback_data``, answered; Feishu: a ``card.action.trigger`` carrying the
button's value). A command button runs as a command (Telegram's ``/help`` is answered by
the channel, the agent never sees it); a link button is a link on the page."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from channelkit.agents import FunctionAgent, Turn
from channelkit.platforms.telegram.adapter import HELP_TEXT
from channelkit.playground import Playground
from channelkit.playground.demo import DemoAgent
from playground_helpers import wait

VALUE = "hello from a button"


class _Recorder:
    """The demo agent (no pacing), remembering every text it was given."""

    def __init__(self) -> None:
        self.demo = DemoAgent(delay=0.0, long_seconds=1.0)
        self.lock = threading.Lock()
        self.texts: list[str] = []
        self.sessions: list[str] = []

    def __call__(self, turn: Turn) -> str | None:
        with self.lock:
            self.texts.append(turn.text)
            self.sessions.append(turn.session_id)
        return self.demo(turn)

    def seen(self) -> list[str]:
        with self.lock:
            return list(self.texts)


@pytest.fixture
def recorder() -> _Recorder:
    return _Recorder()


@pytest.fixture
def playground(request: pytest.FixtureRequest, recorder: _Recorder) -> Iterator[Playground]:
    agent = FunctionAgent(recorder, question_timeout=600.0)
    try:
        with Playground(platform=request.param, agent=agent) as pg:
            yield pg
    finally:
        recorder.demo.stop()
        agent.close()


def _state(pg: Playground) -> dict[str, Any]:
    response = requests.get(f"{pg.url}/_emulator/state", timeout=5)
    assert response.status_code == 200
    return dict(response.json())


def _say(pg: Playground, text: str) -> None:
    response = requests.post(f"{pg.url}/_emulator/send", json={"text": text}, timeout=5)
    assert response.status_code == 200 and response.json()["status"] == 200, response.text


def _presentation(pg: Playground) -> dict[str, Any]:
    """The view of the bot message / card showing the demo presentation's buttons."""

    def find() -> dict[str, Any] | None:
        for view in _state(pg)["views"].values():
            labels = [b["text"] for row in view.get("keyboard") or [] for b in row]
            if "Say hello" in labels:
                return dict(view)
        return None

    return dict(wait(find, "the presentation with its buttons"))


def _button(view: dict[str, Any], label: str) -> dict[str, Any]:
    return next(b for row in view["keyboard"] for b in row if b["text"] == label)


def _tap(pg: Playground, view: dict[str, Any], label: str) -> dict[str, Any]:
    """What the page posts when the person clicks ``label``."""
    data = _button(view, label)["data"]
    assert data, f"{label} is not a callback button"
    response = requests.post(
        f"{pg.url}/_emulator/cards/{view['id']}/action",
        json={"action": "tap", "form": {"data": data}},
        timeout=5,
    )
    assert response.status_code == 200, response.text
    body = dict(response.json())
    assert body["status"] == 200, body  # the channel ACKed the callback
    return body


@pytest.mark.parametrize("playground", ["telegram", "feishu"], indirect=True)
def test_a_value_button_reaches_the_agent_as_the_persons_message(
    playground: Playground, recorder: _Recorder
) -> None:
    _say(playground, "present")
    view = _presentation(playground)
    assert _button(view, "Open docs")["url"] == "https://example.com/channelkit/docs"
    assert _button(view, "Open docs")["data"] is None  # a link: the page opens it
    _tap(playground, view, "Say hello")
    wait(lambda: VALUE in recorder.seen(), "the agent to receive the button's value")
    assert recorder.seen() == ["present", VALUE]

    # the agent's answer to it shows in the chat (the demo repeats what it was sent)
    def answered() -> bool:
        views = _state(playground)["views"].values()
        shown = [str(v.get("text") or v.get("content") or "") for v in views]
        return any("You wrote:" in text and VALUE in text for text in shown)

    wait(answered, "the agent's answer")
    callbacks = requests.get(f"{playground.url}/_emulator/callbacks", timeout=5).json()
    kinds = [c["kind"] for c in callbacks["callbacks"]]
    assert ("callback_query" if playground.platform == "telegram" else "card") in kinds


@pytest.mark.parametrize("playground", ["telegram"], indirect=True)
def test_telegram_tap_is_answered_and_sent_by_the_tapping_person(
    playground: Playground, recorder: _Recorder
) -> None:
    emulator: Any = playground.emulator
    _say(playground, "present")
    view = _presentation(playground)
    data = _button(view, "Say hello")["data"]
    assert data == VALUE  # callback_data is the button's value
    _tap(playground, view, "Say hello")
    wait(lambda: VALUE in recorder.seen(), "the agent to receive the value")
    answered = wait(
        lambda: [q for q in emulator.callback_answers() if q["data"] == VALUE and q["answered"]],
        "answerCallbackQuery for the tap",
    )
    assert answered[0]["answer"] == ""  # no "not recognised" toast
    # the same conversation as the typed "present", owned by the person who tapped
    assert len(set(recorder.sessions)) == 1
    target = playground.channel.target_for_session(recorder.sessions[-1])
    assert target.sender_id == str(emulator.user_id)
    assert target.chat_id == str(emulator.chat_id)


@pytest.mark.parametrize("playground", ["telegram"], indirect=True)
def test_telegram_command_button_runs_the_command_not_a_turn(
    playground: Playground, recorder: _Recorder
) -> None:
    _say(playground, "present")
    view = _presentation(playground)
    assert _button(view, "Help")["data"] == "tgcmd:/help"
    _tap(playground, view, "Help")

    def help_shown() -> bool:
        views = _state(playground)["views"].values()
        return any(v.get("text") == HELP_TEXT for v in views)

    wait(help_shown, "the /help answer")
    assert playground.channel.wait_idle(10)
    assert recorder.seen() == ["present"]  # the command never became a turn


@pytest.mark.parametrize("playground", ["feishu"], indirect=True)
def test_feishu_command_button_arrives_as_the_command_text(
    playground: Playground, recorder: _Recorder
) -> None:
    _say(playground, "present")
    view = _presentation(playground)
    _tap(playground, view, "Help")
    wait(lambda: "/help" in recorder.seen(), "the command to reach the channel")
    assert recorder.seen() == ["present", "/help"]  # /help is no channel command here

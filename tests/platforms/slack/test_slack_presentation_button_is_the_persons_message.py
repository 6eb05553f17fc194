"""Slack: a click on a presentation's value (or command) button, or a choice in its
select, reaches the agent as the clicking person's message in the clicked message's
conversation; a link button's click changes nothing. Clicks go through the channel's
`InteractionRouter` after the ACK."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import pytest
import requests_mock as rm
from channelkit.platforms.common.router import InteractionRouter
from channelkit.platforms.slack.ingress import action_interaction
from channelkit.testing import ScriptedBridge

from tests.platforms.slack.slack_env import CHANNEL, DM, OWNER, STRANGER, TEAM, Env, mock_web_api


@pytest.fixture
def mocker() -> Iterator[rm.Mocker]:
    with rm.Mocker() as m:
        yield m


def click(
    env: Env,
    action: dict[str, Any],
    *,
    channel: str = DM,
    user: str = OWNER,
    thread_ts: str | None = None,
    message_ts: str = "1700000000.000042",
) -> Any:
    message: dict[str, Any] = {"ts": message_ts, "text": "Buttons"}
    if thread_ts is not None:
        message["thread_ts"] = thread_ts
    payload = {
        "type": "block_actions",
        "team": {"id": TEAM},
        "user": {"id": user, "name": "someone"},
        "channel": {"id": channel},
        "container": {"type": "message", "message_ts": message_ts},
        "message": message,
        "actions": [action],
    }
    body = urlencode({"payload": json.dumps(payload)}).encode()
    return env.respond(env.request(body, form=True))


def test_a_value_button_is_the_persons_message_in_the_same_dm_conversation(rt, mocker) -> None:  # type: ignore[no-untyped-def]
    mock_web_api(mocker)
    bridge = ScriptedBridge([])
    env = Env(rt, mocker, bridge)
    assert isinstance(env.channel.action_router, InteractionRouter)
    env.message("present")
    env.settle()
    response = click(env, {"action_id": "ck:button:1:1", "value": "Say hello"})
    assert response.status == 200 and json.loads(response.body) == {}
    assert len(bridge.prompts) == 1  # nothing ran before the ACK
    response.run_after()
    assert bridge.wait_prompt(2)
    env.settle()
    (first_session, _), (session, text) = bridge.prompts
    assert text == "Say hello" and session == first_session
    env.channel.close(2.0)


def test_a_click_in_a_channel_thread_is_the_clickers_message_in_that_thread(rt, mocker) -> None:  # type: ignore[no-untyped-def]
    mock_web_api(mocker)
    bridge = ScriptedBridge([])
    env = Env(rt, mocker, bridge)
    env.message("present", channel=CHANNEL)  # a mention starts a thread at its ts
    env.settle()
    first_session = bridge.prompts[0][0]
    first = env.channel.target_for_session(first_session)
    assert first is not None and first.thread_id
    thread = first.thread_id
    select = {"action_id": "ck:select:2", "selected_option": {"value": "plan B"}}
    click(env, select, channel=CHANNEL, thread_ts=thread).run_after()
    assert bridge.wait_prompt(2)
    env.settle()
    assert bridge.prompts[1] == (first_session, "plan B")  # the owner's conversation
    # not a built-in command (those are answered by the channel): it reaches the agent
    command = {"action_id": "ck:command:0:0", "value": "/report"}
    click(env, command, channel=CHANNEL, user=STRANGER, thread_ts=thread).run_after()
    assert bridge.wait_prompt(3)
    env.settle()
    session, text = bridge.prompts[2]
    target = env.channel.target_for_session(session)
    assert text == "/report" and target is not None
    assert (target.sender_id, target.chat_id, target.thread_id) == (STRANGER, CHANNEL, thread)
    assert target.is_group
    env.channel.close(2.0)


def test_a_link_button_click_and_an_unknown_action_change_nothing(rt, mocker) -> None:  # type: ignore[no-untyped-def]
    mock_web_api(mocker)
    bridge = ScriptedBridge([])
    env = Env(rt, mocker, bridge)
    for action in (
        {"action_id": "ck:link:0:0", "url": "https://example.test"},
        {"action_id": "someone-elses:button", "value": "x"},
        {"action_id": "ck:button:0:1", "value": "   "},
    ):
        response = click(env, action)
        assert response.status == 200
        response.run_after()
    env.settle()
    assert bridge.prompts == []
    assert env.calls() == []
    env.channel.close(2.0)


def test_a_hostile_payload_reads_as_an_interaction_without_raising() -> None:
    hostile = {"user": "U1", "channel": ["C1"], "message": 3, "container": None}
    interaction = action_interaction({"action_id": "ck:button:0:0", "value": 7}, hostile)
    assert interaction.kind == "button" and interaction.token == "ck:button:0:0"
    assert interaction.actor_id is None and interaction.chat_id is None
    assert interaction.thread_id is None and interaction.value is None

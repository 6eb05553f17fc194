"""Discord approval buttons: a tool permission as one button per agent option, pressed
once and only by the run's owner, the message edited in place to the outcome; the
typing indicator pauses while the person decides."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import requests_mock as rm
from channelkit.platforms.discord.approvals import TEXT_NOT_OWNER
from channelkit.testing import ScriptedBridge, ask, final, permission_request, wait_until

from tests.platforms.discord.discord_env import DM, STRANGER, Env

ALLOW = {"outcome": {"outcome": "selected", "optionId": "proceed_once"}}
REJECT = {"outcome": {"outcome": "selected", "optionId": "cancel"}}


@pytest.fixture
def env(rt) -> Iterator[Env]:  # type: ignore[no-untyped-def]
    steps = [ask(lambda s: permission_request("req-1", s, title="Write notes.txt")), final("ok")]
    with rm.Mocker() as m:
        e = Env(rt, m, ScriptedBridge(steps))
        yield e
        e.channel.close(2.0)


def _prompt(env: Env) -> tuple[str, dict[str, Any], dict[str, str]]:
    """The prompt's message id, body and buttons (label -> custom_id)."""
    wait_until(
        lambda: [r for r in env.channel.approvals.registry.records() if r.message_id],
        what="the prompt is live",
    )
    (record,) = env.channel.approvals.registry.records()
    body = next(p for p in env.posts(DM) if p.get("components"))
    buttons = {b["label"]: b["custom_id"] for row in body["components"] for b in row["components"]}
    return str(record.message_id), body, buttons


def _response(env: Env, before: int) -> dict[str, Any]:
    wait_until(lambda: len(env.callbacks()) > before, what="the interaction response")
    return env.callbacks()[before]


def test_the_prompt_has_one_opaque_button_per_option_and_allow_answers_once(env: Env) -> None:
    env.message("write it")
    message_id, body, buttons = _prompt(env)
    assert "Write notes.txt" in body["content"] and "/approve" in body["content"]
    assert list(buttons) == ["Always Allow in project", "Allow", "Reject"]
    assert all("req-1" not in custom_id for custom_id in buttons.values())
    assert env.channel.typing.is_paused(DM)  # the person's turn: no typing
    env.click_over_gateway(buttons["Allow"], message_id=message_id)
    assert _response(env, 0) == {"type": 6}
    env.click_over_gateway(buttons["Allow"], message_id=message_id)  # a double click
    assert _response(env, 1) == {"type": 6}
    env.rt.settle()
    assert env.bridge.responses == [("req-1", ALLOW)]
    edits = [b for mid, b in env.edits() if mid == message_id]
    assert len(edits) == 1 and edits[0]["components"] == []
    assert edits[0]["content"].endswith("✅ Allow")
    assert "/approve" not in edits[0]["content"]


def test_a_stranger_is_told_privately_and_nothing_changes(env: Env) -> None:
    env.message("write it")
    message_id, _, buttons = _prompt(env)
    env.click_over_gateway(buttons["Allow"], message_id=message_id, user=STRANGER)
    notice = _response(env, 0)
    assert notice["type"] == 4 and notice["data"]["flags"] == 64
    assert notice["data"]["content"] == TEXT_NOT_OWNER
    env.rt.pool.wait_idle(2.0)
    assert env.bridge.responses == [] and env.edits() == []
    env.click_over_gateway(buttons["Reject"], message_id=message_id)
    env.rt.settle()
    assert env.bridge.responses == [("req-1", REJECT)]
    assert [b for mid, b in env.edits() if mid == message_id][-1]["content"].endswith("❌ Reject")


def test_an_answer_typed_as_a_command_settles_the_buttons_too(env: Env) -> None:
    env.message("write it")
    message_id, _, buttons = _prompt(env)
    env.message("/deny")
    env.rt.settle()
    assert env.bridge.responses and env.bridge.responses[0][0] == "req-1"
    assert [b for mid, b in env.edits() if mid == message_id][-1]["components"] == []
    env.click_over_gateway(buttons["Allow"], message_id=message_id)  # too late
    env.rt.settle()
    assert len(env.bridge.responses) == 1

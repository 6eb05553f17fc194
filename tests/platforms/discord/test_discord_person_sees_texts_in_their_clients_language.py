"""Discord shows its own texts in the channel's ``locale`` and, per person, in the
language their Discord client tells: every interaction carries the clicking person's
``locale`` (``"zh-CN"``, ``"de"``, ``"en-US"``). The answer to a click is in it; the
channel remembers it for that person for what they read later (the failure notice,
their Stop button and marks, their forms). A language the catalog lacks gets the
channel's ``locale`` (issue 27)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import requests_mock as rm
from channelkit.core.catalog import CATALOG
from channelkit.testing import (
    ScriptedBridge,
    ask,
    chunk,
    fail,
    gate,
    permission_request,
    question_request,
    wait_until,
)

from tests.platforms._shared import question
from tests.platforms.discord.discord_env import DM, OWNER, STRANGER, Env

ZH, DE, EN = CATALOG["zh-CN"], CATALOG["de"], CATALOG["en"]


@pytest.fixture
def mocker() -> Iterator[rm.Mocker]:
    with rm.Mocker() as m:
        yield m


def _notice(env: Env, custom_id: str, **kw: Any) -> str:
    """The ephemeral notice a signed click gets as the endpoint's answer."""
    response = env.click_over_http(custom_id, **kw)
    body = json.loads(response.body)
    assert body["type"] == 4 and body["data"]["flags"] == 64, body
    return str(body["data"]["content"])


def _stop_button(env: Env, index: int = 0) -> dict[str, Any]:
    """The Stop button of the ``index``-th message posted in the DM."""
    wait_until(lambda: len(env.posts(DM)) > index, what="the segment's message")
    return dict(env.posts(DM)[index]["components"][0]["components"][0])


def test_a_chinese_channel_labels_stop_refuses_and_marks_stopped_in_chinese(
    rt: Any, mocker: rm.Mocker
) -> None:
    release = threading.Event()
    env = Env(
        rt,
        mocker,
        ScriptedBridge([chunk("working"), gate(release)]),
        ingress="interactions",
        locale="zh-CN",
    )
    env.message("go")
    stop = _stop_button(env)
    assert stop["label"] == ZH["button.stop"]
    # a stranger whose client tells no language: the channel's locale
    assert _notice(env, stop["custom_id"], user=STRANGER) == ZH["owner.stop"]
    assert env.bridge.cancels == []
    env.click_over_http(stop["custom_id"])  # the owner stops it
    env.rt.settle()
    assert len(env.bridge.cancels) == 1
    assert env.edits()[-1][1]["content"].endswith(ZH["discord.stopped"])
    env.channel.close(2.0)


def test_a_german_clients_clicks_are_answered_in_german_in_a_chinese_channel(
    rt: Any, mocker: rm.Mocker
) -> None:
    release = threading.Event()
    steps = [
        chunk("working"),
        gate(release),
        ask(lambda s: permission_request("req-1", s, title="Write notes.txt")),
    ]
    env = Env(rt, mocker, ScriptedBridge(steps), ingress="interactions", locale="zh-CN")
    env.message("go")
    stop = _stop_button(env)
    assert _notice(env, stop["custom_id"], user=STRANGER, locale="de") == DE["owner.stop"]
    assert _notice(env, stop["custom_id"], user=STRANGER, locale="en-US") == EN["owner.stop"]
    release.set()  # the run goes on to ask for a permission
    wait_until(
        lambda: [r for r in env.channel.approvals.registry.records() if r.message_id],
        what="the approval buttons",
    )
    body = next(p for p in env.posts(DM) if "ck:ap:" in json.dumps(p.get("components")))
    allow = body["components"][0]["components"][0]["custom_id"]
    assert _notice(env, allow, user=STRANGER, locale="de") == DE["owner.answer"]
    assert _notice(env, allow, user=STRANGER, locale="zh-CN") == ZH["owner.answer"]
    env.click_over_http(allow)  # the owner answers; the run ends
    env.rt.settle()
    assert [r for r, _ in env.bridge.responses] == ["req-1"]
    env.channel.close(2.0)


def test_a_german_clients_question_form_notices_and_modal_are_german(
    rt: Any, mocker: rm.Mocker
) -> None:
    steps = [ask(lambda s: question_request("req-1", s, [question("Env", ["Prod", "Dev"])]))]
    env = Env(rt, mocker, ScriptedBridge(steps), ingress="interactions", locale="zh-CN")
    env.message("deploy")
    wait_until(
        lambda: [f for f in env.channel.questions.live_forms() if f.message_id],
        what="the form is live",
    )
    form = env.posts(DM)[-1]
    buttons = form["components"][-1]["components"]
    # the owner has not clicked yet: the form is in the channel's language
    assert [b["label"] for b in buttons] == [
        ZH["button.submit"],
        ZH["question.other_typed"],
        ZH["button.cancel"],
    ]
    submit, other, cancel = (b["custom_id"] for b in buttons)
    assert _notice(env, submit, user=STRANGER, locale="de") == DE["owner.answer_asked"]
    assert _notice(env, submit, locale="de") == DE["question.answer_all"]  # nothing chosen
    modal = json.loads(env.click_over_http(other, locale="de").body)
    assert modal["type"] == 9 and modal["data"]["title"] == DE["question.your_answer"]
    env.click_over_http(cancel, locale="de")
    env.rt.settle()
    # the form ends in its owner's language, which their clicks told
    assert env.edits()[-1][1]["content"].endswith(f"*{DE['label.cancelled_plain']}*")
    env.channel.close(2.0)


def test_a_persons_client_language_is_remembered_for_what_they_read_later(
    rt: Any, mocker: rm.Mocker
) -> None:
    release = threading.Event()

    def script(session_id: str, text: str) -> list[Any]:
        if text == "first":
            return [fail(RuntimeError("boom"))]
        return [chunk("working"), gate(release)]

    env = Env(rt, mocker, ScriptedBridge(script), ingress="interactions", locale="zh-CN")
    env.click_over_http("ck:not-ours", locale="de-AT")  # any click tells the language
    env.message("first")
    wait_until(lambda: env.posts(DM), what="the failure notice")
    assert env.posts(DM)[0]["content"] == DE["notice.failed"]
    env.message("second")
    assert _stop_button(env, 1)["label"] == DE["button.stop"]
    # the person's client now speaks a language the catalog lacks: the channel's again
    env.click_over_http("ck:not-ours", locale="fr")
    assert env.channel.messages_for(OWNER).locale == "zh-CN"
    release.set()
    env.rt.settle()
    env.channel.close(2.0)

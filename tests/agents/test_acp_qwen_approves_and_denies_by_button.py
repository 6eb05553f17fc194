"""A real agent's tool permission answered by a button, on every platform that has them.

The Qwen Code CLI (``qwen --acp --approval-mode default``: file edits ask first) runs
against the scripted OpenAI-compatible server, whose model calls Qwen Code's own
``write_file`` tool. Qwen Code asks permission (``session/request_permission`` with its
own options: always allow, allow, reject); the platform adapter shows them as buttons on
the playground's emulator over real HTTP; the person presses one:

* **Allow**: the ``proceed_once`` option reaches Qwen Code once, the file is written, the
  model sees the tool's success and the message/card shows ``✅ Allow``;
* **Reject**: the ``cancel`` option reaches Qwen Code once, nothing is written, Qwen Code
  ends the turn (it does not call the model back after a rejection) and the message/card
  shows ``❌ Reject``.

DingTalk shows the options as a single-choice question card: the option is submitted
(the card ends submitted, naming it) and its Cancel button denies. The last test fails
when a playground platform gains approval buttons without joining ``PLATFORMS``.

One scripted server and one Qwen Code process serve the whole module: each test gets a
new playground (a new channel, hence a new ACP session) on the shared bridge, and its own
file name, so the tests stay independent while starting Qwen Code once.
"""

from __future__ import annotations

import html
import importlib.util
import itertools
import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from acp_testkit import QWEN_UNAVAILABLE, qwen_command, qwen_env
from channelkit.playground import PLATFORMS as PLAYGROUND_PLATFORMS
from channelkit.playground import Playground
from channelkit.testing import wait_until
from openai_script_server import (
    ScriptedOpenAIServer,
    ScriptedReply,
    ToolCall,
    _content_text,
    _tool_names,
    last_message,
    tool_result_text,
)

pytestmark = pytest.mark.acp_real

TURN_TIMEOUT = 90.0  # a real agent's turn on a loaded 2-core CI machine
EDIT_TIMEOUT = 30.0  # the message/card edited after the answer
CALL_PREFIX = "call_write_"
DONE = "The file is written."
ALLOW, REJECT = "Allow", "Reject"
ALLOW_ANSWER = {"outcome": {"outcome": "selected", "optionId": "proceed_once"}}
REJECT_ANSWER = {"outcome": {"outcome": "selected", "optionId": "cancel"}}
ASK = re.compile(r"write the notes file (\S+?)\.?$", re.IGNORECASE)

#: The platforms whose adapters show a tool permission as buttons.
PLATFORMS = ("telegram", "feishu", "slack", "dingtalk", "discord")
#: The platforms whose approval message names the /approve and /deny commands too
#: (DingTalk's question card template has no room for the hint).
COMMAND_HINTS = ("telegram", "feishu", "slack")


def write_flow(workdir: Path) -> Callable[[Mapping[str, Any]], ScriptedReply]:
    """The model writes ``workdir/<name>`` when asked to "write the notes file <name>",
    then reports the tool's result; anything else (side queries) gets ``ok``."""
    counter = itertools.count(1)

    def respond(body: Mapping[str, Any]) -> ScriptedReply:
        result = tool_result_text(body, CALL_PREFIX)
        if result is not None:
            return ScriptedReply(chunks=(DONE,))
        message = last_message(body)
        match = ASK.search(_content_text(message.get("content")).strip())
        if message.get("role") == "user" and match and "write_file" in _tool_names(body):
            name = match.group(1)
            arguments = {"file_path": str(workdir / name), "content": content_of(name)}
            call = ToolCall("write_file", arguments, f"{CALL_PREFIX}{next(counter)}")
            return ScriptedReply(chunks=("Writing the notes file.",), tool_call=call)
        return ScriptedReply(chunks=("ok",))

    return respond


def content_of(name: str) -> str:
    return f"notes for {name}, written after a button press\n"


@dataclass
class Qwen:
    """The module's scripted model server and the Qwen Code bridge driving it."""

    server: ScriptedOpenAIServer
    bridge: Any
    workdir: Path


@pytest.fixture(scope="module")
def qwen(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Qwen]:
    if QWEN_UNAVAILABLE:
        pytest.skip(f"real ACP agent unavailable: {QWEN_UNAVAILABLE}")
    from channelkit.agents.acp import AcpBridge

    root = tmp_path_factory.mktemp("qwen-approvals")
    workdir = root / "work"
    workdir.mkdir()
    with ScriptedOpenAIServer(responder=write_flow(workdir)) as server:
        bridge = AcpBridge(
            [*qwen_command(server.base_url, server.model), "--approval-mode", "default"],
            cwd=workdir,
            env=qwen_env(root / "home"),
            request_timeout=60.0,
            prompt_timeout=120.0,
            close_timeout=5.0,
        )
        try:
            yield Qwen(server, bridge, workdir)
        finally:
            bridge.close()


@pytest.fixture
def answers(qwen: Qwen) -> Iterator[list[Any]]:
    """Every permission answer the bridge sends to Qwen Code during the test."""
    recorded: list[Any] = []
    respond = qwen.bridge.respond_to_permission

    def recording(request_id: str, response: Any) -> bool:
        recorded.append(response)
        return bool(respond(request_id, response))

    qwen.bridge.respond_to_permission = recording
    try:
        yield recorded
    finally:
        del qwen.bridge.respond_to_permission  # back to the class's method


_names = itertools.count(1)


def _file_name(platform: str, answer: str) -> str:
    return f"{platform}-{answer}-{next(_names)}.txt"


# -- reading the emulator -------------------------------------------------------------------


def _views(pg: Playground) -> list[dict[str, Any]]:
    state = pg.emulator.state()
    return [state["views"][e["card"]] for e in state["timeline"] if e["kind"] == "card"]


def _choices(view: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The options offered on a message/card: its buttons (``text``, ``data``), or the
    options of a pending single-choice question card (``text``, ``value``, ``name``)."""
    if view.get("keyboard"):
        return [dict(b) for row in view["keyboard"] for b in row if b.get("data")]
    questions = view.get("questions") or []
    if view.get("kind") == "question" and view.get("state") == "pending" and len(questions) == 1:
        question = questions[0]
        if not question.get("multi"):
            return [{**o, "name": question["name"]} for o in question.get("options") or []]
    return []


def _labels(view: Mapping[str, Any]) -> list[str]:
    return [str(choice.get("text")) for choice in _choices(view)]


def _text(view: Mapping[str, Any]) -> str:
    """The visible text (Feishu markdown escapes punctuation as HTML entities)."""
    parts = [view.get(key) for key in ("title", "text", "content", "desc", "statusLine")]
    return html.unescape("\n".join(str(part) for part in parts if part))


def _approval(pg: Playground) -> dict[str, Any] | None:
    """The message/card offering the permission's options as buttons."""
    for view in _views(pg):
        if REJECT in _labels(view) and ALLOW in _labels(view):
            return view
    return None


def _chat(pg: Playground) -> str:
    return json.dumps(_views(pg), ensure_ascii=False, indent=1)[-6000:]


def _wait(
    pg: Playground, qwen: Qwen, predicate: Callable[[], Any], what: str, timeout: float
) -> Any:
    """``wait_until``; on timeout the failure shows the chat and Qwen Code's stderr."""
    try:
        return wait_until(predicate, timeout, 0.05, what=what)
    except AssertionError as exc:
        stderr = "\n".join(qwen.bridge.stderr_tail()[-40:])
        raise AssertionError(
            f"{exc}\n--- the chat ({pg.platform}):\n{_chat(pg)}\n--- qwen stderr:\n{stderr}"
        ) from None


def _ask_permission(pg: Playground, qwen: Qwen, name: str) -> dict[str, Any]:
    """The person asks for the file; returns the approval message/card once shown."""
    _, ack = pg.emulator.send_user_message(f"Please write the notes file {name}")
    assert ack.status == 200, ack.body
    prompt = _wait(pg, qwen, lambda: _approval(pg), "the approval buttons", TURN_TIMEOUT)
    labels = _labels(prompt)
    # Qwen Code's own options, in its order: allow always ..., allow, reject
    assert labels.index(ALLOW) < labels.index(REJECT) and len(labels) >= 3, labels
    if pg.platform in COMMAND_HINTS:  # the text commands keep working alongside
        assert "/approve" in _text(prompt), _text(prompt)
    return dict(prompt)


def _press(pg: Playground, prompt: Mapping[str, Any], label: str) -> None:
    """The person presses the button labelled ``label``, as the page does (its data)."""
    choice = next(c for c in _choices(prompt) if c.get("text") == label)
    if "data" in choice:  # a button
        result = pg.emulator.card_action(prompt["id"], "tap", {"data": choice["data"]})
    else:  # an option of a single-choice question card, submitted
        result = pg.emulator.card_action(prompt["id"], "submit", {choice["name"]: choice["value"]})
    assert result.status == 200, result.body


def _shows(pg: Playground, qwen: Qwen, prompt: Mapping[str, Any], label: str) -> dict[str, Any]:
    """The approval message/card once it shows the choice ``label`` (``✅ Allow``,
    ``❌ Reject``) in place of its buttons; a question card (DingTalk) is submitted
    naming the chosen option."""
    mark, _, option = label.partition(" ")

    def edited() -> dict[str, Any] | None:
        view = pg.emulator.state()["views"][prompt["id"]]
        if view.get("kind") == "question":
            done = view["state"] == "submitted" and _text(view).rstrip().endswith(f": {option}")
        else:
            done = not _labels(view) and label in _text(view).splitlines()[-1]
        return dict(view) if done else None

    return dict(_wait(pg, qwen, edited, f"the buttons replaced by {label!r}", EDIT_TIMEOUT))


def _tool_results(qwen: Qwen, name: str) -> list[str]:
    """The results of our write_file calls for ``name`` the model was sent."""
    calls = set()
    results = []
    for body in list(qwen.server.requests):
        for message in body.get("messages") or ():
            for call in message.get("tool_calls") or ():
                if name in str(call.get("function", {}).get("arguments")):
                    calls.add(call.get("id"))
            if message.get("role") == "tool" and message.get("tool_call_id") in calls:
                results.append(_content_text(message.get("content")))
    return results


# -- the tests ------------------------------------------------------------------------------


@pytest.mark.parametrize("platform", PLATFORMS)
def test_qwen_write_file_permission_is_approved_by_a_button(
    platform: str, qwen: Qwen, answers: list[Any]
) -> None:
    name = _file_name(platform, "allow")
    target = qwen.workdir / name
    with Playground(agent=qwen.bridge, model=qwen.server.model, platform=platform) as pg:
        prompt = _ask_permission(pg, qwen, name)
        assert "write_file" in _text(prompt) and name in _text(prompt), _text(prompt)
        assert not target.exists()  # nothing written before the press

        _press(pg, prompt, ALLOW)
        _wait(pg, qwen, target.exists, f"the written file {target}", TURN_TIMEOUT)
        assert target.read_text() == content_of(name)
        # the option id of the pressed button reached Qwen Code, once
        assert answers == [ALLOW_ANSWER]
        _shows(pg, qwen, prompt, f"✅ {ALLOW}")
        _wait(
            pg,
            qwen,
            lambda: any(DONE in _text(v) for v in _views(pg)),
            "the continuation after the tool ran",
            TURN_TIMEOUT,
        )
        assert answers == [ALLOW_ANSWER]  # still once
        results = _tool_results(qwen, name)
        assert results and "success" in results[-1].lower(), results


@pytest.mark.parametrize("platform", PLATFORMS)
def test_qwen_write_file_permission_denied_by_a_button_gets_its_reject_option(
    platform: str, qwen: Qwen, answers: list[Any]
) -> None:
    name = _file_name(platform, "reject")
    target = qwen.workdir / name
    with Playground(agent=qwen.bridge, model=qwen.server.model, platform=platform) as pg:
        prompt = _ask_permission(pg, qwen, name)

        _press(pg, prompt, REJECT)
        _wait(pg, qwen, lambda: answers, "the answer sent to Qwen Code", EDIT_TIMEOUT)
        assert answers == [REJECT_ANSWER]  # Qwen Code's own reject option, once
        _shows(pg, qwen, prompt, f"❌ {REJECT}")
        _wait(
            pg,
            qwen,
            lambda: not any(pg.channel.run_stats.values()),
            "the run to end after the rejection",
            TURN_TIMEOUT,
        )
        assert not target.exists()
        assert answers == [REJECT_ANSWER]
        assert not any(DONE in _text(v) for v in _views(pg))
        # Qwen Code does not call the model back with a rejected call's result; were it
        # to, the model would see the rejection, never a success
        rejected = _tool_results(qwen, name)
        assert not any("success" in r.lower() for r in rejected), rejected


def test_every_playground_platform_with_approval_buttons_is_exercised_here() -> None:
    """A platform whose adapter gains approval buttons must join ``PLATFORMS``."""
    with_buttons = {
        platform
        for platform in PLAYGROUND_PLATFORMS
        if importlib.util.find_spec(f"channelkit.platforms.{platform}.approvals") is not None
    }
    missing = sorted(with_buttons - set(PLATFORMS))
    assert not missing, f"approval buttons without a real-agent test here: {missing}"


def test_qwen_write_file_permission_denied_by_the_dingtalk_cancel_button_gets_its_reject_option(
    qwen: Qwen, answers: list[Any]
) -> None:
    """DingTalk's approval card is a question card: its Cancel button is a one-tap deny."""
    name = _file_name("dingtalk", "cancel")
    target = qwen.workdir / name
    with Playground(agent=qwen.bridge, model=qwen.server.model, platform="dingtalk") as pg:
        prompt = _ask_permission(pg, qwen, name)

        result = pg.emulator.card_action(prompt["id"], "cancel")
        assert result.status == 200, result.body
        _wait(pg, qwen, lambda: answers, "the answer sent to Qwen Code", EDIT_TIMEOUT)
        assert answers == [REJECT_ANSWER]  # Cancel selects Qwen Code's reject option
        _wait(
            pg,
            qwen,
            lambda: not any(pg.channel.run_stats.values()),
            "the run to end after the rejection",
            TURN_TIMEOUT,
        )

        def ended() -> dict[str, Any] | None:
            view = pg.emulator.state()["views"][prompt["id"]]
            return dict(view) if view["state"] != "pending" else None

        # the card's end is written on its own lane: it can land after the run ended
        card = _wait(pg, qwen, ended, "the card's end", EDIT_TIMEOUT)
        assert card["state"] == "cancelled" and not card["actions"], card  # shows the deny
        assert not target.exists()
        assert answers == [REJECT_ANSWER]

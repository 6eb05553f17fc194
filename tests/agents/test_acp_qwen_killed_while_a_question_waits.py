"""The real Qwen Code CLI is killed while its question or its tool approval waits on the
person, on each emulated platform it already runs on (the sibling of
``test_acp_qwen_killed_mid_run.py``).

The scripted model makes Qwen Code call its ``ask_user_question`` tool, or (with
``--approval-mode default``) its ``write_file`` tool, which asks permission first; once
the channel holds the question or the approval, the test kills the agent's whole process
group with SIGKILL. The question may end cancelled (or expired),
but the chat tells once that the run failed: DingTalk a "Failed, please retry." Markdown
message (the status card ended at the question), Feishu a card with the failed label,
Telegram the "Failed, please retry." message. Nothing is left waiting on the person.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from acp_testkit import QWEN_UNAVAILABLE, qwen_command, qwen_env
from channelkit.playground import Playground
from openai_script_server import (
    ScriptedOpenAIServer,
    ScriptedReply,
    ToolCall,
    _content_text,
    _tool_names,
    last_message,
    question_flow_responder,
)

pytestmark = [
    pytest.mark.acp_real,
    pytest.mark.skipif(
        QWEN_UNAVAILABLE is not None, reason=f"real ACP agent unavailable: {QWEN_UNAVAILABLE}"
    ),
]

TIMEOUT = 90.0  # generous: a loaded CI machine starts node slowly


WRITE = "Please write the notes file "
QUESTION = "Please ask me about the widget."


def _responder(workdir: Path) -> Any:
    """``ask me`` -> the question flow; "write the notes file <name>" -> a ``write_file``
    call (Qwen Code asks permission first in ``--approval-mode default``)."""
    questions = question_flow_responder()

    def respond(body: Any) -> ScriptedReply:
        message = last_message(body)
        text = _content_text(message.get("content"))
        if message.get("role") == "user" and WRITE in text and "write_file" in _tool_names(body):
            name = text.split(WRITE, 1)[1].split()[0].rstrip(".")
            arguments = {"file_path": str(workdir / name), "content": "notes\n"}
            call = ToolCall("write_file", arguments, f"call_write_{name}")
            return ScriptedReply(chunks=("Writing the notes file.",), tool_call=call)
        return questions(body)

    return respond


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return Path(tmp_path_factory.mktemp("qwen-question-killed-work"))


@pytest.fixture(scope="module")
def model_server(workdir: Path) -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer(responder=_responder(workdir)) as server:
        yield server


@pytest.fixture(scope="module", params=["question", "approval"])
def waiting_on(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def agent(
    model_server: ScriptedOpenAIServer,
    tmp_path_factory: pytest.TempPathFactory,
    waiting_on: str,
    workdir: Path,
) -> Any:
    """One bridge per kind of wait: each test kills its process, the next prompt starts
    a new one."""
    from channelkit.agents.acp import AcpBridge

    home = tmp_path_factory.mktemp("qwen-question-killed-home")
    (home / ".qwen").mkdir()
    settings = {
        "memory": {"enableManagedAutoMemory": False},
        "ui": {"enableFollowupSuggestions": False},
    }
    (home / ".qwen" / "settings.json").write_text(json.dumps(settings))
    command = qwen_command(model_server.base_url, model_server.model)
    if waiting_on == "approval":
        command += ["--approval-mode", "default"]
    bridge = AcpBridge(
        command,
        cwd=workdir,
        env=qwen_env(Path(home)),
        request_timeout=60.0,
        prompt_timeout=120.0,
        close_timeout=5.0,
    )
    try:
        bridge.start()  # the slow first start, outside the tests' waits
        yield bridge
    finally:
        bridge.close()


def _wait(predicate: Callable[[], Any], what: str, describe: Callable[[], Any]) -> Any:
    deadline = time.monotonic() + TIMEOUT
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}; {describe()}")
        time.sleep(0.05)


def _views(pg: Playground) -> list[dict[str, Any]]:
    state = pg.emulator.state()
    shown = []
    for entry in state["timeline"]:
        if entry["kind"] == "card":
            shown.append(state["views"][entry["card"]])
        elif entry.get("from") == "bot":
            shown.append(entry)
    return shown


def _shows_failure(platform: str, view: Mapping[str, Any]) -> bool:
    if platform == "dingtalk":  # a Failed status card, or a Markdown message saying so
        return (view.get("kind") == "status" and view.get("state") == "failed") or (
            view.get("format") == "markdown" and "Failed" in str(view.get("text", ""))
        )
    if platform == "feishu":  # the failed label on a card
        return view.get("state") == "failed" and str(view.get("statusLine", "")).startswith(
            "Failed"
        )
    return "Failed, please retry." in str(view.get("text", ""))  # telegram


@pytest.mark.parametrize("platform", ["dingtalk", "feishu", "telegram"])
def test_killing_qwen_while_its_question_or_approval_waits_tells_the_failure_once(
    platform: str,
    agent: Any,
    model_server: ScriptedOpenAIServer,
    waiting_on: str,
    workdir: Path,
) -> None:
    with Playground(platform=platform, agent=agent, model=model_server.model) as pg:

        def diagnostics() -> str:
            return f"chat: {_views(pg)}; agent stderr: {agent.stderr_tail()[-10:]}"

        prompt = QUESTION if waiting_on == "question" else f"{WRITE}{platform}.txt"
        _, ack = pg.send(prompt)
        assert ack.status == 200, ack
        _wait(lambda: pg.channel.pending_request_ids(), "the question to wait", diagnostics)
        pid = agent.pid
        assert pid is not None
        os.killpg(os.getpgid(pid), signal.SIGKILL)  # the agent and all its children

        _wait(
            lambda: [v for v in _views(pg) if _shows_failure(platform, v)],
            "the failure told in the chat",
            diagnostics,
        )
        assert pg.channel.wait_idle(30.0), diagnostics()
        failed = [v for v in _views(pg) if _shows_failure(platform, v)]
        assert len(failed) == 1, failed
        assert not pg.channel.pending_request_ids()
        assert not (workdir / f"{platform}.txt").exists()  # the tool never ran

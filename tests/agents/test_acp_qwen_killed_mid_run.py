"""The real Qwen Code CLI is killed while a turn is in flight, on each emulated platform.

The scripted model stalls the turn (its stream stays open after a first chunk), the test
kills the agent's whole process group with SIGKILL once Qwen Code stored the prompt (it
writes its conversations in the background; only a stored turn can be loaded), then:

* the person sees a failure in the chat: DingTalk a Failed status card (or, when no
  card was open yet, a "Failed, please retry." Markdown message), Feishu the failed
  label on the card, Telegram the "Failed, please retry." message;
* the next message continues the conversation: the bridge restores it with
  ``session/load`` (Qwen Code advertises ``loadSession``), so the model sees the earlier
  turn and its answer, which quotes it, reaches the chat; no "started over" notice.

The platforms share one scripted model server and one bridge (each test kills the
process it prompted, so its turns run on processes of their own) and use a conversation
of their own, each through its own playground.
"""

from __future__ import annotations

import json
import os
import re
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from acp_testkit import QWEN_UNAVAILABLE, qwen_command, qwen_env
from channelkit.agents.acp.bridge import CONTEXT_LOST_NOTICE
from channelkit.playground import Playground
from openai_script_server import ScriptedOpenAIServer, ScriptedReply, last_message

pytestmark = [
    pytest.mark.acp_real,
    pytest.mark.skipif(
        QWEN_UNAVAILABLE is not None, reason=f"real ACP agent unavailable: {QWEN_UNAVAILABLE}"
    ),
]

TIMEOUT = 90.0  # generous: a loaded CI machine starts node slowly
WORDS = {"dingtalk": "PAPAYA", "feishu": "MANGO", "telegram": "GUAVA"}
FIRST_CHUNK = "Noting the word "
QUESTION = "Which word did I ask you to remember?"
_REMEMBER = re.compile(r"Remember the word ([A-Z]+)")


def _user_texts(body: Mapping[str, Any]) -> list[str]:
    texts: list[str] = []
    for message in body.get("messages") or ():
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts.extend(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return texts


def _text(message: Mapping[str, Any]) -> str:
    return " ".join(_user_texts({"messages": [message]}))


def _responder(body: Mapping[str, Any]) -> ScriptedReply:
    """The turn asking to remember a word stalls after its first chunk; the question
    about it is answered from the conversation the model is given (nothing else)."""
    message = last_message(body)
    if message.get("role") != "user" or not body.get("tools"):
        return ScriptedReply(chunks=("ok",))
    text = _text(message).rstrip()
    if text.endswith(QUESTION):
        # the earlier turns, wherever the agent put them (it may merge adjacent user
        # messages into one)
        earlier = " ".join(_user_texts(body)).replace(QUESTION, "")
        found = _REMEMBER.search(earlier)
        word = found.group(1) if found else "nothing (no earlier turn)"
        return ScriptedReply(chunks=("You asked me to remember ", f"{word}."))
    if _REMEMBER.search(text[-40:]):  # the person's prompt ends the message
        return ScriptedReply(chunks=(FIRST_CHUNK, "for later."), hold=threading.Event())
    return ScriptedReply(chunks=("ok",))  # the agent's own side requests


@pytest.fixture(scope="module")
def model_server() -> Iterator[ScriptedOpenAIServer]:
    with ScriptedOpenAIServer(responder=_responder) as server:
        yield server


@pytest.fixture(scope="module")
def qwen_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The agent's home: its settings and its stored conversations."""
    home = tmp_path_factory.mktemp("qwen-killed-home")
    (home / ".qwen").mkdir()
    # no background memory extraction or follow-up suggestions: fewer model requests
    settings = {
        "memory": {"enableManagedAutoMemory": False},
        "ui": {"enableFollowupSuggestions": False},
    }
    (home / ".qwen" / "settings.json").write_text(json.dumps(settings))
    return home


@pytest.fixture(scope="module")
def qwen_agent(
    model_server: ScriptedOpenAIServer,
    qwen_home: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Any]:
    """One bridge for the module (each test kills its process, so each test's turns run
    on processes of their own; sharing it saves a slow agent start per test)."""
    from channelkit.agents.acp import AcpBridge

    bridge = AcpBridge(
        qwen_command(model_server.base_url, model_server.model),
        cwd=tmp_path_factory.mktemp("qwen-killed-work"),
        env=qwen_env(qwen_home),
        request_timeout=60.0,
        prompt_timeout=120.0,
        close_timeout=5.0,
    )
    try:
        bridge.start()  # the slow first start, outside the tests' waits
        yield bridge
    finally:
        model_server.release_holds()
        bridge.close()


@pytest.fixture
def agent(qwen_agent: Any, model_server: ScriptedOpenAIServer) -> Iterator[Any]:
    try:
        yield qwen_agent
    finally:
        model_server.release_holds()


def _wait(predicate: Callable[[], Any], what: str, describe: Callable[[], Any] = lambda: "") -> Any:
    deadline = time.monotonic() + TIMEOUT
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}; {describe()}")
        time.sleep(0.05)


def _recorded(home: Path, text: str) -> bool:
    """True once Qwen Code wrote ``text`` to one of its stored conversations (what
    ``session/load`` restores; it is written in the background as the turn starts)."""
    for chat in home.glob(".qwen/projects/*/chats/*.jsonl"):
        try:
            if text in chat.read_text(encoding="utf-8", errors="replace"):
                return True
        except OSError:
            continue
    return False


def _views(pg: Playground) -> list[dict[str, Any]]:
    """What the bot shows in the chat in timeline order: the views of its cards and
    messages, and its plain messages (e.g. DingTalk's Markdown)."""
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
        return view.get("state") == "failed" or (
            view.get("format") == "markdown" and "Failed" in str(view.get("text", ""))
        )
    if platform == "feishu":  # the failed label on the card
        return view.get("state") == "failed" and str(view.get("statusLine", "")).startswith(
            "Failed"
        )
    return "Failed, please retry." in str(view.get("text", ""))  # telegram


@pytest.mark.parametrize("platform", ["dingtalk", "feishu", "telegram"])
def test_killing_qwen_mid_run_shows_a_failure_and_the_next_message_continues(
    platform: str, agent: Any, model_server: ScriptedOpenAIServer, qwen_home: Path
) -> None:
    word = WORDS[platform]
    with Playground(platform=platform, agent=agent, model=model_server.model) as pg:

        def diagnostics() -> str:
            return f"chat: {_views(pg)}; agent stderr: {agent.stderr_tail()[-10:]}"

        remember = f"Remember the word {word}."
        _, ack = pg.send(remember)
        assert ack.status == 200, ack
        in_flight = model_server.wait_holding(
            TIMEOUT, lambda body: remember in _text(last_message(body))
        )
        assert in_flight, f"the turn never reached the model; {diagnostics()}"
        # the turn is in flight; once the agent stored the prompt, kill it
        _wait(lambda: _recorded(qwen_home, remember), "the stored prompt", diagnostics)
        caps = agent.agent_info.get("agentCapabilities") or {}
        assert caps.get("loadSession") is True, "Qwen Code no longer advertises loadSession"
        pid = agent.pid
        assert pid is not None
        os.killpg(os.getpgid(pid), signal.SIGKILL)  # the agent and all its children
        model_server.release_holds()

        failed = _wait(
            lambda: [v for v in _views(pg) if _shows_failure(platform, v)],
            "a failure shown in the chat",
            diagnostics,
        )
        assert len(failed) == 1, failed

        before = len(model_server.chat_requests_with_tools())
        start = len(_views(pg))
        _, ack = pg.send(QUESTION)
        assert ack.status == 200, ack
        answer = f"You asked me to remember {word}."
        _wait(
            lambda: any(answer in json.dumps(v) for v in _views(pg)[start:]),
            "the answer quoting the earlier turn",
            diagnostics,
        )
        shown = json.dumps(_views(pg)[start:])
        assert CONTEXT_LOST_NOTICE.strip() not in shown  # restored, not started over
        assert agent.pid not in (None, pid)  # a new process answered
        later = model_server.chat_requests_with_tools()[before:]
        asked = [r for r in later if QUESTION in " ".join(_user_texts(r))]
        assert asked and f"Remember the word {word}." in " ".join(_user_texts(asked[-1]))

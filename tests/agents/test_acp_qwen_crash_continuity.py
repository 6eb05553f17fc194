"""The real Qwen Code CLI: after its process is killed, the next message continues the
same conversation (``session/load``), so the model sees the earlier turns."""

from __future__ import annotations

import os
import signal
from typing import Any

import pytest
from acp_testkit import RecordingSink
from openai_script_server import ScriptedOpenAIServer

pytestmark = pytest.mark.acp_real


def _user_texts(body: dict[str, Any]) -> list[str]:
    texts = []
    for message in body.get("messages") or ():
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts.extend(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return texts


def test_killed_qwen_continues_the_conversation(
    qwen_bridge: Any, openai_server: ScriptedOpenAIServer
) -> None:
    sink = RecordingSink()
    assert qwen_bridge.prompt("dm:alice", "Remember the word PAPAYA.", sink)
    caps = qwen_bridge.agent_info.get("agentCapabilities") or {}
    if caps.get("loadSession") is not True:
        pytest.skip("this Qwen Code build does not advertise loadSession")
    pid = qwen_bridge.pid
    assert pid is not None
    os.killpg(os.getpgid(pid), signal.SIGKILL)
    sink.wait_for("session_died", timeout=30)
    before = len(openai_server.chat_requests_with_tools())
    answer = qwen_bridge.prompt("dm:alice", "Which word did I ask you to remember?", sink)
    assert qwen_bridge.pid not in (None, pid)
    assert "could not restore" not in answer  # restored, not started over
    later = openai_server.chat_requests_with_tools()[before:]
    assert later, "the model was not asked again"
    seen = " ".join(_user_texts(later[-1]))
    assert "PAPAYA" in seen and "Which word" in seen  # the earlier turn is in context

"""Helpers shared by the agent-bridge tests (and reusable by end-to-end tests).

``RecordingSink`` records a bridge's events; ``fake_agent_command()`` runs our fake ACP
agent; ``qwen_command()`` / ``qwen_env()`` run the real Qwen Code CLI offline against the
scripted OpenAI-compatible server; ``QWEN_UNAVAILABLE`` says why it cannot run here.
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from channelkit.agents.base import (
    PermissionRequest,
    PermissionResolved,
    SessionDied,
    ToolCallEvent,
)

HERE = Path(__file__).resolve().parent
FAKE_AGENT = HERE / "acp_fake_agent.py"
WAIT = 10.0  # generous upper bound for every wait in these tests


class RecordingSink:
    """An ``AgentEventSink`` that records every event as ``(kind, payload)`` in order.

    ``on_permission`` (optional) is called on the bridge's thread with each
    ``PermissionRequest``. ``wait_for(kind)`` blocks (with a timeout) until an event of
    that kind arrived and returns its payload.
    """

    def __init__(self, on_permission: Callable[[PermissionRequest], None] | None = None):
        self.events: list[tuple[str, Any]] = []
        self.threads: set[str] = set()
        self.on_permission = on_permission
        self._cond = threading.Condition()

    def _record(self, kind: str, payload: Any) -> None:
        with self._cond:
            self.events.append((kind, payload))
            self.threads.add(threading.current_thread().name)
            self._cond.notify_all()

    # -- AgentEventSink ----------------------------------------------------------
    def text_chunk(self, session_id: str, chunk: str) -> None:
        self._record("text_chunk", (session_id, chunk))

    def response_boundary(self, session_id: str) -> None:
        self._record("response_boundary", session_id)

    def tool_call(self, event: ToolCallEvent) -> None:
        self._record("tool_call", event)

    def permission_request(self, request: PermissionRequest) -> None:
        self._record("permission_request", request)
        if self.on_permission is not None:
            self.on_permission(request)

    def permission_resolved(self, event: PermissionResolved) -> None:
        self._record("permission_resolved", event)

    def session_died(self, event: SessionDied) -> None:
        self._record("session_died", event)

    # -- helpers -----------------------------------------------------------------
    def kinds(self) -> list[str]:
        with self._cond:
            return [kind for kind, _ in self.events]

    def of(self, kind: str) -> list[Any]:
        with self._cond:
            return [payload for k, payload in self.events if k == kind]

    def text(self) -> str:
        return "".join(chunk for _, chunk in self.of("text_chunk"))

    def wait_for(self, kind: str, timeout: float = WAIT, count: int = 1) -> Any:
        with self._cond:
            ok = self._cond.wait_for(lambda: len(self._of(kind)) >= count, timeout)
            assert ok, f"no {kind!r} event within {timeout} s; got {self.kinds_unlocked()}"
            return self._of(kind)[count - 1]

    def _of(self, kind: str) -> list[Any]:
        return [payload for k, payload in self.events if k == kind]

    def kinds_unlocked(self) -> list[str]:
        return [kind for kind, _ in self.events]


def fake_agent_command() -> list[str]:
    """argv that runs our fake ACP agent with the current interpreter."""
    return [sys.executable, str(FAKE_AGENT)]


def _qwen_unavailable() -> str | None:
    for tool in ("node", "npm"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (run .ci/install-node-tools)"
    if shutil.which("qwen") is None:
        return "the Qwen Code CLI `qwen` is not installed (run .ci/install-node-tools)"
    return None


#: Why the real-agent tests cannot run here, or None when they can.
QWEN_UNAVAILABLE = _qwen_unavailable()


def qwen_command(base_url: str, model: str = "scripted-model") -> list[str]:
    """argv that runs Qwen Code in ACP mode against an OpenAI-compatible ``base_url``."""
    qwen = shutil.which("qwen") or "qwen"
    return [
        qwen,
        "--acp",
        "--auth-type=openai",
        "--openai-base-url",
        base_url,
        "--openai-api-key",
        "x",
        "-m",
        model,
    ]


def qwen_env(home: Path) -> dict[str, str]:
    """Environment for an isolated, offline qwen run (its settings/memory live in ``home``)."""
    home.mkdir(parents=True, exist_ok=True)
    return {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "NO_COLOR": "1",
        "QWEN_CODE_NO_UPDATE_CHECK": "1",
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
    }


def process_is_reaped(pid: int) -> bool:
    """True when ``pid`` is neither running nor a zombie child of ours."""
    try:
        waited, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True  # already reaped (not our child any more)
    if waited == pid:
        return False  # it was a zombie we had to reap here: the bridge did not
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def process_group_gone(pgid: int) -> bool:
    """True when no process is left in the group ``pgid`` (the bridge starts each agent
    in its own session, so the group holds the agent and every child it spawned)."""
    if not hasattr(os, "killpg"):
        return True
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


__all__ = [
    "FAKE_AGENT",
    "QWEN_UNAVAILABLE",
    "WAIT",
    "RecordingSink",
    "fake_agent_command",
    "process_group_gone",
    "process_is_reaped",
    "qwen_command",
    "qwen_env",
]

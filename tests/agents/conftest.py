"""Fixtures for agent-bridge tests: a recording sink, our fake ACP agent, the scripted
OpenAI-compatible server and the real Qwen Code CLI (skipped when missing).

The plain helpers live in ``acp_testkit.py`` (import it rather than this conftest).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from acp_testkit import (  # noqa: E402
    QWEN_UNAVAILABLE,
    WAIT,
    RecordingSink,
    fake_agent_command,
    qwen_command,
    qwen_env,
)
from openai_script_server import ScriptedOpenAIServer  # noqa: E402


@pytest.fixture
def recording_sink() -> RecordingSink:
    return RecordingSink()


@pytest.fixture
def fake_agent_log(tmp_path: Path) -> Path:
    """The file our fake agent appends every received line to (see FAKE_ACP_LOG)."""
    return tmp_path / "fake-agent-stdin.log"


@pytest.fixture
def make_fake_bridge(tmp_path: Path, fake_agent_log: Path) -> Iterator[Callable[..., Any]]:
    """Factory: ``make_fake_bridge(mode=None, **bridge_kwargs)``; closed at teardown."""
    from channelkit.agents.acp import AcpBridge

    bridges: list[AcpBridge] = []

    def make(
        mode: str | None = None, *, agent_env: dict[str, str] | None = None, **kwargs: Any
    ) -> AcpBridge:
        env = {"FAKE_ACP_LOG": str(fake_agent_log), **(agent_env or {})}
        if mode:
            env["FAKE_ACP_MODE"] = mode
        kwargs.setdefault("request_timeout", WAIT)
        kwargs.setdefault("close_timeout", 3.0)
        bridge = AcpBridge(fake_agent_command(), cwd=tmp_path, env=env, **kwargs)
        bridges.append(bridge)
        return bridge

    yield make
    for bridge in bridges:
        bridge.close()


@pytest.fixture
def openai_server() -> Iterator[ScriptedOpenAIServer]:
    """The scripted chat-completions server with the default question flow."""
    with ScriptedOpenAIServer() as server:
        yield server


@pytest.fixture
def qwen_bridge(openai_server: ScriptedOpenAIServer, tmp_path: Path) -> Iterator[Any]:
    """An AcpBridge running the real ``qwen --acp`` against ``openai_server``."""
    if QWEN_UNAVAILABLE:
        pytest.skip(f"real ACP agent unavailable: {QWEN_UNAVAILABLE}")
    from channelkit.agents.acp import AcpBridge

    workdir = tmp_path / "work"
    workdir.mkdir()
    bridge = AcpBridge(
        qwen_command(openai_server.base_url, openai_server.model),
        cwd=workdir,
        env=qwen_env(tmp_path / "home"),
        request_timeout=60.0,
        prompt_timeout=120.0,
        close_timeout=5.0,
    )
    try:
        yield bridge
    finally:
        bridge.close()

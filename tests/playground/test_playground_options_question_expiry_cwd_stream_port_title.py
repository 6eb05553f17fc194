"""`channelkit playground` options: ``--question-expiry``, ``--cwd``, ``--stream-port``,
and card titles naming the agent that runs.

* a question expires at the lifetime given (on a FakeClock: not a second before, and
  not at the 270 s default);
* an ACP command agent runs in ``--cwd`` (a tiny ACP agent reports its working
  directory) and the Feishu card is titled with its program name;
* the DingTalk Stream gateway listens on ``--stream-port`` and the bot connects there;
* bad values and misplaced options are a one-line error naming the option, exit 2.
"""

from __future__ import annotations

import os
import queue
import socket
import stat
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from channelkit.agents.function import FunctionAgent, QuestionError, Turn
from channelkit.cli import main
from channelkit.playground import Playground
from channelkit.playground.app import agent_title
from channelkit.playground.demo import DEMO_QUESTIONS
from channelkit.runtime import FakeClock
from playground_helpers import new_view, send, view, views, wait

LONG = 15.0

# A minimal ACP agent: every prompt is answered with the directory it runs in.
_CWD_AGENT = """\
import json, os, sys

def send(message):
    sys.stdout.write(json.dumps(message) + "\\n")
    sys.stdout.flush()

for line in sys.stdin:
    if not line.strip():
        continue
    message = json.loads(line)
    method, rpc_id = message.get("method"), message.get("id")
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": rpc_id, "result": {
            "protocolVersion": 1, "agentCapabilities": {}, "authMethods": [],
            "agentInfo": {"name": "cwd-agent", "version": "1"}}})
    elif method == "session/new":
        send({"jsonrpc": "2.0", "id": rpc_id, "result": {"sessionId": "s1"}})
    elif method == "session/prompt":
        text = "cwd=" + os.getcwd()
        send({"jsonrpc": "2.0", "method": "session/update", "params": {
            "sessionId": "s1", "update": {"sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": text}}}})
        send({"jsonrpc": "2.0", "id": rpc_id, "result": {"stopReason": "end_turn"}})
    elif rpc_id is not None:
        send({"jsonrpc": "2.0", "id": rpc_id, "error": {"code": -32601, "message": method}})
"""


def _cwd_agent(directory: Path) -> Path:
    """The agent as an executable named ``cwd-agent`` (its program name)."""
    script = directory / "cwd-agent"
    script.write_text(f"#!{sys.executable}\n{_CWD_AGENT}", encoding="utf-8")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# -- --question-expiry ----------------------------------------------------------------


class _Asker:
    """Asks the demo's questions at once and records the answers or the error."""

    def __init__(self) -> None:
        self.outcomes: queue.Queue[Any] = queue.Queue()

    def __call__(self, turn: Turn) -> str:
        try:
            self.outcomes.put(turn.ask(list(DEMO_QUESTIONS)))
        except QuestionError as exc:
            self.outcomes.put(exc)
        return "done"


def test_a_question_expires_at_the_given_lifetime_not_the_default() -> None:
    asker = _Asker()
    agent = FunctionAgent(asker, question_timeout=600.0, name="asker")
    clock = FakeClock(start=time.monotonic(), wall_start=time.time())
    try:
        with Playground(platform="slack", agent=agent, clock=clock, question_expiry=30) as pg:
            start = send(pg, "ask me")
            form = wait(
                lambda: next((v for v in views(pg)[start:] if v["kind"] == "question"), None),
                "the question form",
                LONG,
            )
            forms = pg.channel.questions
            wait(
                lambda: any(f.timer is not None for f in forms.live_forms()),
                "the form's expiry timer",
                LONG,
            )
            clock.advance(29)
            with pytest.raises(queue.Empty):  # not before its lifetime
                asker.outcomes.get(timeout=0.2)
            clock.advance(2)  # 31 s: long before the 270 s default
            assert isinstance(asker.outcomes.get(timeout=LONG), QuestionError)
            wait(lambda: view(pg, form["id"]).get("text") == "Expired", "Expired", LONG)
    finally:
        agent.close()


@pytest.mark.parametrize("platform", ["dingtalk", "feishu", "telegram", "weixin"])
def test_the_question_lifetime_reaches_each_platforms_config(platform: str) -> None:
    with Playground(platform=platform, question_expiry=400) as pg:
        channel: Any = pg.channel
        assert channel.permission_lifetime() == 400  # raised to let the question live
        if platform == "dingtalk":
            assert channel.question_lifetime() == 400
        elif platform == "feishu":
            assert channel.feishu.forms.timeout_s == 400
        elif platform == "telegram":
            assert channel.questions._timeout_s == 400
        # Weixin's questions are text prompts: their lifetime is the permission lifetime


# -- --cwd and the card title ----------------------------------------------------------------


def test_the_acp_agent_runs_in_cwd_and_the_feishu_card_is_titled_with_it(
    tmp_path: Path,
) -> None:
    bin_dir, work = tmp_path / "bin", tmp_path / "work"
    bin_dir.mkdir()
    work.mkdir()
    command = f"{_cwd_agent(bin_dir)} --acp"
    with Playground(platform="feishu", agent=command, cwd=work) as pg:
        assert pg.agent.cwd == str(work)  # type: ignore[attr-defined]
        start = send(pg, "where are you?")
        card = new_view(pg, start, "status", timeout=LONG)
        wait(
            lambda: f"cwd={work}" in str(view(pg, card["id"])),
            "the agent's answer naming its directory",
            LONG,
        )
        assert view(pg, card["id"])["title"] == "cwd-agent"
    assert os.getcwd() != str(work)


def test_the_demo_agents_feishu_card_is_titled_channelkit_demo() -> None:
    with Playground(platform="feishu", demo_delay=0.0) as pg:
        start = send(pg, "fail")
        card = new_view(pg, start, "status", timeout=LONG)
        assert card["title"] == "channelkit demo"


def test_card_titles_name_the_agent() -> None:
    assert agent_title(None) == "channelkit demo"
    assert agent_title("qwen --acp") == "qwen"
    assert agent_title(["/usr/local/bin/claude-code-acp"]) == "claude-code-acp"
    assert agent_title(FunctionAgent(lambda turn: "x", name="helper")) == "helper"


# -- --stream-port -------------------------------------------------------------------------


def test_the_stream_gateway_listens_on_the_given_port_and_the_bot_connects_there() -> None:
    port = _free_port()
    with Playground(stream_port=port, demo_delay=0.0) as pg:
        gateway = pg.emulator.stream  # type: ignore[attr-defined]
        assert gateway.port == port
        assert gateway.wait_connected(LONG)
        send(pg, "fail")
        wait(lambda: gateway.counts.get("connections", 0) >= 1, "a connection", LONG)


# -- the CLI: bad values are one line naming the option, exit 2 ------------------------------


def _error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    with pytest.raises(SystemExit) as raised:
        code = main(argv)
        raise SystemExit(code)
    assert raised.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    return lines[-1]


@pytest.mark.parametrize("value", ["0", "-5", "soon", "nan", "inf"])
def test_a_bad_question_expiry_is_refused(capsys: pytest.CaptureFixture[str], value: str) -> None:
    line = _error(capsys, ["playground", "--question-expiry", value])
    assert "argument --question-expiry: must be a number of seconds" in line


def test_a_missing_cwd_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    line = _error(capsys, ["playground", "--agent", "qwen --acp", "--cwd", str(tmp_path / "x")])
    assert "--cwd" in line and "existing directory" in line


def test_cwd_with_the_demo_agent_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    line = _error(capsys, ["playground", "--cwd", str(tmp_path)])
    assert line.startswith("channelkit playground: --cwd: needs --agent")


@pytest.mark.parametrize(
    "argv",
    [
        ["--platform", "feishu"],
        ["--platform", "telegram"],
        ["--platform", "dingtalk", "--ingress", "http"],
    ],
)
def test_stream_port_off_dingtalk_stream_is_refused(
    capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    line = _error(capsys, ["playground", *argv, "--stream-port", str(_free_port())])
    assert line.startswith("channelkit playground: --stream-port: is for --platform dingtalk")


def test_a_taken_stream_port_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        line = _error(capsys, ["playground", "--stream-port", str(port)])
    assert line.startswith(
        f"channelkit playground: --stream-port: cannot listen on 127.0.0.1:{port}"
    )


def test_a_bad_stream_port_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    line = _error(capsys, ["playground", "--stream-port", "70000"])
    assert "argument --stream-port: must be a port number 0-65535" in line


def test_help_lists_the_options(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["playground", "--help"])
    text = capsys.readouterr().out
    for option in ("--question-expiry SECONDS", "--cwd DIR", "--stream-port N"):
        assert option in text

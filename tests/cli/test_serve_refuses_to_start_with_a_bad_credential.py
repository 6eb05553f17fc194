"""``channelkit serve`` checks every channel's credentials and the agent before it starts.

A real ``channelkit serve`` process (127.0.0.1 only) against the playground emulators of
the platforms (each answers like the platform: Telegram ``getMe`` 401, Slack ``auth.test``
``invalid_auth``, DingTalk and Feishu refusing the token exchange), or a local socket
that never answers. A wrong credential, a missing agent program or an agent that never
answers ``initialize`` makes serve exit 4 within 10 s with ONE line on stderr naming the
channel and the field, and never the secret; a good configuration starts (and its ACP
agent has answered ``initialize`` before serve listens).
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from channelkit.platforms import PLATFORMS
from channelkit.playground import EmulatorServer

from tests.web.serve_process import CommandProcess, channelkit_argv

pytestmark = pytest.mark.slow  # many seconds of real time: its file starts first

ROOT = Path(__file__).resolve().parents[2]
FAKE_AGENT = ROOT / "tests" / "agents" / "acp_fake_agent.py"
LIMIT_S = 10.0  # the whole process: start, checks, one line, exit
WRONG = "wrong-secret-4711"
#: a well-formed value of each credential that its platform refuses
WRONG_VALUES = {
    "botToken": {"telegram": f"123456:{WRONG}", "slack": f"xoxb-{WRONG}"},
    "appToken": {"slack": f"xapp-1-{WRONG}"},
}


def _channel(name: str, url: str, **credentials: str) -> dict[str, Any]:
    """``channels[i]`` of `name` pointed at its emulator with the emulator's credentials,
    then `credentials` over them."""
    defaults = PLATFORMS[name].playground
    assert defaults is not None
    options: dict[str, Any] = {defaults.api_base_url_option: url}
    if name == "dingtalk":
        options["ingress"] = "stream"
    if name == "feishu":
        options["ingress"] = "websocket"
    return {
        "platform": name,
        "credentials": {**defaults.credentials, **credentials},
        "options": options,
    }


def _write(tmp_path: Path, channels: list[dict[str, Any]], agent: dict[str, Any]) -> str:
    doc = {
        "channels": channels,
        "agent": agent,
        "options": {"logLevel": "INFO"},
        "server": {"host": "127.0.0.1", "port": 0, "engine": "waitress"},
    }
    path = tmp_path / "channelkit.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return str(path)


def _fake_agent(**env: str) -> dict[str, Any]:
    return {"type": "acp", "command": [sys.executable, str(FAKE_AGENT)], "env": env}


def _refused(argv: list[str]) -> tuple[float, int, str, list[str]]:
    """Run ``channelkit ARGV`` to its end: (seconds, status, stdout, stderr lines)."""
    started = time.monotonic()
    try:
        done = subprocess.run(
            channelkit_argv(argv),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=LIMIT_S + 20,
            cwd=ROOT,
        )
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"still running after {LIMIT_S + 20} s: {exc.stdout!r}") from None
    elapsed = time.monotonic() - started
    return elapsed, done.returncode, done.stdout, done.stderr.splitlines()


@pytest.fixture()
def emulators() -> Iterator[dict[str, EmulatorServer]]:
    started: dict[str, EmulatorServer] = {}
    try:
        for name in ("telegram", "slack", "dingtalk", "feishu"):
            started[name] = EmulatorServer(platform=name)
        yield started
    finally:
        for server in started.values():
            server.close()


@pytest.mark.parametrize(
    ("platform", "key", "options", "named"),
    [
        ("telegram", "botToken", {}, "credentials.botToken was refused by Telegram (HTTP 401"),
        ("slack", "botToken", {}, "credentials.botToken was refused by Slack (invalid_auth)"),
        (
            "slack",
            "appToken",
            {"ingress": "socket"},
            "credentials.appToken was refused by Slack (invalid_auth)",
        ),
        (
            "dingtalk",
            "clientSecret",
            {},
            "credentials.clientId/clientSecret was refused by DingTalk",
        ),
        ("feishu", "appSecret", {}, "credentials.appId/appSecret was refused by Feishu"),
    ],
)
def test_serve_with_a_wrong_credential_exits_4_within_10_s_with_one_line_naming_it(
    tmp_path: Path,
    emulators: dict[str, EmulatorServer],
    platform: str,
    key: str,
    options: dict[str, Any],
    named: str,
) -> None:
    pytest.importorskip("waitress")
    wrong = WRONG_VALUES.get(key, {}).get(platform, WRONG)
    channel = _channel(platform, emulators[platform].url, **{key: wrong})
    channel["options"].update(options)
    good = _channel("telegram", emulators["telegram"].url)
    good["name"] = "other"
    config = _write(tmp_path, [good, channel], {"type": "demo"})
    elapsed, status, out, err = _refused(["serve", "--config", config])
    assert status == 4, (out, err)
    assert elapsed < LIMIT_S, elapsed
    assert len(err) == 1, err
    assert err[0].startswith(f"channelkit serve: channel '{platform}' ({platform}): {named}"), err
    assert WRONG not in out + "".join(err)
    assert "listening" not in out


def test_serve_with_a_missing_agent_program_exits_4_naming_agent_command(
    tmp_path: Path, emulators: dict[str, EmulatorServer]
) -> None:
    pytest.importorskip("waitress")
    config = _write(
        tmp_path,
        [_channel("telegram", emulators["telegram"].url)],
        {"type": "acp", "command": ["channelkit-no-such-agent-4711", "--acp"]},
    )
    elapsed, status, out, err = _refused(["serve", "--config", config])
    assert status == 4, (out, err)
    assert elapsed < LIMIT_S, elapsed
    assert err == [
        "channelkit serve: agent.command: program 'channelkit-no-such-agent-4711' "
        "was not found on PATH"
    ]


def test_serve_with_an_agent_that_never_answers_initialize_exits_within_the_bound(
    tmp_path: Path, emulators: dict[str, EmulatorServer]
) -> None:
    pytest.importorskip("waitress")
    config = _write(
        tmp_path,
        [_channel("telegram", emulators["telegram"].url)],
        _fake_agent(FAKE_ACP_MODE="no-init-reply"),
    )
    elapsed, status, out, err = _refused(["serve", "--config", config, "--check-timeout", "2"])
    assert status == 4, (out, err)
    assert elapsed < LIMIT_S, elapsed
    assert len(err) == 1, err
    assert err[0].startswith("channelkit serve: agent.command: "), err
    assert err[0].endswith("did not answer ACP initialize within 2 s"), err


@pytest.fixture()
def silent_server() -> Iterator[str]:
    """A socket on 127.0.0.1 that accepts connections and never answers."""
    server = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            held.append(conn)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(5)
        for conn in held:
            conn.close()
        server.close()


def test_serve_whose_platform_never_answers_exits_after_the_check_bound(
    tmp_path: Path, silent_server: str
) -> None:
    pytest.importorskip("waitress")
    config = _write(tmp_path, [_channel("telegram", silent_server)], {"type": "demo"})
    elapsed, status, out, err = _refused(["serve", "--config", config, "--check-timeout", "1.5"])
    assert status == 4, (out, err)
    assert elapsed < LIMIT_S, elapsed
    assert len(err) == 1, err
    assert err[0].startswith(
        "channelkit serve: channel 'telegram' (telegram): credentials.botToken could not be "
        "checked: Telegram did not answer in time"
    ), err
    assert "playground-bot-token" not in err[0]  # the token is part of the Bot API URL


def test_serve_with_good_credentials_and_agent_starts_after_the_checks(
    tmp_path: Path, emulators: dict[str, EmulatorServer]
) -> None:
    pytest.importorskip("waitress")
    log = tmp_path / "agent-stdin.log"
    slack = _channel("slack", emulators["slack"].url)
    config = _write(
        tmp_path,
        [_channel("telegram", emulators["telegram"].url), slack],
        _fake_agent(FAKE_ACP_LOG=str(log)),
    )
    serve = CommandProcess(["serve", "--config", config, "--grace", "5"])
    try:
        passed = serve.wait_for_line(r"start-up checks passed: (.*)", 30.0).group(1)
        assert passed == "channel 'telegram' (telegram), channel 'slack' (slack), agent.command"
        serve.wait_for_line(r"listening on http://127\.0\.0\.1:\d+", 30.0)
        # the agent answered initialize before serve listened, and stays up for the runs
        methods = [json.loads(line)["method"] for line in log.read_text().splitlines()]
        assert methods[:1] == ["initialize"], methods
        calls = emulators["telegram"].emulator.calls()
        assert any(call["path"].endswith("/getMe") for call in calls), calls
        assert emulators["slack"].emulator.calls("/auth.test"), "Slack's auth.test"
        serve.signal(signal.SIGTERM)
        assert serve.wait(timeout=30) == 0, (serve.stdout, serve.stderr)
    finally:
        serve.kill()


def test_serve_with_workers_checks_once_in_the_parent_before_any_worker_starts(
    tmp_path: Path, emulators: dict[str, EmulatorServer], redis_server: Any
) -> None:
    pytest.importorskip("waitress")
    doc = {
        "channels": [_channel("telegram", emulators["telegram"].url, botToken=f"123456:{WRONG}")],
        "agent": {"type": "demo"},
        "state": {"redis": {"url": redis_server.url, "namespace": f"failfast-{WRONG}"}},
        "server": {"host": "127.0.0.1", "port": 0},
    }
    path = tmp_path / "channelkit.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    elapsed, status, out, err = _refused(["serve", "--config", str(path), "--workers", "2"])
    assert status == 4, (out, err)
    assert elapsed < LIMIT_S, elapsed
    assert err == [
        "channelkit serve: channel 'telegram' (telegram): credentials.botToken was refused by "
        "Telegram (HTTP 401: Unauthorized)"
    ]
    assert "workers on" not in out  # no worker was started
    getme = [c for c in emulators["telegram"].emulator.calls() if c["path"].endswith("/getMe")]
    assert len(getme) == 1  # the parent's check only

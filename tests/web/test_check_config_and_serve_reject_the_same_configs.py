"""check-config and serve share one validation: each invalid configuration below is
rejected by both commands, before serve binds a port, with the same one-line message
naming the JSON path (unknown keys included)."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from channelkit import cli

BASE: dict[str, Any] = {
    "channels": [
        {
            "platform": "dingtalk",
            "credentials": {"clientId": "ding-app", "clientSecret": {"env": "CK_SAME_SECRET"}},
            "options": {
                "ingress": "http",
                "cardCallbackRouteKey": "channelkit",
                "interactiveCards": {"enabled": True, "questionCard": {"timeoutMs": 270000}},
            },
        },
        {
            "platform": "telegram",
            "credentials": {"botToken": "123456:ABC-def"},
            "options": {"ingress": "webhook", "typingIntervalS": 4},
        },
        {
            "platform": "feishu",
            "credentials": {"appId": "cli_a", "appSecret": "s", "verificationToken": "v"},
            "options": {"forms": {"timeout_ms": 60000}},
        },
    ],
    "agent": {"type": "demo"},
    "options": {"maxWorkers": 4, "logLevel": "WARNING"},
    "server": {"host": "127.0.0.1", "port": 0, "shutdownGraceS": 5},
}

Mutation = Callable[[dict[str, Any]], None]
D0, T1, F2 = "channels.0.options.", "channels.1.options.", "channels.2.options."

# (what to set, to what, the path the error names when it is not the one set; "*" stands
# for the key set)
CASES: list[tuple[str, Any, str | None]] = [
    (D0 + "interactiveCards.enabled", "yes", None),
    (D0 + "interactiveCards.questionCard.timeoutMs", "soon", None),
    (T1 + "typingIntervalS", "fast", None),
    (D0 + "interactivCards", {}, None),
    (D0 + "interactiveCards.statusCard", {"enabeld": 1}, D0 + "interactiveCards.*.enabeld"),
    (D0 + "interactiveCards.questionCard.timeoutMS", 5000, None),
    (T1 + "typingInterval", 2, None),
    (F2 + "forms.timeoutMs", 60000, None),
    (F2 + "forms.timeout_ms", 5, None),
    (D0 + "blockStreaming", "maybe", None),
    (D0 + "hostPermissionTimeoutMs", -5, None),
    (D0 + "ingress", "pigeon", None),
    (T1 + "groupPolicy", "everyone", None),
    (T1 + "questionTimeoutS", -1, None),
    ("channels.1.credentials.botToken", "nope", None),
    ("channels.0.credentials.clientSecrt", "x", None),
    ("channels.0.option", {}, None),
    ("option", {}, None),
    ("options.maxWorker", 4, None),
    ("options.maxWorkers", 0, None),
    ("options.logLevel", "LOUD", None),
    ("server.prot", 8000, None),
    ("server.port", 99999, None),
    ("server.shutdownGraceS", 0, None),
    ("server.shutdownGraceS", "soon", None),
    ("agent", {"type": "demo", "func": "x:y"}, "agent.func"),
    ("agent", {"type": "function", "function": "no_such_mod_ck:agent"}, "agent.function"),
    ("agent", {"type": "acp", "command": "qwen '--acp"}, "agent.command"),
]  # fmt: skip


def _json_path(dotted: str) -> str:
    """``channels.0.options.x`` -> ``channels[0].options.x``."""
    out = ""
    for part in dotted.split("."):
        out += f"[{part}]" if part.isdigit() else ("." if out else "") + part
    return out


def _set(path: str, value: Any) -> Mutation:
    """A mutation setting the dotted ``path`` (``channels.0.options.x``) to ``value``."""

    def mutate(doc: dict[str, Any]) -> None:
        *parents, leaf = path.split(".")
        node: Any = doc
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        node[leaf] = value

    return mutate


def _write(tmp_path: Path, mutate: Mutation | None = None) -> str:
    doc = copy.deepcopy(BASE)
    if mutate is not None:
        mutate(doc)
    path = tmp_path / "channelkit.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return str(path)


def _reason(err: str, command: str) -> str:
    """The message after the command's prefix; asserts it is exactly one line."""
    lines = err.splitlines()
    assert len(lines) == 1, err
    prefix = f"channelkit {command}: invalid configuration: "
    assert lines[0].startswith(prefix), err
    return lines[0][len(prefix) :]


@pytest.fixture()
def no_binding(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CK_SAME_SECRET", "s3cret")
    monkeypatch.setattr(cli, "_pick_engine", lambda preferred: "waitress")

    def must_not_bind(*args: Any) -> None:
        raise AssertionError("serve got as far as starting the server")

    monkeypatch.setattr(cli, "run_server", must_not_bind)


def test_there_are_at_least_twenty_distinct_cases() -> None:
    assert len(CASES) >= 20
    assert len({(where, json.dumps(value)) for where, value, _ in CASES}) == len(CASES)


@pytest.mark.parametrize(
    ("where", "value", "named"), CASES, ids=[f"{w}={json.dumps(v)}" for w, v, _ in CASES]
)
def test_check_config_and_serve_reject_with_the_same_message_naming_the_path(
    where: str,
    value: Any,
    named: str | None,
    tmp_path: Path,
    no_binding: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = _json_path((named or where).replace("*", where.rsplit(".", 1)[-1]))
    config = _write(tmp_path, _set(where, value))
    assert cli.main(["check-config", config]) == 2
    checked = capsys.readouterr()
    assert cli.main(["serve", "--config", config]) == 2
    served = capsys.readouterr()
    assert checked.out == served.out == ""
    reason = _reason(checked.err, "check-config")
    assert reason == _reason(served.err, "serve")
    assert reason.startswith(f"{path}: "), reason


def test_a_missing_environment_variable_is_rejected_by_both(
    tmp_path: Path,
    no_binding: None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.delenv("CK_SAME_SECRET")
    config = _write(tmp_path)
    assert cli.main(["check-config", config]) == 2
    assert cli.main(["serve", "--check", "--config", config]) == 2
    first, second = capsys.readouterr().err.splitlines()
    reason = first.split("invalid configuration: ", 1)[1]
    assert reason == second.split("invalid configuration: ", 1)[1]
    assert reason.startswith("channels[0].credentials.clientSecret: environment variable")


def test_the_base_configuration_passes_both(
    tmp_path: Path, no_binding: None, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _write(tmp_path)
    assert cli.main(["check-config", config]) == 0
    assert cli.main(["serve", "--check", "--config", config]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == out[1] and out[0].startswith("ok: 3 channel(s)")


def test_real_processes_print_the_same_single_line(tmp_path: Path) -> None:
    config = _write(tmp_path, _set(D0 + "interactiveCards.enabled", "yes"))
    env = {"CK_SAME_SECRET": "s3cret", "PATH": "", "PYTHONPATH": ""}
    env["PYTHONPATH"] = str(Path(cli.__file__).resolve().parents[1])
    results = {}
    for command in (["check-config", config], ["serve", "--config", config, "--port", "0"]):
        done = subprocess.run(
            [sys.executable, "-m", "channelkit", *command],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
        )
        assert done.returncode == 2, done
        assert "Traceback" not in done.stderr and done.stdout == "", done
        results[command[0]] = _reason(done.stderr, command[0])
    assert results["check-config"] == results["serve"]
    assert results["serve"].startswith("channels[0].options.interactiveCards.enabled: ")

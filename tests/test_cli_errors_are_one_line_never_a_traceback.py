"""Every ``channelkit`` error is one line on stderr with a non-zero exit status, never a
traceback: bad arguments (ports outside 0-65535), missing, non-UTF-8 or invalid files,
and unexpected failures. ``python -m channelkit`` is the same command."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from channelkit import cli


def _one_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    try:
        code = cli.main(argv)
    except SystemExit as exited:  # argparse usage errors
        code = int(exited.code or 0)
    return code, _one_line(capsys.readouterr().err)


@pytest.fixture()
def files(tmp_path: Path) -> dict[str, str]:
    made = {
        "latin1": tmp_path / "latin1.json",
        "broken": tmp_path / "broken.json",
        "nan": tmp_path / "nan.json",
        "list": tmp_path / "list.json",
    }
    made["latin1"].write_bytes('{"channels": "caf\xe9"}'.encode("latin-1"))
    made["broken"].write_text('{"channels": [', encoding="utf-8")
    made["nan"].write_text('{"channels": NaN}', encoding="utf-8")
    made["list"].write_text("[]", encoding="utf-8")
    paths = {name: str(path) for name, path in made.items()}
    paths["missing"] = str(tmp_path / "missing.json")
    paths["dir"] = str(tmp_path)
    return paths


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["serve", "--config", "x.json", "--port", "99999"], "must be a port number 0-65535"),
        (["serve", "--config", "x.json", "--port", "-1"], "must be a port number 0-65535"),
        (["serve", "--config", "x.json", "--port", "http"], "must be a port number"),
        (["playground", "--port", "70000"], "must be a port number 0-65535"),
        (["serve", "--config", "x.json", "--grace", "0"], "--grace: must be more than 0"),
        (["serve", "--config", "x.json", "--grace", "nan"], "--grace: must be more than 0"),
        (["serve"], "the following arguments are required: --config"),
        (["no-such-command"], "invalid choice"),
    ],
)
def test_usage_errors_are_one_line_with_status_2(
    argv: list[str], expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, line = _run(argv, capsys)
    assert code == 2
    assert line.startswith("channelkit") and expected in line, line


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("missing", "cannot read"),
        ("dir", "cannot read"),
        ("latin1", "is not UTF-8 text (byte 0xe9 at offset 17)"),
        ("broken", "is not valid JSON"),
        ("nan", "is not valid JSON: NaN is not a JSON number"),
        ("list", "the document must be a JSON object"),
    ],
)
@pytest.mark.parametrize("command", ["check-config", "serve"])
def test_bad_configuration_files_are_one_line_with_status_2(
    command: str,
    name: str,
    expected: str,
    files: dict[str, str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = (
        [command, files[name]] if command == "check-config" else [command, "--config", files[name]]
    )
    code, line = _run(argv, capsys)
    assert code == 2
    assert line.startswith(f"channelkit {command}: invalid configuration: ")
    assert expected in line, line


def test_a_non_utf8_presentation_file_is_one_line(
    tmp_path: Path, files: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "telegram.json"
    config.write_text(
        '{"channels": [{"platform": "telegram", "credentials": {"botToken": "123456:ABC"},'
        ' "options": {"ingress": "webhook", "apiBaseUrl": "http://127.0.0.1:9"}}]}',
        encoding="utf-8",
    )
    argv = ["send", "--config", str(config), "--to", "c1", "--text", "hi"]
    code, line = _run([*argv, "--presentation", "@" + files["latin1"]], capsys)
    assert code == 2
    assert line == f"channelkit send: --presentation: {files['latin1']} is not UTF-8 text"


def test_an_unexpected_failure_is_one_line_with_status_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(args: Any) -> int:
        raise RuntimeError("the disk\nis on fire")

    monkeypatch.setattr(cli, "_cmd_info", broken)
    monkeypatch.delenv("CHANNELKIT_DEBUG", raising=False)
    code, line = _run(["info"], capsys)
    assert code == 1
    assert line == "channelkit info: failed: RuntimeError: the disk is on fire"


def test_python_dash_m_channelkit_is_the_command(files: dict[str, str]) -> None:
    version = subprocess.run(
        [sys.executable, "-m", "channelkit", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert version.returncode == 0, version.stderr
    assert version.stdout.strip() == cli.channelkit.__version__
    bad = subprocess.run(
        [sys.executable, "-m", "channelkit", "check-config", files["latin1"]],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and bad.stdout == ""
    assert "is not UTF-8 text" in _one_line(bad.stderr)

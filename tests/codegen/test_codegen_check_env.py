"""Issue 2 acceptance: the tox ``codegen-check`` env, run as tox.ini defines it.

On a scratch copy of the repository parts the generator reads and writes (``codegen/``,
``openapi/``, ``sdk/channelkit/clients/``): the env's own command passes on the committed
tree, ``python -m codegen`` twice in a row changes no byte, and editing a spec without
regenerating makes the env's command fail, naming the drifted files.
"""

from __future__ import annotations

import configparser
import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _env_commands() -> list[list[str]]:
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(ROOT / "tox.ini", encoding="utf-8")
    section = parser["testenv:codegen-check"]
    assert section.get("skip_install", "").strip() == "true"  # needs only the generator
    lines = [line.strip() for line in section["commands"].splitlines() if line.strip()]
    assert lines, "codegen-check has no commands"
    commands = []
    for line in lines:
        argv = shlex.split(line)
        if argv[0] == "python":
            argv[0] = sys.executable
        commands.append(argv)
    return commands


def _run_env(repo: Path) -> subprocess.CompletedProcess[str]:
    result = None
    for argv in _env_commands():
        result = subprocess.run(
            argv, cwd=repo, capture_output=True, text=True, timeout=60, env={"PATH": ""}
        )
        if result.returncode != 0:
            break
    assert result is not None
    return result


@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    copy = tmp_path / "repo"
    copy.mkdir()
    shutil.copytree(
        ROOT / "codegen", copy / "codegen", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copytree(ROOT / "openapi", copy / "openapi")
    shutil.copytree(
        ROOT / "sdk" / "channelkit" / "clients",
        copy / "sdk" / "channelkit" / "clients",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    shutil.copy(ROOT / "tox.ini", copy / "tox.ini")
    return copy


def _snapshot(repo: Path) -> dict[str, bytes]:
    base = repo / "sdk" / "channelkit" / "clients"
    return {str(p.relative_to(base)): p.read_bytes() for p in sorted(base.rglob("*.py"))}


def test_codegen_check_env_passes_on_the_committed_tree(repo: Path) -> None:
    result = _run_env(repo)
    assert result.returncode == 0, result.stdout + result.stderr


def test_python_dash_m_codegen_twice_produces_no_diff(repo: Path) -> None:
    committed = _snapshot(repo)
    for _ in range(2):
        done = subprocess.run(
            [sys.executable, "-m", "codegen"], cwd=repo, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert _snapshot(repo) == committed


def test_editing_a_spec_without_regenerating_fails_the_env(repo: Path) -> None:
    spec = repo / "openapi" / "telegram.json"
    doc = json.loads(spec.read_text(encoding="utf-8"))
    doc["info"]["description"] = doc["info"].get("description", "") + " Edited."
    spec.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    result = _run_env(repo)
    assert result.returncode != 0
    assert "telegram/client.py" in result.stdout + result.stderr
    assert "dingtalk" not in result.stdout  # only the drifted platform is named
    # Regenerating repairs it.
    subprocess.run([sys.executable, "-m", "codegen"], cwd=repo, check=True, capture_output=True)
    assert _run_env(repo).returncode == 0

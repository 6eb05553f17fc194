"""The repository's promises to a newcomer: two README commands, CI running the second."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```sh\n(.*?)```", text, flags=re.S)
    return [line.strip() for block in blocks for line in block.strip().splitlines()]


def test_readme_has_exactly_two_setup_commands() -> None:
    commands = _readme_commands()
    assert len(commands) == 2, commands
    assert "pip install" in commands[0] and "channelkit" in commands[0]
    assert "pip install" in commands[1] and "tox" in commands[1]


def test_ci_runs_the_readme_test_command_verbatim() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    test_command = _readme_commands()[1]
    assert test_command in ci


def test_pyproject_holds_only_the_build_system_table() -> None:
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    tables = re.findall(r"^\[([^\]]+)\]", text, flags=re.M)
    assert tables == ["build-system"]


def test_tox_declares_every_required_env() -> None:
    text = (ROOT / "tox.ini").read_text(encoding="utf-8")
    env_list = re.search(r"^env_list\s*=\s*(.+)$", text, flags=re.M)
    assert env_list is not None
    envs = {e.strip() for e in env_list.group(1).split(",")}
    assert {"py310", "py311", "py312", "py313", "lint", "type", "codegen-check"} <= envs

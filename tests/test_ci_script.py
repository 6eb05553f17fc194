"""`.ci/run` runs the README's test command with nothing set and fails when it fails, when
fewer than two Pythons ran, or when tox did not say which Pythons ran.

Finding the interpreters and counting them is tox's job (the project's `toxfile.py`,
tested in `test_tox_finds_every_python.py`); here a stand-in `python` plays tox."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

FAKE_PYTHON = """#!/usr/bin/env bash
# Stands in for python: pip succeeds; tox records its environment, then prints a scripted
# output and exit code.
if [ "$2" = "pip" ]; then exit 0; fi
if [ "$2" = "tox" ]; then
  {
    echo "PYENV_VERSION=${PYENV_VERSION-<unset>}"
    echo "PATH=$PATH"
  } >"$FAKE_TOX_ENV_FILE"
  printf '%b' "$FAKE_TOX_OUTPUT"
  exit "$FAKE_TOX_RC"
fi
exit 99
"""

FOUR_RAN = (
    "pythons: Python test environments: 4 ran: py310 (3.10.13 at /p/python3.10), "
    "py311 (3.11.7 at /p/python3.11), py312 (3.12.1 at /p/python3.12), "
    "py313 (3.13.0 at /p/python3.13); 0 skipped: none"
)
ONE_RAN = (
    "pythons: failed with Python test environments: 1 ran: py311 (3.11.7 at /p/python3.11); "
    "1 skipped: py310 (could not find python interpreter with spec(s): py310). "
    "Fewer than 2 Python versions ran the tests: install them"
)


def _run_ci(tmp_path: Path, tox_output: str, tox_rc: int) -> subprocess.CompletedProcess[str]:
    repo = tmp_path / "repo"
    (repo / ".ci").mkdir(parents=True)
    shutil.copy(ROOT / ".ci" / "run", repo / ".ci" / "run")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "python"
    fake.write_text(FAKE_PYTHON)
    fake.chmod(0o755)
    env = {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOME": str(tmp_path),
        "CHANNELKIT_CI_SKIP_SYSTEM": "1",
        "FAKE_TOX_OUTPUT": tox_output,
        "FAKE_TOX_RC": str(tox_rc),
        "FAKE_TOX_ENV_FILE": str(tmp_path / "tox-env.txt"),
    }
    return subprocess.run(
        ["bash", str(repo / ".ci" / "run")],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


needs_bash = pytest.mark.skipif(shutil.which("bash") is None, reason="bash is required")


@needs_bash
def test_ci_fails_when_the_test_command_fails(tmp_path: Path) -> None:
    result = _run_ci(tmp_path, "  py311: FAIL code 1\\n  py312: OK\\n", 1)
    assert result.returncode != 0
    assert "tox failed with exit code 1" in result.stdout


@needs_bash
def test_ci_fails_when_fewer_than_two_pythons_ran(tmp_path: Path) -> None:
    # tox's `pythons` env fails the run and says why; CI fails and repeats the reason.
    output = f"  py310: SKIP\\n{ONE_RAN}\\n  py311: OK\\n  pythons: FAIL code 1\\n"
    result = _run_ci(tmp_path, output, 1)
    assert result.returncode != 0
    assert "tox failed" in result.stdout
    assert "ci: pythons: failed with Python test environments: 1 ran: py311" in result.stdout
    assert "Fewer than 2 Python versions ran the tests" in result.stdout


@needs_bash
def test_ci_fails_when_tox_does_not_say_which_pythons_ran(tmp_path: Path) -> None:
    # A green tox without the `pythons` report (the env dropped from env_list) is no proof.
    result = _run_ci(tmp_path, "  py310: OK\\n  py311: OK\\n  type: OK\\n", 0)
    assert result.returncode != 0
    assert "tox did not say which Pythons ran" in result.stdout


@needs_bash
def test_ci_passes_with_the_report_and_repeats_it(tmp_path: Path) -> None:
    # Coloured output (a terminal, FORCE_COLOR) still yields the report line.
    coloured = f"\\033[1m\\033[35m{FOUR_RAN[:8]}\\033[0m{FOUR_RAN[8:]}"
    output = f"  py310: OK\\n{coloured}\\n  py311: OK\\n  pythons: OK\\n"
    result = _run_ci(tmp_path, output, 0)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"ci: {FOUR_RAN}\n" in result.stdout


@needs_bash
def test_ci_sets_no_interpreter_variable_for_tox(tmp_path: Path) -> None:
    # tox finds the interpreters itself: CI neither selects pyenv versions nor edits PATH.
    _run_ci(tmp_path, f"{FOUR_RAN}\\n", 0)
    seen = dict(line.split("=", 1) for line in (tmp_path / "tox-env.txt").read_text().splitlines())
    assert seen["PYENV_VERSION"] == "<unset>"
    assert seen["PATH"] == f"{tmp_path / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"

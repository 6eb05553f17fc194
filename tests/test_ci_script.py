"""`.ci/run` fails when the test command fails or when fewer than two Pythons ran."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

FAKE_PYTHON = """#!/usr/bin/env bash
# Stands in for python: pip succeeds; tox prints a scripted summary and exit code.
if [ "$2" = "pip" ]; then exit 0; fi
if [ "$2" = "tox" ]; then
  printf '%b' "$FAKE_TOX_OUTPUT"
  exit "$FAKE_TOX_RC"
fi
exit 99
"""


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
    }
    return subprocess.run(
        ["bash", str(repo / ".ci" / "run")],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is required")
def test_ci_fails_when_the_test_command_fails(tmp_path: Path) -> None:
    result = _run_ci(tmp_path, "  py311: FAIL code 1\\n  py312: OK\\n", 1)
    assert result.returncode != 0
    assert "tox failed" in result.stdout


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is required")
def test_ci_fails_when_fewer_than_two_pythons_ran(tmp_path: Path) -> None:
    result = _run_ci(tmp_path, "  py310: SKIP\\n  py311: OK\\n  lint: OK\\n", 0)
    assert result.returncode != 0
    assert "fewer than two Python versions" in result.stdout


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is required")
def test_ci_passes_with_two_pythons_green(tmp_path: Path) -> None:
    result = _run_ci(tmp_path, "  py310: OK\\n  py311: OK\\n  type: OK\\n", 0)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "python versions that ran the suite: 2" in result.stdout

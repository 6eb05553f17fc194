"""A parallel run on cold bytecode collects once before its workers start.

`tests/bytecode_warmup.py` decides from pytest's own bytecode files whether the run's test
modules still need their assertions rewritten; these tests run real pytest processes on a
scratch test directory and check that decision against what pytest wrote.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.bytecode_warmup import PYTEST_PYC_TAIL, rewritten_bytecode_missing

TEST_MODULE = "def test_it():\n    assert 1 + 1 == 2\n"


def bytecode_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.pop("PYTEST_XDIST_WORKER", None)
    return env


def two_workers(root: Path) -> str:
    """Run the scratch suite under ``root`` in two workers (it must pass); its output."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "suite"],
        cwd=root,
        env={**bytecode_env(), "WARMUP_PROBE": "1"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def scratch_suite(tmp_path: Path) -> Path:
    suite = tmp_path / "suite"
    (suite / "inner").mkdir(parents=True)
    (suite / "test_one.py").write_text(TEST_MODULE)
    (suite / "inner" / "test_two.py").write_text(TEST_MODULE)
    (suite / "inner" / "helper.py").write_text("VALUE = 1\n")  # not a test module
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    return suite


def test_pytests_own_collection_writes_what_the_check_looks_for(tmp_path: Path) -> None:
    suite = scratch_suite(tmp_path)
    assert rewritten_bytecode_missing([suite])
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "suite"],
        cwd=tmp_path,
        env=bytecode_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    written = sorted(p.name for p in suite.rglob(f"*{PYTEST_PYC_TAIL}"))
    assert written == [f"test_one{PYTEST_PYC_TAIL}", f"test_two{PYTEST_PYC_TAIL}"]
    assert not rewritten_bytecode_missing([suite])
    assert not rewritten_bytecode_missing([suite / "inner" / "test_two.py"])
    (suite / "inner" / "test_three.py").write_text(TEST_MODULE)  # a new module: cold again
    assert rewritten_bytecode_missing([suite])


def test_a_parallel_run_on_cold_bytecode_warms_it_before_its_workers_start(
    tmp_path: Path,
) -> None:
    """A two-worker run: the controller's warm-up has written every test module's
    bytecode by the time pytest-xdist starts the workers (its own session-start hook runs
    after every other), and the run passes."""
    scratch_suite(tmp_path)
    probe = tmp_path / "probe"
    (tmp_path / "conftest.py").write_text(
        "import os, sys\n"
        f"sys.path.insert(0, {str(Path(__file__).resolve().parents[1])!r})\n"
        "from pathlib import Path\n"
        "from tests.bytecode_warmup import rewritten_bytecode_missing, warm_before_workers\n"
        "def pytest_sessionstart(session):\n"
        "    warmed = warm_before_workers(session.config)\n"
        "    if 'PYTEST_XDIST_WORKER' not in os.environ and os.environ.get('WARMUP_PROBE'):\n"
        "        cold = rewritten_bytecode_missing([Path(__file__).parent / 'suite'])\n"
        f"        Path({str(probe)!r}).write_text(f'warmed={{warmed}} cold={{cold}}')\n"
    )
    assert "2 passed" in two_workers(tmp_path)
    assert probe.read_text() == "warmed=True cold=False"
    # warm now: the next run collects nothing ahead
    assert "2 passed" in two_workers(tmp_path)
    assert probe.read_text() == "warmed=False cold=False"

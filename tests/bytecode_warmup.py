"""Collect once before pytest-xdist's workers start, so they load warm bytecode.

Every worker collects every test file. On a fresh clone (or a Python the suite has not
run under yet) each of them would rewrite the assertions of all the test modules, about
73,000 lines: 11 s of CPU for a cold collection against 3.5 s for a warm one on the
2-core machine of docs/performance.md. One collection in a child process first writes
that bytecode (pytest keeps it in ``__pycache__`` next to each module) and the workers
load it. Measured there with six workers, from the start to the first test: 27 s of wall
time and 53 s of CPU cold, 21 s and 31 s with this warm-up, 13 s and 25 s warm.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

import pytest

#: The name pytest gives a module's rewritten bytecode: ``test_x.py`` ->
#: ``__pycache__/test_x<PYTEST_PYC_TAIL>`` (its interpreter's cache tag and pytest's
#: version, so each Python and each pytest release has its own).
PYTEST_PYC_TAIL = f".{sys.implementation.cache_tag}-pytest-{pytest.__version__}.pyc"

#: Bound on the warm-up collection (a cold one takes about 11 s on two cores).
WARMUP_TIMEOUT_S = 300.0


def rewritten_bytecode_missing(paths: Iterable[Path]) -> bool:
    """True when a test module or conftest under ``paths`` has no rewritten bytecode."""
    for path in paths:
        files = [path] if path.is_file() else path.rglob("*.py")
        for file in files:
            if not (file.name.startswith("test_") or file.name == "conftest.py"):
                continue
            if not (file.parent / "__pycache__" / (file.stem + PYTEST_PYC_TAIL)).exists():
                return True
    return False


def warm_before_workers(config: pytest.Config) -> bool:
    """In the pytest-xdist controller of a run with two or more workers, collect the
    run's paths once in a child process when some rewritten bytecode is missing. Returns
    whether it collected. Nothing to do in a worker, a serial run, ``--collect-only``, or
    with bytecode writing off (``PYTHONDONTWRITEBYTECODE``: nothing would be kept)."""
    workers = getattr(config.option, "numprocesses", None)
    if not isinstance(workers, int) or workers < 2 or hasattr(config, "workerinput"):
        return False
    if config.option.collectonly or sys.dont_write_bytecode:
        return False
    paths = [Path(config.rootpath, arg.split("::")[0]) for arg in config.args]
    paths = [path for path in paths if path.exists()]
    if not paths or not rewritten_bytecode_missing(paths):
        return False
    try:
        subprocess.run(
            [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
            + [str(path) for path in paths],
            cwd=config.rootpath,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=WARMUP_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pass  # only a head start: the workers collect on their own regardless
    return True

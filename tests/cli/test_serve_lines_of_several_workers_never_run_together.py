"""The lines ``channelkit serve`` prints stay whole when several workers print at once.

``serve --workers N`` runs N processes that share one terminal or pipe, each printing its
start-up lines (``waitress listening on ...``, the channels and routes). With unbuffered
output (``PYTHONUNBUFFERED``, as under a process supervisor or these tests) `print()`
wrote a line's text and its newline apart, so another worker's line could land in
between: two lines ran together and a reader waiting for a line never saw it. The serve
command writes each line with one call; four processes printing thousands of lines into
one pipe show no broken line (with `print()` instead, 96 and 968 of the 8,000 lines
broke in two runs).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINES = 2_000
PROCESSES = 4
PREFIX = "channelkit serve: waitress listening on http://127.0.0.1:"


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_lines_printed_by_four_processes_at_once_stay_whole(stream: str) -> None:
    err = stream == "stderr"
    code = (
        "from channelkit.cli import _say\n"
        f"for i in range({LINES}):\n"
        f"    _say({PREFIX!r} + str(i), err={err})\n"
    )
    env = {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "PYTHONPATH": os.pathsep.join([str(ROOT / "sdk"), os.environ.get("PYTHONPATH", "")]),
    }
    read_end, write_end = os.pipe()
    target = {"stderr": write_end} if err else {"stdout": write_end}
    try:
        procs = [
            subprocess.Popen([sys.executable, "-c", code], env=env, **target)
            for _ in range(PROCESSES)
        ]
    finally:
        os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        data = pipe.read().decode()
    assert all(proc.wait(60) == 0 for proc in procs)

    lines = data.split("\n")
    assert lines[-1] == ""  # every line ended
    broken = [line for line in lines[:-1] if not _whole(line)]
    assert not broken, f"{len(broken)} broken lines, e.g. {broken[:3]}"
    assert len(lines) - 1 == PROCESSES * LINES


def _whole(line: str) -> bool:
    return (
        line.startswith(PREFIX) and line.count("channelkit") == 1 and line[len(PREFIX) :].isdigit()
    )

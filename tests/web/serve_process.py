"""Run ``channelkit`` commands as real processes on 127.0.0.1 (bounded, always killed)."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

# The child sets the signal dispositions a command started from a terminal has, then runs
# ``channelkit`` as ``-m`` would. A process inherits ignored signals across exec: pytest
# started from a background or non-interactive shell (``pytest &``, some CI runners) ignores
# SIGINT, and so would every child it starts (Python installs its KeyboardInterrupt handler
# only when SIGINT is not ignored at start, and ``channelkit`` leaves an ignored signal
# ignored), so a test sending SIGINT would wait for an exit that never comes. Set in the
# child itself, not with ``preexec_fn`` (unsafe in this threaded test process).
_RUN_WITH_TERMINAL_SIGNALS = (
    "import runpy, signal\n"
    "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
    "signal.signal(signal.SIGTERM, signal.SIG_DFL)\n"
    "runpy.run_module('channelkit', run_name='__main__', alter_sys=True)\n"
)


def channelkit_argv(args: Sequence[str]) -> list[str]:
    """``python -m channelkit ARGS`` with SIGINT and SIGTERM at their defaults in the child,
    whatever this test process inherited."""
    return [sys.executable, "-c", _RUN_WITH_TERMINAL_SIGNALS, *args]


class CommandProcess:
    """``python -m channelkit ARGS`` with stdout read line by line on a thread; SIGINT and
    SIGTERM have their default dispositions in the child (see ``channelkit_argv``)."""

    def __init__(self, args: Sequence[str], *, pythonpath: Sequence[Path] = ()) -> None:
        env = dict(os.environ)
        paths = [str(p) for p in pythonpath]
        if env.get("PYTHONPATH"):
            paths.append(env["PYTHONPATH"])
        env["PYTHONPATH"] = os.pathsep.join(paths)
        env["PYTHONUNBUFFERED"] = "1"
        self.proc = subprocess.Popen(
            channelkit_argv(args),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            start_new_session=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.stdout: list[str] = []
        self.stderr: list[str] = []
        threading.Thread(target=self._pump, args=(self.proc.stdout, True), daemon=True).start()
        threading.Thread(target=self._pump, args=(self.proc.stderr, False), daemon=True).start()

    def _pump(self, stream: object, is_stdout: bool) -> None:
        for line in stream:  # type: ignore[attr-defined]
            (self.stdout if is_stdout else self.stderr).append(line)
            if is_stdout:
                self.lines.put(line)

    def wait_for_line(self, pattern: str, timeout: float = 60.0) -> re.Match[str]:
        """The first stdout line matching ``pattern`` (fails after ``timeout`` s)."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or (self.proc.poll() is not None and self.lines.empty()):
                raise AssertionError(
                    f"no line matching {pattern!r}; stdout={self.stdout} stderr={self.stderr}"
                )
            try:
                line = self.lines.get(timeout=min(left, 0.5))
            except queue.Empty:
                continue
            found = re.search(pattern, line)
            if found:
                return found

    def signal(self, signum: int) -> None:
        self.proc.send_signal(signum)

    def wait(self, timeout: float) -> int:
        return self.proc.wait(timeout)

    def kill(self) -> None:
        """Kill the process group if still running (call from a finally)."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                self.proc.kill()
            self.proc.wait(10)

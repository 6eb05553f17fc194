"""The ACP agent's child process: spawning, reading, signalling, stopping and reaping.

An `AgentProcess` is one spawned agent with its reader threads and the requests
in flight to it (``calls``: one `Call` each, registered and settled by
`channelkit.agents.acp.rpc`, which builds on this module). `read_line()` reads
one bounded line of the agent's output. The bridge decides *when* a process starts and
what its death means for turns and permissions; this module only knows how to start
one, read from it, and make sure it is gone.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any

from channelkit.errors import AgentProcessError

logger = logging.getLogger(__name__)

#: The longest line read from the agent's output (longer lines are skipped).
MAX_LINE_BYTES = 16 * 1024 * 1024

_STDERR_LINE_CHARS = 500
_SIGKILL = getattr(signal, "SIGKILL", signal.SIGTERM)


@dataclass
class Call:
    """One request the bridge sent; settled by the reader thread."""

    method: str
    done: bool = False
    result: Any = None
    error: BaseException | None = None


def read_line(stream: IO[bytes]) -> bytes | None:
    """One line (without bound overflow), or None at EOF. Over-long lines are skipped."""
    line = stream.readline(MAX_LINE_BYTES)
    if not line:
        return None
    if len(line) >= MAX_LINE_BYTES and not line.endswith(b"\n"):
        logger.warning("acp agent wrote a line over %d bytes; skipped", MAX_LINE_BYTES)
        while True:
            rest = stream.readline(MAX_LINE_BYTES)
            if not rest or rest.endswith(b"\n"):
                break
        return b""
    return line


class AgentProcess:
    """One spawned agent process with its threads and in-flight calls."""

    def __init__(self, popen: subprocess.Popen[bytes], generation: int) -> None:
        self.popen = popen
        self.generation = generation
        self.calls: dict[int, Call] = {}
        self.dead = False
        self.reader: threading.Thread | None = None
        self.stderr_reader: threading.Thread | None = None
        self.agent_info: Mapping[str, Any] = {}

    def returncode(self) -> int | None:
        """The exit code, or None while the process runs."""
        return self.popen.poll()

    def death_message(self) -> str:
        """Why the process can no longer be talked to, for errors and ``session_died``."""
        rc = self.popen.poll()
        if rc is None:
            return "agent process closed its output"
        return f"agent process exited with code {rc}"

    def gone_error(self) -> AgentProcessError:
        """The error a call to a dead process raises."""
        return AgentProcessError(self.death_message(), returncode=self.returncode())


def spawn(
    command: Sequence[str], cwd: str, env: Mapping[str, str] | None
) -> subprocess.Popen[bytes]:
    """Start ``command`` with piped stdio in its own session (POSIX), ``env`` added to ours."""
    full_env = None
    if env is not None:
        full_env = dict(os.environ)
        full_env.update(env)
    kwargs: dict[str, Any] = {}
    if os.name == "posix":
        kwargs["start_new_session"] = True
    try:
        return subprocess.Popen(
            list(command),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=full_env,
            **kwargs,
        )
    except OSError as exc:
        reason = exc.strerror or exc
        raise AgentProcessError(f"cannot start agent {command[0]!r}: {reason}") from exc


def reader_threads(
    proc: AgentProcess,
    read_stdout: Callable[[AgentProcess], None],
    read_stderr: Callable[[AgentProcess], None],
) -> None:
    """Attach (unstarted) daemon threads reading the process's stdout and stderr."""
    pid = proc.popen.pid
    proc.reader = threading.Thread(
        target=read_stdout, args=(proc,), name=f"channelkit-acp-reader-{pid}", daemon=True
    )
    proc.stderr_reader = threading.Thread(
        target=read_stderr, args=(proc,), name=f"channelkit-acp-stderr-{pid}", daemon=True
    )


def kill_orphan(popen: subprocess.Popen[bytes], close_timeout: float) -> None:
    """Kill a process spawned after the bridge closed, wait for it, close its pipes."""
    signal_process(popen, _SIGKILL)
    popen.wait(timeout=close_timeout)
    for stream in (popen.stdin, popen.stdout, popen.stderr):
        with contextlib.suppress(OSError, ValueError):
            if stream is not None:
                stream.close()


def stop(proc: AgentProcess, write_lock: threading.Lock, close_timeout: float) -> None:
    """Close stdin, wait, SIGTERM, wait, SIGKILL, wait; then reap and join threads."""
    popen = proc.popen
    # A writer blocked on a full pipe (agent not reading) holds the write lock: do not
    # wait for it forever, kill the agent instead, which fails that write.
    locked = write_lock.acquire(timeout=close_timeout)
    if locked:
        try:
            with contextlib.suppress(OSError, ValueError):
                if popen.stdin is not None:
                    popen.stdin.close()
        finally:
            write_lock.release()
    else:
        signal_process(popen, _SIGKILL)
    try:
        popen.wait(timeout=close_timeout)
    except subprocess.TimeoutExpired:
        signal_process(popen, signal.SIGTERM)
        try:
            popen.wait(timeout=close_timeout)
        except subprocess.TimeoutExpired:
            signal_process(popen, _SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                popen.wait(timeout=close_timeout)
    reap(proc, close_timeout)


def signal_process(popen: subprocess.Popen[bytes], sig: int) -> None:
    """Send ``sig`` to the process group (POSIX) or the process; quiet if it is gone."""
    if popen.poll() is not None:
        return
    try:
        if os.name == "posix":
            os.killpg(popen.pid, sig)
        elif sig == signal.SIGTERM:
            popen.terminate()
        else:
            popen.kill()
    except (ProcessLookupError, PermissionError, OSError):
        with contextlib.suppress(OSError):
            popen.kill() if sig != signal.SIGTERM else popen.terminate()


def reap(proc: AgentProcess, close_timeout: float) -> None:
    """Wait for the process and join its threads (bounded)."""
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.popen.wait(timeout=close_timeout)
    current = threading.current_thread()
    for thread in (proc.reader, proc.stderr_reader):
        if thread is not None and thread is not current:
            thread.join(timeout=close_timeout)
    for stream in (proc.popen.stdout, proc.popen.stderr):
        with contextlib.suppress(OSError, ValueError):
            if stream is not None:
                stream.close()


def drain_stderr(stream: IO[bytes], record: Callable[[str], None]) -> None:
    """Read stderr to EOF, passing each non-empty line (decoded, capped) to ``record``."""
    try:
        while True:
            line = read_line(stream)
            if line is None:
                break
            text = line.decode("utf-8", "replace").rstrip()[:_STDERR_LINE_CHARS]
            if not text:
                continue
            record(text)
            logger.debug("acp agent stderr: %s", text)
    except Exception:
        logger.debug("acp stderr reader stopped", exc_info=True)

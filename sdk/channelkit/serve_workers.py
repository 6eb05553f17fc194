"""``channelkit serve --workers N``: N processes of one configuration on one port.

The parent binds the listening socket once and starts N children (``python -m
channelkit serve`` of the same configuration), each handed the socket (its file
descriptor in `SOCKET_ENV`) and its index (in
`channelkit.cluster_config.WORKER_ENV`). Each child is a whole ``serve``: its own
channels, pools and agent bridge, waitress accepting on the shared socket (the kernel
gives each connection to one of them). What one process holds in memory (which
instance owns a run, its cards, one-shot claims) the others find in the shared state
store, so N > 1 requires ``state.redis``.

Metrics and logs: unless the environment sets them already, the parent gives its workers
one fresh ``PROMETHEUS_MULTIPROC_DIR`` (so ``GET /metrics`` of any worker answers the sum
over all of them; removed when the parent exits) and one ``CHANNELKIT_LOG_SALT`` (so the
hashed chats of their log lines agree). A worker that exited has its live gauges
forgotten before it is started again.

The parent forwards SIGTERM/SIGINT to every child and waits the grace period plus a
margin (then kills what is left); a child that exits on its own is started again after
a second (same index, so the same ``instanceName`` suffix: it recovers its own cards).
Unix only (the socket is inherited by file descriptor).
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence

from channelkit.cluster_config import WORKER_ENV
from channelkit.observability.metrics import MULTIPROC_ENV, mark_process_dead
from channelkit.observability.observer import LOG_SALT_ENV

__all__ = ["SOCKET_ENV", "inherited_socket", "run_workers"]

#: The listening socket's file descriptor, in each worker's environment.
SOCKET_ENV = "CHANNELKIT_SERVE_SOCKET_FD"

_RESTART_DELAY_S = 1.0


def inherited_socket() -> socket.socket | None:
    """The listening socket ``serve --workers`` handed this process, else None."""
    fd = os.environ.get(SOCKET_ENV, "")
    if not fd.isdigit():
        return None
    return socket.socket(fileno=int(fd))


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(1024)
    sock.set_inheritable(True)
    return sock


class _Workers:
    def __init__(
        self,
        argv: Sequence[str],
        count: int,
        sock: socket.socket,
        env: dict[str, str] | None = None,
    ) -> None:
        self.argv = list(argv)
        self.count = count
        self.sock = sock
        self.env = dict(env or {})  # added to every worker's environment
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.stopping = threading.Event()

    def spawn(self, index: int) -> None:
        env = dict(os.environ)
        env.update(self.env)
        env[WORKER_ENV] = str(index)
        env[SOCKET_ENV] = str(self.sock.fileno())
        self.procs[index] = subprocess.Popen(
            [sys.executable, "-m", "channelkit", "serve", *self.argv],
            env=env,
            pass_fds=(self.sock.fileno(),),
        )

    def supervise(self) -> None:
        """Until stopping: restart a worker that exited on its own."""
        while not self.stopping.wait(0.2):
            for index, proc in list(self.procs.items()):
                code = proc.poll()
                if code is None or self.stopping.is_set():
                    continue
                sys.stderr.write(
                    f"channelkit serve: worker {index} (pid {proc.pid}) exited with status "
                    f"{code}; starting it again\n"
                )
                sys.stderr.flush()
                # its live gauges no longer count
                mark_process_dead(proc.pid, self.env.get(MULTIPROC_ENV))
                if self.stopping.wait(_RESTART_DELAY_S):
                    return
                self.spawn(index)

    def stop(self, grace: float) -> int:
        """SIGTERM every worker, wait ``grace`` + 5 s, kill the rest; 0 when all stopped
        cleanly: exited 0, or ended by that SIGTERM itself, which happens to a worker
        still starting (before ``serve`` handles the signal it has built nothing to
        close)."""
        self.stopping.set()
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace + 5.0
        status = 0
        for proc in self.procs.values():
            try:
                code = proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                code = proc.wait()
            if code not in (0, -signal.SIGTERM):
                status = 1
        return status


def run_workers(argv: Sequence[str], count: int, host: str, port: int, grace: float) -> int:
    """Serve with ``count`` worker processes until SIGTERM/SIGINT; the exit status.

    ``argv`` are the ``serve`` arguments each worker gets (``--config``, ``--grace``,
    ...; not ``--host``/``--port``/``--workers``). A bind failure raises ``OSError``.
    """
    sock = _listen(host, port)
    bound = sock.getsockname()[1]
    env: dict[str, str] = {}
    metrics_dir: str | None = None
    if not os.environ.get(MULTIPROC_ENV):
        metrics_dir = tempfile.mkdtemp(prefix="channelkit-metrics-")
        env[MULTIPROC_ENV] = metrics_dir
    if not os.environ.get(LOG_SALT_ENV):
        env[LOG_SALT_ENV] = secrets.token_hex(16)
    workers = _Workers(argv, count, sock, env)
    stop = threading.Event()
    previous = {}

    def interrupt(signum: int, frame: object) -> None:
        stop.set()

    for signum in (signal.SIGINT, signal.SIGTERM):
        previous[signum] = signal.signal(signum, interrupt)
    try:
        shown = f"[{host}]" if ":" in host else host
        sys.stdout.write(f"channelkit serve: {count} workers on http://{shown}:{bound}\n")
        sys.stdout.flush()
        for index in range(count):
            workers.spawn(index)
        supervisor = threading.Thread(target=workers.supervise, daemon=True)
        supervisor.start()
        while not stop.wait(0.5):
            pass
        return workers.stop(grace)
    finally:
        workers.stopping.set()
        for proc in workers.procs.values():  # only after an error before stop()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        sock.close()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if metrics_dir is not None:
            shutil.rmtree(metrics_dir, ignore_errors=True)

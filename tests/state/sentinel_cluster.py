"""A Redis primary, its replica and three Sentinels on 127.0.0.1, for failover tests.

`running_cluster()` starts them in a directory and kills them on exit; it skips the
test when ``redis-server`` is not installed.
Every wait polls observable state with a deadline.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

redis = pytest.importorskip("redis", reason="redis-py is not installed (the redis extra)")

SERVICE = "svc"
HOST = "127.0.0.1"


def wait_until(check: Callable[[], Any], timeout_s: float, what: str) -> Any:
    """Poll ``check`` until it returns a truthy value, at most ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            value = check()
        except (redis.RedisError, OSError):
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.05)  # polling a process's state, not waiting for a timer


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


class Cluster:
    """A primary, a replica and three Sentinels monitoring them as ``svc``."""

    def __init__(self, executable: str, workdir: Path) -> None:
        self.executable = executable
        self.workdir = workdir
        self.processes: dict[int, subprocess.Popen[bytes]] = {}
        self.primary = self.server(free_port())
        self.replica = self.server(free_port(), "--replicaof", HOST, str(self.primary))
        primary = self.client(self.primary)
        replica = self.client(self.replica)
        wait_until(
            lambda: replica.info("replication").get("master_link_status") == "up",
            15,
            "the replica to sync",
        )
        wait_until(
            lambda: primary.info("replication").get("connected_slaves") == 1,
            15,
            "the primary to list its replica",
        )
        self.sentinels = [self.sentinel(free_port(), i) for i in range(3)]
        for port in self.sentinels:
            sentinel = self.client(port)
            wait_until(
                lambda s=sentinel: (
                    int(s.sentinel_master(SERVICE)["num-other-sentinels"]) == 2
                    and s.sentinel_slaves(SERVICE)
                ),
                20,
                f"sentinel {port} to know the others and the replica",
            )

    def spawn(self, port: int, args: list[str]) -> int:
        process = subprocess.Popen(
            [self.executable, *args],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.processes[port] = process
        client = self.client(port)
        wait_until(lambda: process.poll() is None and client.ping(), 10, f"port {port} to answer")
        return port

    def server(self, port: int, *extra: str) -> int:
        args = ["--port", str(port), "--bind", HOST, "--save", "", "--appendonly", "no"]
        args += ["--repl-diskless-sync-delay", "0"]  # a replica syncs at once
        return self.spawn(port, [*args, "--dir", str(self.workdir), *extra])

    def sentinel(self, port: int, index: int) -> int:
        conf = self.workdir / f"sentinel-{index}.conf"
        conf.write_text(
            f"port {port}\nbind {HOST}\ndir {self.workdir}\n"
            f"sentinel monitor {SERVICE} {HOST} {self.primary} 2\n"
            f"sentinel down-after-milliseconds {SERVICE} 1000\n"
            f"sentinel failover-timeout {SERVICE} 5000\n"
        )
        return self.spawn(port, [str(conf), "--sentinel"])

    @staticmethod
    def client(port: int) -> Any:
        return redis.Redis(host=HOST, port=port, socket_timeout=1, socket_connect_timeout=1)

    def addresses(self) -> list[str]:
        return [f"{HOST}:{port}" for port in self.sentinels]

    def named_primary(self) -> int:
        """The primary's port as the first Sentinel names it."""
        host, port = self.client(self.sentinels[0]).sentinel_get_master_addr_by_name(SERVICE)
        return int(port)

    def wait_for_primary(self, port: int) -> None:
        for sentinel_port in self.sentinels:  # every Sentinel, so the store asks any of them
            sentinel = self.client(sentinel_port)
            wait_until(
                lambda s=sentinel: int(s.sentinel_get_master_addr_by_name(SERVICE)[1]) == port,
                20,
                f"sentinel {sentinel_port} to name port {port} the primary",
            )
        replica = self.client(port)
        wait_until(
            lambda: replica.info("replication").get("role") == "master",
            10,
            f"port {port} to be a primary",
        )

    def kill(self, port: int) -> None:
        process = self.processes[port]
        os.kill(process.pid, signal.SIGKILL)
        process.wait(10)

    def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.kill()
                process.wait(10)


@contextlib.contextmanager
def running_cluster(workdir: Path) -> Iterator[Cluster]:
    """A started cluster in ``workdir``, killed on exit; skips without redis-server."""
    executable = shutil.which("redis-server")
    if executable is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server)")
    made = Cluster(executable, workdir)
    try:
        yield made
    finally:
        made.stop()


def replicate(cluster: Cluster) -> None:
    """Wait until the replica acknowledged every write so far (``WAIT``)."""
    primary = cluster.client(cluster.named_primary())
    assert primary.execute_command("WAIT", 1, 5000) == 1

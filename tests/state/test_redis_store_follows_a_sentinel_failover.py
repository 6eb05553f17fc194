"""A `RedisStore` built through Redis Sentinel keeps working across a failover.

Real processes on 127.0.0.1: a primary, a replica (``--replicaof``) and three Sentinels
(``redis-server <conf> --sentinel``, quorum 2, ``down-after-milliseconds`` 1000). The
primary is killed (SIGKILL) or demoted (``SENTINEL FAILOVER``); once the Sentinels name
the replica as primary, the same store object reads what was written before, writes
new keys and runs its lease and guarded-write scripts there. A write that reaches the
demoted primary (``READONLY``) is sent once more on the new one instead of failing.
Every wait polls observable state with a deadline.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

redis = pytest.importorskip("redis", reason="redis-py is not installed (the redis extra)")

from channelkit.errors import ConfigurationError  # noqa: E402
from channelkit.state import RedisStore  # noqa: E402
from channelkit.state.base import GUARD_WRITTEN  # noqa: E402

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


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    executable = shutil.which("redis-server")
    if executable is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server)")
    made = Cluster(executable, tmp_path)
    try:
        yield made
    finally:
        made.stop()


def sentinel_store(cluster: Cluster) -> RedisStore:
    return RedisStore(
        sentinels=cluster.addresses(),
        sentinel_service=SERVICE,
        namespace=f"ha-{uuid.uuid4().hex[:10]}",
    )


def replicate(cluster: Cluster) -> None:
    """Wait until the replica acknowledged every write so far (``WAIT``)."""
    primary = cluster.client(cluster.named_primary())
    assert primary.execute_command("WAIT", 1, 5000) == 1


def test_the_store_keeps_working_on_the_new_primary_after_the_old_one_is_killed(
    cluster: Cluster,
) -> None:
    store = sentinel_store(cluster)
    try:
        store.put("conv:1", {"text": "before"})
        assert store.add("dedup:1", {"at": 1}) is True
        token = store.hold_lease("lease:a", {"owner": "one"}, token=0, ttl_s=60, counter="tok")
        assert token >= 1
        replicate(cluster)

        cluster.kill(cluster.primary)
        cluster.wait_for_primary(cluster.replica)

        assert store.get("conv:1") == {"text": "before"}
        assert store.add("dedup:1", {"at": 2}) is False  # the dedup mark survived
        store.put("conv:2", {"text": "after"})
        assert store.get("conv:2") == {"text": "after"}
        # the scripts run on the new primary (loaded there on first use)
        assert (
            store.hold_lease("lease:a", {"owner": "one"}, token=token, ttl_s=60, counter="tok")
            == token
        )
        assert store.write_if("lease:a", "token", token, "card:1", {"v": 1}) == GUARD_WRITTEN
        record, outcome = store.claim_matching(
            "card:1", {"v": "1"}, "claim:1", {"by": "one"}, guard="lease:a", field="token",
            expected=token,
        )  # fmt: skip
        assert (record, outcome) == ({"v": 1}, GUARD_WRITTEN)
        assert cluster.client(cluster.replica).exists(f"{store.namespace}:k:claim:1") == 1
        store.push("inbox", {"m": 1})  # the blocking client follows the new primary too
        assert store.pop("inbox", 2.0) == {"m": 1}
    finally:
        store.close()


def test_a_write_that_reaches_the_demoted_primary_is_sent_again_on_the_new_one(
    cluster: Cluster,
) -> None:
    store = sentinel_store(cluster)
    try:
        store.put("conv:1", {"text": "before"})
        replicate(cluster)
        old = cluster.client(cluster.primary)
        # the store holds an idle connection to the primary, which is about to be demoted
        assert cluster.client(cluster.sentinels[0]).execute_command("SENTINEL", "FAILOVER", SERVICE)
        cluster.wait_for_primary(cluster.replica)
        # the Sentinels reconfigure the old primary on their next 10 s INFO round; do
        # now what they would do then
        old.execute_command("REPLICAOF", HOST, str(cluster.replica))
        wait_until(
            lambda: old.info("replication").get("role") == "slave",
            15,
            "the old primary to become a replica",
        )

        # the pooled connection still reaches the old primary: READONLY, then once more
        store.put("conv:2", {"text": "after"})
        assert cluster.client(cluster.replica).get(f"{store.namespace}:k:conv:2") is not None
        assert store.get("conv:1") == {"text": "before"}
        assert store.add("dedup:1", {"at": 1}) is True
    finally:
        store.close()


def test_the_store_repr_and_errors_never_show_the_sentinel_password() -> None:
    store = RedisStore(
        sentinels=["127.0.0.1:1"],
        sentinel_service=SERVICE,
        sentinel_password="s3cret-sentinel",
        password="s3cret-primary",
        socket_timeout_s=0.2,
    )
    try:
        assert "s3cret" not in repr(store)
        assert "sentinels=('127.0.0.1:1',)" in repr(store)
        with pytest.raises(Exception) as caught:
            store.ping()
        assert "s3cret" not in str(caught.value)
        assert "sentinels 127.0.0.1:1" in str(caught.value)
    finally:
        store.close()


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"sentinels": ["127.0.0.1"], "sentinel_service": SERVICE}, "sentinels[0]"),
        ({"sentinels": ["h:70000"], "sentinel_service": SERVICE}, "sentinels[0]"),
        ({"sentinels": "h:26379", "sentinel_service": SERVICE}, "sentinels"),
        ({"sentinels": [], "sentinel_service": SERVICE}, "sentinels"),
        ({"sentinels": ["h:26379"]}, "sentinel_service"),
        ({"url": "redis://h", "sentinel_service": SERVICE}, "sentinel_service"),
        ({}, "url"),
        ({"url": "redis://h", "password": ""}, "password"),
        ({"url": "redis://h", "tls_ca_file": "/nonexistent.pem"}, "tls_ca_file"),
        ({"url": "redis://h", "tls": True, "tls_ca_file": "/nonexistent.pem"}, "tls_ca_file"),
    ],
)
def test_bad_high_availability_arguments_name_the_argument(
    kwargs: dict[str, Any], field: str
) -> None:
    with pytest.raises(ConfigurationError) as caught:
        RedisStore(**kwargs)
    assert caught.value.path == field, str(caught.value)

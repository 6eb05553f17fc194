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

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

redis = pytest.importorskip("redis", reason="redis-py is not installed (the redis extra)")

from channelkit.errors import ConfigurationError, StateStoreUnavailable  # noqa: E402
from channelkit.state import RedisStore  # noqa: E402
from channelkit.state.base import GUARD_WRITTEN  # noqa: E402

from tests.state.sentinel_cluster import (  # noqa: E402
    HOST,
    SERVICE,
    Cluster,
    replicate,
    running_cluster,
    wait_until,
)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    with running_cluster(tmp_path) as made:
        yield made


def sentinel_store(cluster: Cluster) -> RedisStore:
    return RedisStore(
        sentinels=cluster.addresses(),
        sentinel_service=SERVICE,
        namespace=f"ha-{uuid.uuid4().hex[:10]}",
    )


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
        ({"url": "unix:///run/redis.sock", "tls": True}, "tls"),
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


class LoseNextReply:
    """Arm it and the next reply read from Redis is lost after the command ran there (the
    connection drops, as when the primary dies between executing a write and answering)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.armed = False
        self.lost = 0
        real = redis.sentinel.SentinelManagedConnection.read_response
        outer = self

        def read_response(self: Any, *args: Any, **kwargs: Any) -> Any:
            reply = real(self, *args, **kwargs)
            if outer.armed:
                outer.armed = False
                outer.lost += 1
                self.disconnect()
                raise redis.ConnectionError("reply lost in a failover")
            return reply

        monkeypatch.setattr(
            redis.sentinel.SentinelManagedConnection, "read_response", read_response
        )

    def __call__(self) -> None:
        self.armed = True


def test_a_write_whose_reply_was_lost_is_checked_not_done_twice(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = sentinel_store(cluster)
    try:
        store.ping()  # scripts are loaded and connections made before the losses below
        lose = LoseNextReply(monkeypatch)

        lose()
        assert store.add("dedup:1", {"at": 1}) is True  # ours, though SET NX then said no
        lose()
        token = store.hold_lease("lease:a", {"owner": "one"}, token=0, ttl_s=60, counter="c")
        assert token == 1  # the lease the lost reply took, not a refusal nor a second token
        lose()
        assert store.write_if(
            "lease:a", "token", token, "card:1", {"v": 1}, only_if_absent=True
        ) == (GUARD_WRITTEN)
        lose()
        record, outcome = store.claim_matching(
            "card:1", {"v": "1"}, "claim:1", {"by": "one"}, guard="lease:a", field="token",
            expected=token,
        )  # fmt: skip
        assert (record, outcome) == ({"v": 1}, GUARD_WRITTEN)
        lose()
        assert store.replace("card:1", {"v": 1}, {"v": 2}) is True
        assert store.get("card:1") == {"v": 2}
        assert store.add("dedup:1", {"at": 1}) is False  # a second caller is still refused

        lose()  # a queue push is never repeated: it fails, and the message is there once
        with pytest.raises(StateStoreUnavailable):
            store.push("inbox", {"m": 1})
        assert cluster.client(cluster.primary).llen(f"{store.namespace}:q:inbox") == 1
        assert lose.lost == 6
    finally:
        store.close()

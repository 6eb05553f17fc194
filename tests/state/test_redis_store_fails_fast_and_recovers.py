"""RedisStore without Redis: StateStoreUnavailable fast, never a raw redis-py error, and
the same store object works again as soon as Redis is back (no restart of the process).
"""

from __future__ import annotations

import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from channelkit.errors import StateStoreUnavailable

redis = pytest.importorskip("redis", reason="redis-py is not installed (the redis extra)")

from channelkit.state import RedisStore  # noqa: E402

FAST_S = 3.0  # "quickly": the default socket timeout is 1 s; refused connections are instant


@pytest.fixture
def server(redis_server: Any) -> Iterator[Any]:
    try:
        yield redis_server
    finally:
        redis_server.start()  # the server is shared by the session


@pytest.fixture
def store(server: Any) -> Iterator[RedisStore]:
    made = RedisStore(server.url, namespace=f"ff-{uuid.uuid4().hex[:8]}")
    try:
        yield made
    finally:
        made.close()


def every_method(store: RedisStore) -> dict[str, Callable[[], object]]:
    return {
        "put": lambda: store.put("k", {"v": 1}),
        "get": lambda: store.get("k"),
        "delete": lambda: store.delete("k"),
        "add": lambda: store.add("claim", {"v": 1}, ttl_s=60),
        "replace": lambda: store.replace("k", {"v": 1}, {"v": 2}),
        "push": lambda: store.push("q", {"m": 1}),
        "pop": lambda: store.pop("q", 0.2),
        "scan": lambda: store.scan(""),
        "ping": store.ping,
    }


def test_every_method_raises_state_store_unavailable_quickly_while_redis_is_down_then_works_again(
    server: Any, store: RedisStore
) -> None:
    store.put("k", {"v": 1})
    assert store.replace("k", {"v": 1}, {"v": 1}) is True  # the script is cached now
    server.stop()
    for name, call in every_method(store).items():
        started = time.monotonic()
        with pytest.raises(StateStoreUnavailable) as caught:
            call()
        assert time.monotonic() - started < FAST_S, name
        assert not isinstance(caught.value, redis.RedisError), name
        assert caught.value.__cause__ is None, name
        assert "unreachable" in str(caught.value), name
    server.start()  # an empty Redis (no persistence): nothing survived, not even the script
    assert store.get("k") is None
    store.put("k", {"v": 1})
    assert store.replace("k", {"v": 1}, {"v": 2}) is True
    assert store.add("claim", {"v": 1}, ttl_s=60) is True
    store.push("q", {"m": 1})
    assert store.pop("q", 1.0) == {"m": 1}
    assert store.scan("") == ["claim", "k"]
    store.ping()


def test_the_first_call_after_an_unnoticed_restart_succeeds(server: Any, store: RedisStore) -> None:
    # Pooled connections are opened, then Redis restarts while nobody calls: the pool
    # must not hand a dead connection to the next call.
    race = [threading.Thread(target=store.ping) for _ in range(4)]
    for thread in race:
        thread.start()
    for thread in race:
        thread.join(10)
    store.put("k", {"v": 1})
    server.stop()
    server.start()
    assert store.get("k") is None
    assert store.add("k", {"v": 2}) is True
    store.push("q", {"m": 1})
    assert store.pop("q", 1.0) == {"m": 1}


def test_a_pop_waiting_when_redis_goes_away_fails_at_once_not_at_its_timeout(
    server: Any, store: RedisStore
) -> None:
    outcome: list[BaseException | object] = []

    def wait() -> None:
        try:
            outcome.append(store.pop("never", 60.0))
        except BaseException as exc:  # surfaced below
            outcome.append(exc)

    raw = redis.Redis.from_url(server.url)
    blocked = int(raw.info("clients")["blocked_clients"])
    thread = threading.Thread(target=wait)
    thread.start()
    deadline = time.monotonic() + 10
    while int(raw.info("clients")["blocked_clients"]) <= blocked:  # the BLPOP is waiting
        assert time.monotonic() < deadline, "the pop never reached Redis"
        time.sleep(0.01)
    raw.close()
    stopped = time.monotonic()
    server.stop()
    thread.join(FAST_S + 5)
    assert not thread.is_alive()
    assert time.monotonic() - stopped < FAST_S + 5
    assert len(outcome) == 1 and isinstance(outcome[0], StateStoreUnavailable), outcome


def test_a_redis_that_accepts_but_never_answers_times_out_within_the_socket_timeout() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)  # connections complete in the backlog; nothing ever answers
        port = silent.getsockname()[1]
        store = RedisStore(f"redis://127.0.0.1:{port}/0", namespace="silent", socket_timeout_s=0.2)
        try:
            for name, call in every_method(store).items():
                started = time.monotonic()
                with pytest.raises(StateStoreUnavailable):
                    call()
                assert time.monotonic() - started < FAST_S, name
        finally:
            store.close()


def test_the_password_of_the_url_never_appears_in_errors_or_repr(server: Any) -> None:
    secret = "s3cret-Pa55"
    # the test server has no user "alice": AUTH fails, and the message must not echo it
    wrong = RedisStore(f"redis://alice:{secret}@127.0.0.1:{server.port}/0", namespace="pw")
    with pytest.raises(StateStoreUnavailable) as refused:
        wrong.ping()
    server.stop()
    with pytest.raises(StateStoreUnavailable) as unreachable:
        wrong.get("k")
    for text in (str(refused.value), str(unreachable.value), repr(wrong), wrong.url):
        assert secret not in text
    assert "***" in wrong.url
    wrong.close()


def test_keys_and_queues_live_under_the_namespace_with_redis_ttls(
    server: Any, store: RedisStore
) -> None:
    raw = redis.Redis.from_url(server.url)
    try:
        store.put("run:1", {"v": 1}, ttl_s=60)
        store.push("jobs", {"m": 1})
        ns = store.namespace
        assert raw.get(f"{ns}:k:run:1") == b'{"v":1}'
        assert 59_000 < raw.pttl(f"{ns}:k:run:1") <= 60_000
        assert raw.lrange(f"{ns}:q:jobs", 0, -1) == [b'{"m":1}']
        store.put("run:1", {"v": 2})
        assert raw.pttl(f"{ns}:k:run:1") == -1, "a put without ttl_s stores without expiry"
    finally:
        raw.close()

"""Contract: a message delivered again after 20,000 other messages starts no second run.

Dedup memory is bounded (10,000 ids per guard). Before, a bounded guard forgot the oldest
id to make room and then took a redelivery of it for a new message: after 10,050 other
messages a redelivered DingTalk message or a replayed Telegram update started a second
run. The rule now (``channelkit.platforms.common.replay``): ordered ids (Telegram
``update_id``) keep a high-water mark; other ids are remembered until the platform's send
time plus its redelivery window, and when the memory bound is reached the window shrinks
and older ids are refused, never accepted twice.

On every chat platform through its emulator: the person sends one message and gets the
answer; 20,000 other messages reach the channel's dedup (fed to its dedup objects, as
the ingress does for each message, so the test takes seconds instead of 20,000 runs);
then the platform delivers the first message again through the real ingress. In-process,
and with the dedup claims in a real redis-server on 127.0.0.1 (where a second instance
sharing the store must refuse the id too). The dedup maps stay bounded (asserted); the
bytes they hold are measured with tracemalloc and printed when the output is shown
(``-s``) only: tracing every allocation makes the 20,000 messages about ten times slower
in process and three times slower on Redis, for a figure nothing asserts.
"""

from __future__ import annotations

import time
import tracemalloc
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from channelkit.agents import Turn
from channelkit.platforms.common.replay import MAX_REPLAY_ENTRIES, ReplayGuard
from channelkit.platforms.common.shared_dedup import SharedDedup
from contract_drivers import BOUND_S, DRIVERS
from contract_harness import Context, known_defect, new_token, open_platform

pytestmark = pytest.mark.slow  # many seconds of real time: its file starts first

OTHER_MESSAGES = 20_000


def dedup_gates(platform: str, channel: Any) -> list[Any]:
    """Every dedup object a message of ``platform`` passes on its way in (frame-level
    guards of a long connection first, then the message-level one); a platform defined
    outside the package names them with its driver's ``dedup_gates(channel)``."""
    if platform == "dingtalk":
        frames = [c._seen for c in channel.connections]  # Stream frames (messageId)
        return [*frames, channel._seen]
    if platform == "feishu":
        return [channel._events_seen]
    if platform == "telegram":
        return [channel._seen_updates]
    if platform == "slack":
        return [channel._seen_events]
    if platform == "weixin":
        return [channel.polling._seen]
    named = getattr(DRIVERS.get(platform), "dedup_gates", None)  # a plug-in's driver
    if named is not None:
        return list(named(channel))
    raise AssertionError(f"{platform}: name its dedup objects in dedup_gates")


def other_key(gate: Any, i: int) -> Any:
    """The i-th other message's id, shaped like the platform's (ordered ints for an
    ordered guard: later updates have higher ids)."""
    ordered = getattr(local_guard(gate), "ordered", False)
    if ordered or getattr(gate, "scope", "") == "telegram-update":
        return 2_000_000_000 + i
    return f"other-{i}-{uuid.uuid4().hex[:6]}"


def local_guard(gate: Any) -> ReplayGuard:
    return gate.local if isinstance(gate, SharedDedup) else gate


@pytest.fixture(params=sorted(DRIVERS))
def fresh(request: pytest.FixtureRequest) -> Iterator[Context]:
    with open_platform(request.param) as context:
        yield context


def replay_after_other_messages(
    ctx: Context, store: Any = None, measure: bool = False
) -> tuple[int, int, dict[int, Any]]:
    """The flow of both tests; returns (entries remembered, bytes they took (0 unless
    ``measure``), the first message's key by ``id(dedup object)``)."""
    d = ctx.driver
    channel = d.pg.channel
    gates = dedup_gates(d.platform, channel)
    if store is not None:
        shared = [g for g in gates if isinstance(g, SharedDedup)]
        if not shared:
            pytest.skip(f"{d.platform}: its dedup is per process (no shared store)")
        for gate in shared:
            gate.store = store
    token = new_token()
    runs: list[str] = []

    def counts(turn: Turn) -> str:
        runs.append(turn.text)
        return f"once {token}"

    ctx.script.fn = counts
    first_keys: dict[int, list[Any]] = {id(g): [] for g in gates}
    for gate in gates:  # note the id each dedup object is asked about
        gate.first = _recording(gate.first, first_keys[id(gate)])
        if isinstance(gate, SharedDedup):  # adapters ask claim() for the reason
            gate.claim = _recording_claim(gate.claim, first_keys[id(gate)])
    d.send(f"first {token}")
    d.wait_segment(f"once {token}", "completed")
    assert channel.wait_idle(BOUND_S)
    assert runs == [f"first {token}"]
    for gate in gates:
        del gate.first  # the class's method again
        if isinstance(gate, SharedDedup):
            del gate.claim
        assert first_keys[id(gate)], f"{d.platform}: {type(gate).__name__} never asked"

    if measure:
        tracemalloc.start()
        before = tracemalloc.take_snapshot()
    for i in range(OTHER_MESSAGES):
        if i % 10 == 0:
            d.clock.advance(0.01)  # a thousand messages a second
        for gate in gates:
            assert gate.first(other_key(gate, i)), "a new message was refused"
    held = 0
    if measure:
        after = tracemalloc.take_snapshot()
        tracemalloc.stop()
        held = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    sizes = [len(local_guard(g)) for g in gates]
    assert all(size <= MAX_REPLAY_ENTRIES for size in sizes), sizes  # bounded

    assert d.redeliver_last_message() == 200  # ACKed, so the platform stops retrying
    time.sleep(0.3)  # a second run would start now
    assert channel.wait_idle(BOUND_S)
    d.settle()
    assert runs == [f"first {token}"], f"{d.platform}: the redelivery started a second run"
    assert len([s for s in d.segments() if f"once {token}" in s.text]) == 1
    return max(sizes), held, {id(g): first_keys[id(g)][0] for g in gates}


def _recording(first: Any, keys: list[Any]) -> Any:
    def record(key: Any, *args: Any) -> bool:
        keys.append(key)
        return bool(first(key, *args))

    return record


def _recording_claim(claim: Any, keys: list[Any]) -> Any:
    def record(key: Any, *args: Any, **kwargs: Any) -> str:
        keys.append(key)
        return str(claim(key, *args, **kwargs))

    return record


def shown(request: pytest.FixtureRequest) -> bool:
    """True when the run shows the tests' output (``-s``): the memory figure is printed."""
    return bool(request.config.getoption("capture") == "no")


def test_a_replay_after_twenty_thousand_messages_starts_no_second_run(
    fresh: Context, request: pytest.FixtureRequest
) -> None:
    known_defect(fresh.driver, "replay_after_memory_bound", request)
    entries, held, _ = replay_after_other_messages(fresh, measure=shown(request))
    print(f"\n{fresh.driver.platform}: {entries} ids remembered, {held / 1e6:.2f} MB")


def test_with_redis_a_replay_after_twenty_thousand_messages_starts_no_second_run(
    fresh: Context, redis_server: Any, request: pytest.FixtureRequest
) -> None:
    from channelkit.state.redis import RedisStore

    store = RedisStore(redis_server.url, namespace=f"replay-{uuid.uuid4().hex[:8]}")
    entries, held, keys = replay_after_other_messages(fresh, store, measure=shown(request))
    print(f"\n{fresh.driver.platform} (redis): {entries} ids remembered, {held / 1e6:.2f} MB")
    # a second instance of the bot (its own memory, the same store) refuses the first
    # message's id as well
    channel = fresh.driver.pg.channel
    for gate in dedup_gates(fresh.driver.platform, channel):
        if isinstance(gate, SharedDedup):
            twin = SharedDedup(channel.clock.time, ttl=gate.ttl, scope=gate.scope, store=store)
            assert not twin.first(keys[id(gate)]), f"{gate.scope}: the store forgot it"

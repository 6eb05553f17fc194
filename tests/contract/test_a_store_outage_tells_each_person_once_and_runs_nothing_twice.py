"""Contract: while the shared state store is down, each person whose message or Stop
cannot be handled is told once that the bot is temporarily unavailable; nothing runs
twice and work resumes without a restart when the store comes back empty.

On every chat platform through its emulator, with the channel's store (dedup claims,
``/healthz``) in a real redis-server on 127.0.0.1 that the test stops and starts again
empty (no persistence), as ``state.redis`` wires it under ``serve``:

* before: a message is answered; the owner starts a run that holds until stopped;
* Redis stopped: ``GET /healthz`` answers 503 naming the store; the owner presses Stop
  (``/cancel`` where the platform has no button): the run stops, or, where the Stop
  itself needs the store (a message or an update), the owner is told; then the owner
  sends a message and two other people send two and one: every delivery is
  acknowledged, none starts a run, and each of the three people is told
  ``MSG_STORE_UNAVAILABLE`` exactly once (in the chat, after the ACK);
* Redis back, empty: ``/healthz`` is 200 again; the platform redelivers the held
  message (it ran before the outage) to an instance that has not seen it: it does not
  run again; once the fail-closed window (``state.resetFailClosedSeconds``) has passed a
  new message runs, once.

``/healthz`` is what ``serve`` answers (`health_report()` of the channel: 503 when not
ok).

Two clicks besides Stop, on the platforms that have them: a question's answer (a form
submit) and a presentation's value button pressed during the outage are taken once where
the platform settles them in memory (the process showing them); where they need the
store (a Telegram button tap is an update; a Feishu presentation press is the person's
message) they are acknowledged, change nothing, and the presser is told once however
often they press; pressed after the outage they are taken once.

A platform that keeps nothing in the store (``shared_store`` ``"none"`` in the registry)
is not affected at all: its Stop and messages are handled during the outage and nobody
is told anything. Nothing here waits for a timer: the channel's clock is fake; every
wait is bounded and ends on what the chat or the store shows.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from copy import copy
from typing import Any

import pytest
from channelkit.agents import Turn
from channelkit.core.catalog import LOCALES, messages
from channelkit.core.text import MSG_STORE_UNAVAILABLE
from channelkit.ingress import IngressRequest
from channelkit.platforms import get_platform
from channelkit.platforms.common.replay import ReplayGuard
from channelkit.platforms.common.shared_dedup import SharedDedup
from channelkit.platforms.common.store_watch import watch_of
from channelkit.web.health import health_report, health_response
from contract_drivers import BOUND_S, Driver, wait_for
from contract_harness import COLOR, Context, ask, new_token, pending

pytest.importorskip("redis", reason="redis-py is not installed (the redis extra)")

#: ``state.resetFailClosedSeconds`` of the test's bot: the fake clock passes it once the
#: redelivery was refused (the emulators stamp deliveries with the real time, which the
#: fake clock runs ahead of, so without passing it a new message would count as sent
#: before the wipe was noticed)
FAIL_CLOSED_S = 20.0
NOTICES = frozenset(messages(locale).text(MSG_STORE_UNAVAILABLE) for locale in LOCALES)

HEALTH_PROBE = IngressRequest("GET", "/healthz", {}, b"")

_people = itertools.count(72_000_001)


def person() -> str:
    """A person id nobody used before (numeric: Telegram's ids are integers)."""
    return str(next(_people))


@pytest.fixture
def server(redis_server: Any) -> Iterator[Any]:
    try:
        yield redis_server
    finally:
        redis_server.start()  # the server is shared by the session


def shared_gates(channel: Any) -> list[SharedDedup]:
    """Every dedup object a delivery passes that can keep its claims in a store: the
    channel's own and its long connections' (Weixin's ``getupdates`` poll)."""
    owners = [channel, *(getattr(channel, "connections", ()) or ())]
    return [g for o in owners for g in vars(o).values() if isinstance(g, SharedDedup)]


def use_store(channel: Any, store: Any) -> list[SharedDedup]:
    """The channel as ``serve`` builds it with ``state.redis``: its dedup claims and
    its ``/healthz`` state entry in ``store``; the shared dedup objects."""
    gates = shared_gates(channel)
    for gate in gates:
        gate.store = store
    if gates:  # a platform that keeps nothing in the store is given none by serve
        channel.state_store = store
    return gates


def redelivery_of_last_message(d: Driver) -> Callable[[], int]:
    """Delivers the owner's last message as of now again later (the platform's retry of
    a delivery it thinks was lost), whatever is delivered in between."""
    if d.platform == "dingtalk":  # Stream mode: the gateway sends the frame again
        frame = next(c for c in reversed(d.emulator.callbacks()) if c["kind"] == "robot")

        def again_on_stream() -> int:
            ack = d.emulator.stream.redeliver(frame["messageId"])
            return 200 if ack is not None and ack.code == 200 else 0

        return again_on_stream
    kept = {
        k: copy(getattr(d, k)) for k in ("_deliveries", "_sealed", "_last_msg_id") if hasattr(d, k)
    }

    def again() -> int:
        with d._deliveries_lock:
            for key, value in kept.items():
                setattr(d, key, copy(value))
        return d.redeliver_last_message()

    return again


def as_another_instance(channel: Any) -> None:
    """Forget in this process every delivery seen so far, as the memory of another
    instance of the bot (its own process, the same store) never saw them: the shared
    dedup objects' local guards and the long connections' frame guards start empty."""

    def fresh(guard: ReplayGuard) -> ReplayGuard:
        return ReplayGuard(
            guard._time,
            ttl=guard.ttl,
            maxsize=guard.maxsize,
            ordered=guard.ordered,
            scope=guard.scope,
        )

    for gate in shared_gates(channel):
        gate.local = fresh(gate.local)
    for connection in getattr(channel, "connections", ()) or ():
        for name, value in list(vars(connection).items()):
            if isinstance(value, ReplayGuard):
                setattr(connection, name, fresh(value))


def notice_the_wipe(store: Any) -> None:
    """What the instance's next claim does first after an outage: read the store's epoch
    (gone: the store came back empty). Done before the fake clock passes the fail-closed
    window, so the window is measured from when the wipe was noticed, as it would be."""
    watch = watch_of(store)
    watch.check_epoch(force=True)
    assert watch.reset_at is not None, "the wipe was not noticed"


def idle(d: Driver) -> None:
    """Wait (bounded) until no run is active; the fake clock moves meanwhile (segment
    flushes wait on it)."""
    wait_for(lambda: d.pg.channel.wait_idle(0.2), "the channel to go idle", tick=d.tick)


def notices(d: Driver) -> int:
    """How many store-unavailable notices the chats show (any language)."""
    return sum(1 for text in d.chat_texts() if text in NOTICES)


def healthz(channel: Any) -> tuple[int, dict[str, Any]]:
    """What ``serve``'s ``GET /healthz`` answers for ``channel``: status and document."""
    response = health_response(lambda: health_report([channel]))(HEALTH_PROBE)
    return response.status, json.loads(response.body)


def test_a_store_outage_tells_each_person_once_and_runs_nothing_twice(
    own_ctx: Context, server: Any
) -> None:
    from channelkit.state.redis import RedisStore

    d, token = own_ctx.driver, new_token()
    channel = d.pg.channel
    store = RedisStore(server.url, namespace=f"outage-{uuid.uuid4().hex[:8]}", clock=d.clock)
    watch_of(store, d.clock.time).fail_closed_s = FAIL_CLOSED_S  # resetFailClosedSeconds
    gates = use_store(channel, store)
    uses_store = get_platform(d.platform).shared_store != "none"
    assert bool(gates) == uses_store, f"{d.platform}: {gates} vs shared_store"

    runs: list[str] = []
    lock = threading.Lock()
    held = threading.Event()
    cancelled = threading.Event()

    def script(turn: Turn) -> str | None:
        with lock:
            runs.append(turn.text)
        if turn.text.startswith("hold"):
            turn.say(f"holding {token}")
            held.set()
            deadline = time.monotonic() + 3 * BOUND_S
            while not turn.cancelled and time.monotonic() < deadline:
                time.sleep(0.01)
            if turn.cancelled:
                cancelled.set()
            return None
        return f"answer {token}"

    own_ctx.script.fn = script
    try:
        d.send(f"before {token}")
        d.wait_segment(f"answer {token}", "completed")
        d.send(f"hold {token}")
        assert held.wait(BOUND_S), "the held run did not start"
        segment = d.wait_stoppable(f"holding {token}") if d.caps.stop_button is None else None
        redeliver_held = redelivery_of_last_message(d)  # it ran: a retry must not run again
        status, document = healthz(channel)
        assert status == 200, document

        server.stop()
        try:
            status, document = healthz(channel)
            assert status == (503 if uses_store else 200), document
            if uses_store:
                state = document["state"][channel.name]
                assert state["ok"] is False and state["store"] == "redis", state
                assert state["error"].startswith("StateStoreUnavailable"), state
            else:  # the store is not in its path: nothing to report
                assert channel.name not in document.get("state", {}), document

            drops = sum(g.outage_drops for g in gates)
            d.stop_run(segment)  # a Stop button, or /cancel
            wait_for(
                lambda: cancelled.is_set() or notices(d) == 1,
                "the Stop to stop the run or the owner to be told",
                tick=d.tick,
            )
            stop_handled = cancelled.is_set()
            stop_dropped = sum(g.outage_drops for g in gates) - drops
            assert stop_handled != bool(stop_dropped), (stop_handled, stop_dropped)

            one, two = person(), person()
            d.send_as(f"owner during {token}")
            d.send_as(f"one during {token}", user=one)
            d.send_as(f"two during {token}", user=two)
            if not uses_store:  # answered: the next message is a run of its own
                wait_for(lambda: len(runs) == 5, lambda: f"three messages to run: {runs}")
                idle(d)
            d.send_as(f"one again {token}", user=one)
            if uses_store:
                # every delivery reached the dedup (long connections deliver on their own
                # thread) before the notices are counted
                wait_for(
                    lambda: sum(g.outage_drops for g in gates) >= drops + stop_dropped + 4,
                    lambda: f"four dropped deliveries (now {[g.outage_drops for g in gates]})",
                    tick=d.tick,
                )
                wait_for(lambda: notices(d) >= 3, "a notice to each of three people", tick=d.tick)
                d.settle()
                assert notices(d) == 3, d.chat_texts()  # once each, not per message
                with lock:
                    assert runs == [f"before {token}", f"hold {token}"], runs  # nothing ran
            else:
                wait_for(lambda: len(runs) == 6, lambda: f"the four messages to run: {runs}")
                assert notices(d) == 0
        finally:
            server.start()  # back, empty (no persistence)

        status, document = healthz(channel)  # the first probe after Redis answers: no restart
        assert status == 200, document
        if uses_store:
            assert document["state"][channel.name]["ok"] is True, document
            # the platform redelivers the held message (it ran before the outage) to an
            # instance that has not seen it: only the store could tell, and it was wiped
            watch = watch_of(store)
            refused = watch.reset_drops
            as_another_instance(channel)
            assert redeliver_held() == 200  # acknowledged, so the platform stops retrying
            wait_for(lambda: watch.reset_drops > refused, "the redelivery to be refused")
        else:  # without a store another instance could not tell: this one can
            assert redeliver_held() == 200
            idle(d)
        with lock:
            assert runs.count(f"hold {token}") == 1, runs  # not run twice after the wipe
        d.clock.advance(FAIL_CLOSED_S + 1)  # the fail-closed window has passed
        if not stop_handled:  # the owner stops the held run now: handled
            d.stop_run(segment)
            assert cancelled.wait(BOUND_S), "the Stop after the outage did not stop the run"
        d.send_as(f"after {token}")
        wait_for(lambda: f"after {token}" in runs, lambda: f"the new message to run: {runs}")
        idle(d)
        d.settle()
        with lock:
            assert runs.count(f"after {token}") == 1, runs
            assert runs.count(f"hold {token}") == 1, runs
        assert notices(d) == (3 if uses_store else 0), d.chat_texts()  # still once each
    finally:
        store.close()


def test_a_question_answered_during_a_store_outage_is_taken_once_or_its_owner_told_once(
    own_ctx: Context, server: Any
) -> None:
    """A form submit (a question's answer) while the store is down: taken, exactly once,
    where the platform settles it in memory; else acknowledged, changing nothing, and the
    owner told once however often they press; their answer after the outage is taken."""
    from channelkit.state.redis import RedisStore

    d = own_ctx.driver
    d.require("native_questions")
    channel = d.pg.channel
    store = RedisStore(server.url, namespace=f"outage-{uuid.uuid4().hex[:8]}", clock=d.clock)
    watch_of(store, d.clock.time).fail_closed_s = FAIL_CLOSED_S
    gates = use_store(channel, store)
    outcomes = own_ctx.script.outcomes
    own_ctx.script.fn = ask(own_ctx.script, COLOR)
    try:
        d.send("ask")
        prompt = pending(d, "Pick a color?")
        server.stop()
        try:
            drops = sum(g.outage_drops for g in gates)
            d.answer(prompt, "Blue")
            wait_for(
                lambda: not outcomes.empty() or notices(d) == 1,
                "the answer to be taken or its owner told",
                tick=d.tick,
            )
            taken = not outcomes.empty()
            if not taken:  # pressed again: acknowledged, not told twice
                d.answer(prompt, "Blue")
                wait_for(
                    lambda: sum(g.outage_drops for g in gates) >= drops + 2,
                    "the second press to be dropped",
                    tick=d.tick,
                )
                d.settle()
                assert notices(d) == 1, d.chat_texts()
                assert outcomes.empty()
                assert d.prompt("Pick a color?").state == "pending"
        finally:
            server.start()  # back, empty
        if not taken:
            notice_the_wipe(store)
            d.clock.advance(FAIL_CLOSED_S + 1)  # past the fail-closed window
            d.answer(d.prompt("Pick a color?"), "Blue")
        else:
            assert notices(d) == 0, d.chat_texts()
        assert own_ctx.script.outcome() == {"0": "Blue"}
        d.wait_prompt("Pick a color?", "submitted")
        assert own_ctx.script.no_outcome()  # taken once
    finally:
        store.close()


def test_a_presentation_button_pressed_during_a_store_outage_runs_once_or_its_presser_is_told_once(
    own_ctx: Context, server: Any
) -> None:
    """A presentation's value button (the person's message, from a click) while the store
    is down: it runs, once, where the click needs no store; else it is acknowledged,
    starts nothing, and the presser is told once however often they press; pressed after
    the outage, it runs once."""
    from channelkit.state.redis import RedisStore

    d, token = own_ctx.driver, new_token()
    d.require("presentation_buttons")
    channel = d.pg.channel
    store = RedisStore(server.url, namespace=f"outage-{uuid.uuid4().hex[:8]}", clock=d.clock)
    watch_of(store, d.clock.time).fail_closed_s = FAIL_CLOSED_S
    gates = use_store(channel, store)
    value = f"hello from a button {token}"
    seen: list[str] = []
    lock = threading.Lock()

    def fn(turn: Turn) -> str:
        if turn.text == "present":
            button = {"label": "Say hello", "value": value}
            turn.present({"title": "Buttons", "blocks": [{"type": "buttons", "buttons": [button]}]})
            return ""
        with lock:
            seen.append(turn.text)
        return f"You wrote: {turn.text}"

    own_ctx.script.fn = fn
    try:
        d.send("present")
        shown = wait_for(lambda: d.presentation_keyboard("Say hello"), "the presentation")

        def press() -> None:
            d.click(shown["id"], "tap", {"data": shown["buttons"]["Say hello"]["data"]})

        server.stop()
        try:
            drops = sum(g.outage_drops for g in gates)
            press()
            wait_for(
                lambda: value in seen or notices(d) == 1,
                "the press to run or its presser to be told",
                tick=d.tick,
            )
            taken = value in seen
            if not taken:  # pressed again: acknowledged, not told twice
                press()
                wait_for(
                    lambda: sum(g.outage_drops for g in gates) >= drops + 2,
                    "the second press to be dropped",
                    tick=d.tick,
                )
                d.settle()
                assert notices(d) == 1, d.chat_texts()
                assert seen == []
        finally:
            server.start()  # back, empty
        if not taken:
            notice_the_wipe(store)
            d.clock.advance(FAIL_CLOSED_S + 1)  # past the fail-closed window
            press()
        else:
            assert notices(d) == 0, d.chat_texts()
        d.wait_segment(f"You wrote: {value}", "completed")
        idle(d)
        with lock:
            assert seen == [value], seen  # once
    finally:
        store.close()

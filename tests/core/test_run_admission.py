"""Many people at once: runs on their own pool, in order, with visible queueing and fair
bounds, and people who take their time answering never hold anyone else back."""

from __future__ import annotations

import threading

from channelkit.agents.function import FunctionAgent, Question
from channelkit.core import ChannelConfig, UserInputPresentationResult
from channelkit.core.admission import RunAdmission
from channelkit.errors import ChannelBusy
from channelkit.testing import ScriptedBridge, final, gate, inbound, make_channel, wait_until

WAIT = 10.0


def gated_agent(release: threading.Event, started: list[str], lock: threading.Lock):
    def agent(turn):
        with lock:
            started.append(turn.text)
        assert release.wait(WAIT)
        turn.say(f"hello {turn.text}")
        return f"done {turn.text}"

    return FunctionAgent(agent)


def test_128_people_each_see_a_reaction_before_any_run_can_finish():
    """Default configuration: 64 runs start (their started event is the reaction), the
    other 64 are told at once that they are queued; every run then completes."""
    release = threading.Event()
    started: list[str] = []
    lock = threading.Lock()
    ch = make_channel(gated_agent(release, started, lock))
    try:
        handles = [
            ch.handle_inbound(inbound(f"p{i}", sender_id=f"user-{i}", chat_id=f"chat-{i}"))
            for i in range(128)
        ]

        def reacted(i: int) -> bool:
            chat = f"chat-{i}"
            started_here = any(e.type == "started" and e.chat_id == chat for e in ch.events)
            queued_here = any(c == chat and "Queued" in t for c, t, _ in ch.sent)
            return started_here or queued_here

        wait_until(lambda: all(reacted(i) for i in range(128)), WAIT)
        assert not release.is_set()  # nobody's run could finish: the reaction came first
        assert ch.run_stats == {"active": 64, "waiting": 0, "queued": 64}
        queued_chats = {c for c, t, _ in ch.sent if "Queued" in t}
        assert len(queued_chats) == 64
        # a queued person sees how many are ahead of them
        assert any("63 ahead" in t for _, t, _ in ch.sent)
        release.set()
        results = [h.result(WAIT) for h in handles]
        assert [r.status for r in results] == ["completed"] * 128
        assert len(started) == 128
        print(f"run pool threads: {ch.run_pool.thread_count}, hook pool: {ch.pool.thread_count}")
        assert ch.run_pool.thread_count <= 64  # never more threads than active runs
    finally:
        release.set()
        ch.close(timeout=5)


def test_queued_runs_start_in_arrival_order():
    release = threading.Event()
    started: list[str] = []
    lock = threading.Lock()
    ch = make_channel(gated_agent(release, started, lock), max_concurrent_runs=1)
    try:
        handles = [
            ch.handle_inbound(inbound(f"p{i}", sender_id=f"u{i}", chat_id=f"c{i}"))
            for i in range(6)
        ]
        wait_until(lambda: len(started) == 1 and len(ch.sent) == 5, WAIT)
        # each notice is sent on the hook pool: their order across chats is free, what
        # each person is told is not
        assert {chat: text for chat, text, _ in ch.sent} == {
            "c1": "Queued: your request starts as soon as a slot is free.",
            "c2": "Queued, 1 ahead: your request starts automatically.",
            "c3": "Queued, 2 ahead: your request starts automatically.",
            "c4": "Queued, 3 ahead: your request starts automatically.",
            "c5": "Queued, 4 ahead: your request starts automatically.",
        }
        release.set()
        for h in handles:
            assert h.result(WAIT).status == "completed"
        assert started == [f"p{i}" for i in range(6)]
    finally:
        release.set()
        ch.close(timeout=5)


def test_a_full_queue_tells_the_person_busy_and_changes_nothing_else():
    release = threading.Event()
    bridge = ScriptedBridge([gate(release), final("one")])
    ch = make_channel(bridge, max_concurrent_runs=1, max_queued_runs=1)
    try:
        first = ch.handle_inbound(inbound("one", sender_id="alice", chat_id="a"))
        assert bridge.wait_prompt(1)
        second = ch.handle_inbound(inbound("two", sender_id="bob", chat_id="b"))
        ch.wait_for_sent("Queued")
        third = ch.handle_inbound(inbound("three", sender_id="carol", chat_id="c"))
        result = third.result(1)
        assert result.status == "rejected" and isinstance(result.error, ChannelBusy)
        assert result.error.limit == "max_queued_runs"
        assert ch.wait_for_sent("Busy right now") and ("c", ch.sent[-1][1], None) in ch.sent
        assert ch.run_stats == {"active": 1, "waiting": 0, "queued": 1}
        release.set()
        assert first.result(WAIT).status == "completed"
        assert second.result(WAIT).status == "completed"
        assert ch.pool.wait_idle(WAIT)  # every lifecycle hook delivered
        assert {e.chat_id for e in ch.events} == {"a", "b"}  # none for the refused run
        assert [p[1] for p in bridge.prompts] == ["one", "two"]
    finally:
        release.set()
        ch.close(timeout=5)


def test_one_person_cannot_fill_the_queue():
    release = threading.Event()
    started: list[str] = []
    lock = threading.Lock()
    ch = make_channel(
        gated_agent(release, started, lock), max_concurrent_runs=1, max_queued_per_owner=2
    )
    try:
        # alice's runs share one session: one runs, two wait, the fourth is refused
        mine = [ch.handle_inbound(inbound(f"a{i}", sender_id="alice")) for i in range(4)]
        assert mine[3].result(1).status == "rejected"
        assert mine[3].result(1).error.limit == "max_queued_per_owner"  # type: ignore[union-attr]
        other = ch.handle_inbound(inbound("b0", sender_id="bob", chat_id="other"))
        assert not other.done()  # bob still gets a place in the queue
        release.set()
        assert [h.result(WAIT).status for h in mine[:3]] == ["completed"] * 3
        assert other.result(WAIT).status == "completed"
    finally:
        release.set()
        ch.close(timeout=5)


def test_one_busy_chat_cannot_fill_the_queue_for_other_chats():
    """Several people in one group chat fill its share of the queue (each has a place
    of their own, so no per-person bound applies); the next one in that chat is told
    busy there, while a person in another chat still gets a place."""
    release = threading.Event()
    started: list[str] = []
    lock = threading.Lock()
    ch = make_channel(
        gated_agent(release, started, lock), max_concurrent_runs=1, max_queued_per_chat=3
    )
    try:
        running = ch.handle_inbound(inbound("elsewhere", sender_id="zed", chat_id="other"))
        wait_until(lambda: started == ["elsewhere"], WAIT)
        group = [
            ch.handle_inbound(inbound(f"g{i}", sender_id=f"member-{i}", chat_id="g", is_group=True))
            for i in range(3)
        ]
        wait_until(lambda: sum(c == "g" and "Queued" in t for c, t, _ in ch.sent) == 3, WAIT)
        refused = ch.handle_inbound(
            inbound("g3", sender_id="member-3", chat_id="g", is_group=True)
        ).result(WAIT)
        assert refused.status == "rejected" and isinstance(refused.error, ChannelBusy)
        assert refused.error.limit == "max_queued_per_chat"
        ch.wait_for_sent("Busy right now")
        assert [c for c, t, _ in ch.sent if t.startswith("Busy right now")] == ["g"]
        elsewhere = ch.handle_inbound(inbound("h0", sender_id="member-3", chat_id="h"))
        wait_until(lambda: any(c == "h" and "Queued, 3 ahead" in t for c, t, _ in ch.sent), WAIT)
        assert not elsewhere.done()
        assert ch.run_stats == {"active": 1, "waiting": 0, "queued": 4}
        release.set()
        for handle in [running, *group, elsewhere]:
            assert handle.result(WAIT).status == "completed"
        assert started == ["elsewhere", "g0", "g1", "g2", "h0"]
    finally:
        release.set()
        ch.close(timeout=5)


def test_1000_pending_questions_do_not_hold_back_other_runs():
    """Runs waiting on a person are parked: with 4 run slots, 1,000 questions can be
    pending at once and a new person's run still starts at once."""
    contexts = []
    lock = threading.Lock()

    def presenter(ctx):
        with lock:
            contexts.append(ctx)
        return UserInputPresentationResult.PRESENTED

    def agent(turn):
        if turn.text == "quick":
            return "quick answer"
        answers = turn.ask([Question("Which region?", ["Beijing", "Shanghai"])])
        return f"{turn.text}: {answers['0']}"

    ch = make_channel(
        FunctionAgent(agent),
        presenter=presenter,
        max_concurrent_runs=4,
        max_workers=4,
        max_queued_runs=1000,
    )
    try:
        handles = [
            ch.handle_inbound(inbound(f"q{i}", sender_id=f"u{i}", chat_id=f"c{i}"))
            for i in range(1000)
        ]
        wait_until(lambda: len(contexts) == 1000, 60)
        assert ch.run_stats == {"active": 0, "waiting": 1000, "queued": 0}
        quick = ch.handle_inbound(inbound("quick", sender_id="newcomer", chat_id="n"))
        assert quick.result(WAIT).response == "quick answer"
        for ctx in contexts:
            assert ctx.respond(
                {
                    "outcome": {"outcome": "selected", "optionId": ctx.submit_option_id},
                    "answers": {"0": "Shanghai"},
                }
            )
        results = [h.result(30) for h in handles]
        assert all(r.status == "completed" for r in results)
        assert {r.response.split(": ")[1] for r in results} == {"Shanghai"}
        assert ch.run_stats == {"active": 0, "waiting": 0, "queued": 0}
    finally:
        ch.close(timeout=10)


def test_admission_withdraw_and_finish_free_their_places():
    started = []
    adm = RunAdmission(
        limit=1, max_queued=3, max_queued_per_owner=3, max_queued_per_chat=3, start=started.append
    )
    a = adm.admit("a", session="s1", owner="o1", chat="c")
    b = adm.admit("b", session="s2", owner="o2", chat="c")
    c = adm.admit("c", session="s1", owner="o1", chat="c")  # behind its own session's run
    assert [t.payload for t in started] == ["a"]
    assert adm.withdraw(b) and not adm.withdraw(b)
    adm.finish(a)
    assert [t.payload for t in started] == ["a", "c"]
    adm.park(c)  # waiting on a person: the slot is free
    d = adm.admit("d", session="s3", owner=None, chat="c")
    assert d.state == "active" and adm.active == 1 and adm.parked == 1
    adm.unpark(c)
    assert adm.active == 2  # an answered run never waits for a slot again
    for t in (c, d):
        adm.finish(t)
    assert (adm.active, adm.parked, adm.queued) == (0, 0, 0)


def test_config_rejects_a_run_pool_shared_with_hooks():
    import pytest
    from channelkit.core import ChannelBase
    from channelkit.errors import ConfigurationError
    from channelkit.runtime import WorkerPool

    pool = WorkerPool(2)
    try:
        with pytest.raises(ConfigurationError, match="run_executor"):
            ChannelBase(
                ChannelConfig(name="x"), ScriptedBridge([]), executor=pool, run_executor=pool
            )
    finally:
        pool.shutdown(timeout=2)

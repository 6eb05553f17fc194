"""Fencing with real processes: a DingTalk process stopped with SIGSTOP past its lease
(3 s in Redis's own time), between two card writes, has its cards finalized by the
other process; resumed with SIGCONT, it writes nothing to those cards (the status card
stays "Interrupted", the question stays expired), settles no answer sent to it or to
the other process, and stops its run."""

from __future__ import annotations

import os
import signal

from channelkit.testing import wait_until

from tests.multiprocess.test_dingtalk_processes_share_one_bot_through_redis import (
    bot,  # noqa: F401 (the fixture)
    card_in,
)

INTERRUPTED = "Interrupted, please retry."


def test_a_process_resumed_after_its_lease_was_taken_over_writes_and_settles_nothing(bot):  # noqa: F811
    emulator, start = bot
    owner, other = start(1), start(2)
    owner.message("ask", "cid-g-1")
    owner.message("hold", "cid-g-2")
    question = wait_until(lambda: card_in(emulator, "question", "pending"), 20)
    running = wait_until(lambda: card_in(emulator, "status", "running"), 20)
    cards = (question["id"], running["id"])
    # paused between card writes: a write the process had already decided to send when
    # it was stopped would land after SIGCONT (no token reaches the platform's card API)
    wait_until(lambda: "Working on it" in emulator.state()["views"][running["id"]]["content"], 20)
    os.kill(owner.process.pid, signal.SIGSTOP)
    try:
        wait_until(  # the lease expires in Redis; the other process takes over
            lambda: emulator.state()["views"][running["id"]]["state"] == "failed"
            and INTERRUPTED in emulator.state()["views"][running["id"]]["content"]
            and emulator.state()["views"][question["id"]]["state"] == "expired",
            3.0 + 5.0 + 5.0,
        )
    finally:
        os.kill(owner.process.pid, signal.SIGCONT)
    finalized = {track: dict(emulator.state()["views"][track]) for track in cards}
    writes = len([c for c in emulator.calls() if any(t in str(c["body"]) for t in cards)])

    # the person answers the expired question on the resumed process and on the other one
    assert owner.card(question["id"], "submit", {"0": "Beijing"}) == 200
    assert other.card(question["id"], "submit", {"0": "Beijing"}) == 200
    stopped = owner.log.with_name(owner.log.name + ".stopped")
    wait_until(lambda: stopped.exists() and "hold" in stopped.read_text(), 20)  # run stopped
    # its run's end went through (the reaction on the person's message is recalled last)
    wait_until(
        lambda: any(
            "cid-g-2" in str(c["body"]) for c in emulator.calls("/v1.0/robot/emotion/recall")
        ),
        20,
    )
    assert {track: emulator.state()["views"][track] for track in cards} == finalized
    late = [c for c in emulator.calls() if any(t in str(c["body"]) for t in cards)][writes:]
    assert late == []  # no card call of any kind on those cards
    assert owner.answers() == [] and other.answers() == []  # nothing settled

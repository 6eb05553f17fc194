"""A Weixin run is recorded before its agent starts: a process killed the moment the
agent begins (the first thing it does) still leaves the record a restarted process finds,
so the person is told the run was interrupted.

Before, the message was handed in (its run started on the run pool at once) and the
record was written after, on the polling thread: a kill in between lost the record, and
nobody told the person (a CI run of the serve kill test caught it under load). The
record's write is held here until the agent has looked (bounded), which the old order
let the agent win every time.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from channelkit.platforms.common.run_journal import RunJournal
from channelkit.testing import ScriptContext, ScriptedBridge, final

from tests.platforms.weixin.test_weixin_adapter import USER, Env, inbound, mock  # noqa: F401

HOLD_S = 0.5  # how long the record's write waits for the agent to have looked


def test_the_record_is_there_when_the_agent_starts(rt: Any, mock: Any, tmp_path: Path) -> None:  # noqa: F811
    path = tmp_path / "weixin-runs.json"
    looked = threading.Event()
    seen: list[list[dict[str, Any]]] = []

    def look(ctx: ScriptContext) -> None:
        # what a process started now (the old one killed) would find
        seen.append(RunJournal("weixin", path=str(path)).take_leftovers())
        looked.set()

    env = Env(rt, mock, ScriptedBridge([look, final("done")]), run_journal=str(path))
    journal = env.channel.run_journal
    write = journal.record

    def slow_record(key: str, record: Any) -> None:  # a slow disk
        looked.wait(HOLD_S)
        write(key, record)

    journal.record = slow_record  # type: ignore[method-assign]
    env.channel.handle_weixin_message(inbound("hi"))
    rt.wait_for(lambda: seen)
    ((found,),) = seen
    assert found["chat"] == USER
    rt.wait_for(lambda: env.texts() == ["done"])
    env.channel.close()

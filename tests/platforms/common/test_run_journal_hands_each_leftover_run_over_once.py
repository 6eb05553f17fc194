"""RunJournal: a run recorded and never ended is handed over once to the next process
(file or store); an ended run is not; the record set is bounded; a damaged file is
ignored with a warning, never an error."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from channelkit.core.types import ChannelPromptOwner, LifecycleEvent, LifecycleType
from channelkit.platforms.common.run_journal import RunJournal
from channelkit.state import MemoryStore


def test_a_file_journal_hands_a_leftover_run_to_the_next_process_once(tmp_path: Path) -> None:
    path = tmp_path / "runs.json"
    first = RunJournal("telegram", path=path)
    first.record("1:10", {"chat": "1"})
    first.record("1:11", {"chat": "1", "n": 2})
    first.done("1:10")  # ended: nobody to tell
    again = RunJournal("telegram", path=path)  # the next process
    assert again.take_leftovers() == [{"chat": "1", "n": 2}]
    assert RunJournal("telegram", path=path).take_leftovers() == []


def test_a_store_journal_hands_each_leftover_to_one_of_two_processes(tmp_path: Path) -> None:
    store = MemoryStore(namespace="bot")
    try:
        RunJournal("weixin", store=store).record("u:1", {"chat": "u"})
        one, two = RunJournal("weixin", store=store), RunJournal("weixin", store=store)
        assert one.take_leftovers() + two.take_leftovers() == [{"chat": "u"}]
        assert store.scan("weixin:inflight:") == []
    finally:
        store.close()


def test_the_file_keeps_the_newest_records_within_its_bound(tmp_path: Path) -> None:
    path = tmp_path / "runs.json"
    journal = RunJournal("telegram", path=path, max_records=3)
    for n in range(5):
        journal.record(f"k{n}", {"n": n})
    assert sorted(json.loads(path.read_text())) == ["k2", "k3", "k4"]


def test_a_damaged_file_is_ignored_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "runs.json"
    path.write_text("{not json", encoding="utf-8")
    caplog.set_level(logging.WARNING, logger="channelkit.platforms.common.run_journal")
    journal = RunJournal("telegram", path=path)
    assert journal.take_leftovers() == []
    assert any("not JSON" in r.getMessage() for r in caplog.records)
    journal.record("a", {"chat": "c"})  # the file is rewritten whole
    assert RunJournal("telegram", path=path).take_leftovers() == [{"chat": "c"}]


def test_without_a_store_or_a_file_nothing_is_kept() -> None:
    journal = RunJournal("telegram")
    assert not journal.enabled
    journal.record("a", {"chat": "c"})
    assert journal.take_leftovers() == []


def _event(
    kind: LifecycleType, message_id: str | None = "m1", owner: bool = True
) -> LifecycleEvent:
    return LifecycleEvent(
        type=kind,
        channel_name="feishu",
        chat_id="oc_1",
        session_id="s",
        run_id="r1",
        owner=ChannelPromptOwner("u1") if owner else None,
        message_id=message_id,
        thread_id="t1",
    )


@pytest.mark.parametrize(
    "end", [LifecycleType.COMPLETED, LifecycleType.FAILED, LifecycleType.CANCELLED]
)
def test_follow_records_a_persons_run_from_started_to_any_end(
    tmp_path: Path, end: LifecycleType
) -> None:
    path = tmp_path / "runs.json"
    journal = RunJournal("feishu", path=path)
    journal.follow(_event(LifecycleType.STARTED), {"group": True})
    assert json.loads(path.read_text()) == {
        "oc_1:m1": {"group": True, "chat": "oc_1", "thread": "t1", "owner": "u1", "run": "r1"}
    }
    journal.follow(_event(end))
    assert json.loads(path.read_text()) == {}


def test_follow_ignores_runs_without_a_person_or_a_message(tmp_path: Path) -> None:
    path = tmp_path / "runs.json"
    journal = RunJournal("feishu", path=path)
    journal.follow(_event(LifecycleType.STARTED, owner=False))
    journal.follow(_event(LifecycleType.STARTED, message_id=None))
    assert journal.take_leftovers() == []


def test_tell_leftovers_tells_each_cut_off_run_once_and_survives_a_failing_teller(
    tmp_path: Path,
) -> None:
    path = tmp_path / "runs.json"
    RunJournal("feishu", path=path).follow(_event(LifecycleType.STARTED))
    RunJournal("feishu", path=path).record("bad", {"chat": ""})  # no chat: skipped
    told: list[tuple[str, str | None]] = []
    count = RunJournal("feishu", path=path).tell_leftovers(
        lambda chat, thread, record: told.append((chat, thread))
    )
    assert (count, told) == (1, [("oc_1", "t1")])
    assert RunJournal("feishu", path=path).tell_leftovers(lambda *a: told.append(("x", None))) == 0

    RunJournal("feishu", path=path).follow(_event(LifecycleType.STARTED))

    def boom(chat: str, thread: str | None, record: dict[str, object]) -> None:
        raise RuntimeError("send failed")

    assert RunJournal("feishu", path=path).tell_leftovers(boom) == 0  # logged, not raised

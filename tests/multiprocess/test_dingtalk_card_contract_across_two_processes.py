"""The DingTalk card contract across two processes of one bot (real Redis): every card
callback is delivered to the process that does NOT own the run.

One pair of processes serves the whole module (each test uses its own conversation):
a streamed status card is finalized Completed; a submitted question continues on a new
card holding only its own segment's text; the form's Cancel button cancels the
question; a duplicate Stop after the run ended changes nothing; a click on a question
card whose run was cancelled (``/cancel``) is answered harmlessly; a Stop on an old
run's card never cancels a newer run in the same conversation; an unanswered question
card expires, and a late click on either process changes nothing (its own pair, with a
short card lifetime).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from channelkit.playground import EmulatorServer
from channelkit.testing import wait_until

from tests.multiprocess.test_dingtalk_processes_share_one_bot_through_redis import (
    APP_KEY,
    APP_SECRET,
    CARD_SECRET,
    Instance,
    stop_all,
    views,
)

LONG = 20.0  # a loaded 2-core CI machine


class Pair:
    def __init__(self, emulator: Any, owner: Instance, other: Instance) -> None:
        self.emulator, self.owner, self.other = emulator, owner, other

    def view(self, card_id: str) -> dict[str, Any]:
        return dict(self.emulator.state()["views"][card_id])

    def new_card(
        self, kind: str, state: str, seen: set[str], containing: str = ""
    ) -> dict[str, Any]:
        """The first ``kind`` card in ``state`` not in ``seen`` whose content has
        ``containing`` (waits for it)."""

        def fresh() -> dict[str, Any] | None:
            return next(
                (v for v in views(self.emulator, kind)
                 if v["state"] == state and v["id"] not in seen
                 and containing in str(v.get("content", ""))),
                None,
            )  # fmt: skip

        found = wait_until(fresh, LONG)
        return dict(found)

    def card_ids(self) -> set[str]:
        return set(self.emulator.state()["views"])


@pytest.fixture(scope="module")
def pair(redis_server: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    emulator = EmulatorServer(app_key=APP_KEY, app_secret=APP_SECRET, api_secret=CARD_SECRET)
    namespace = "mpc" + uuid.uuid4().hex[:8]
    logs = tmp_path_factory.mktemp("contract")
    made: list[Instance] = []
    try:
        made.append(Instance(emulator.url, redis_server.url, namespace, logs / "owner"))
        made.append(Instance(emulator.url, redis_server.url, namespace, logs / "other"))
        yield Pair(emulator.emulator, made[0], made[1])
    finally:
        stop_all(made)
        emulator.close()


def test_a_streamed_status_card_is_finalized_completed(pair: Pair) -> None:
    seen = pair.card_ids()
    pair.owner.message("ask", "cid-done")
    question = pair.new_card("question", "pending", seen)
    assert pair.other.card(question["id"], "submit", {"0": "Beijing"}) == 200
    done = wait_until(
        lambda: next(
            (v for v in views(pair.emulator, "status")
             if v["id"] not in seen and "Answer: Beijing" in v["content"]
             and v["state"] == "completed"),
            None,
        ),
        LONG,
    )  # fmt: skip
    assert done["statusLine"].lower().startswith("completed")


def test_a_submitted_question_continues_on_a_card_with_only_its_own_segment(pair: Pair) -> None:
    seen = pair.card_ids()
    pair.owner.message("seg", "cid-seg")
    question = pair.new_card("question", "pending", seen)
    first = wait_until(
        lambda: next(
            (v for v in views(pair.emulator, "status")
             if v["id"] not in seen and "Before the question" in v["content"]),
            None,
        ),
        LONG,
    )  # fmt: skip
    assert pair.other.card(question["id"], "submit", {"0": "Shanghai"}) == 200
    after = wait_until(
        lambda: next(
            (v for v in views(pair.emulator, "status")
             if v["id"] not in seen and "After: Shanghai" in v["content"]),
            None,
        ),
        LONG,
    )  # fmt: skip
    assert after["id"] != first["id"]
    assert "Before the question" not in after["content"]
    assert "After: Shanghai" not in pair.view(first["id"])["content"]
    assert pair.view(question["id"])["state"] == "submitted"


def test_the_form_cancel_button_cancels_the_question(pair: Pair) -> None:
    seen = pair.card_ids()
    answers = pair.owner.answers() + pair.other.answers()
    pair.owner.message("ask", "cid-cancel")
    question = pair.new_card("question", "pending", seen)
    assert pair.other.card(question["id"], "cancel", {}) == 200
    wait_until(lambda: pair.view(question["id"])["state"] == "cancelled", LONG)
    wait_until(
        lambda: all(v["state"] != "running" for v in views(pair.emulator, "status")
                    if v["id"] not in seen),
        LONG,
    )  # fmt: skip
    assert pair.owner.answers() + pair.other.answers() == answers  # nothing was chosen


def test_a_duplicate_stop_after_the_run_ended_changes_nothing(pair: Pair) -> None:
    seen = pair.card_ids()
    pair.owner.message("hold", "cid-dup-stop")
    live = pair.new_card("status", "running", seen)
    assert pair.other.card(live["id"], "btn_stop") == 200
    wait_until(lambda: pair.view(live["id"])["state"] == "stopped", LONG)
    before = pair.view(live["id"])
    calls = len(pair.emulator.calls())
    assert pair.other.card(live["id"], "btn_stop") == 200  # the tombstone answers it
    assert pair.owner.card(live["id"], "btn_stop") == 200
    assert pair.view(live["id"]) == before
    sent = [c for c in pair.emulator.calls()[calls:] if "Message" in c["path"]]
    assert sent == []  # nobody is told anything twice


def test_a_click_on_a_question_card_closed_by_cancel_is_answered_harmlessly(pair: Pair) -> None:
    seen = pair.card_ids()
    pair.owner.message("ask", "cid-closed")
    question = pair.new_card("question", "pending", seen)
    answers = pair.owner.answers() + pair.other.answers()
    pair.owner.message("/cancel", "cid-closed")  # the run ends: its question is closed
    wait_until(lambda: pair.view(question["id"])["state"] == "cancelled", LONG)
    before = pair.view(question["id"])
    assert pair.other.card(question["id"], "submit", {"0": "Beijing"}) == 200
    assert pair.owner.card(question["id"], "submit", {"0": "Beijing"}) == 200
    assert pair.view(question["id"]) == before
    assert pair.owner.answers() + pair.other.answers() == answers


def test_a_stop_on_an_old_runs_card_never_cancels_a_newer_run(pair: Pair) -> None:
    seen = pair.card_ids()
    pair.owner.message("hold", "cid-exact")
    old = pair.new_card("status", "running", seen)
    assert pair.other.card(old["id"], "btn_stop") == 200
    wait_until(lambda: pair.view(old["id"])["state"] == "stopped", LONG)
    seen = pair.card_ids()
    pair.owner.message("hold", "cid-exact")  # the same conversation: the same session
    # the newer run's own card (a queue notice may come first while the old run ends)
    new = pair.new_card("status", "running", seen, containing="Working on it")
    assert pair.other.card(old["id"], "btn_stop") == 200
    assert pair.owner.card(old["id"], "btn_stop") == 200
    # the newer run keeps streaming: give a wrongly routed cancel time to land
    with pytest.raises(AssertionError):
        wait_until(lambda: pair.view(new["id"])["state"] != "running", 1.5)
    assert pair.view(new["id"])["state"] == "running", pair.view(new["id"])
    assert pair.other.card(new["id"], "btn_stop") == 200  # its own card stops it
    wait_until(lambda: pair.view(new["id"])["state"] == "stopped", LONG)


def test_an_unanswered_question_card_expires_and_a_late_click_elsewhere_is_harmless(
    redis_server: Any, tmp_path: Any
) -> None:
    # its own pair: the question card lives 1.5 s (the shared pair's cards wait longer)
    emulator = EmulatorServer(app_key=APP_KEY, app_secret=APP_SECRET, api_secret=CARD_SECRET)
    namespace = "mpx" + uuid.uuid4().hex[:8]
    env = {"CHANNELKIT_TEST_QUESTION_TIMEOUT_MS": "1500"}
    made: list[Instance] = []
    try:
        for name in ("owner", "other"):
            made.append(Instance(emulator.url, redis_server.url, namespace, tmp_path / name, env))
        pair = Pair(emulator.emulator, made[0], made[1])
        seen = pair.card_ids()
        pair.owner.message("ask", "cid-expire")
        question = pair.new_card("question", "pending", seen)
        wait_until(lambda: pair.view(question["id"])["state"] == "expired", LONG)
        before = pair.view(question["id"])
        assert pair.other.card(question["id"], "submit", {"0": "Beijing"}) == 200
        assert pair.owner.card(question["id"], "submit", {"0": "Beijing"}) == 200
        assert pair.view(question["id"]) == before  # the expired card stays as it was
        assert pair.owner.answers() + pair.other.answers() == []  # nothing was chosen
    finally:
        stop_all(made)
        emulator.close()

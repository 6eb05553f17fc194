"""DingTalk approval cards: a tool permission as one single-choice question card."""

from __future__ import annotations

import json
import threading
from typing import Any

from channelkit.agents.base import PermissionOption, PermissionRequest
from channelkit.core.text import MSG_DENIED
from channelkit.platforms.common.deadlines import EXPIRY_MARGIN
from dingtalk_helpers import AdapterHarness

OWNER = "staff-1"
OPTIONS = (
    PermissionOption("allow", "Allow", "allow_once"),
    PermissionOption("always", "Always allow", "allow_always"),
    PermissionOption("reject", "Reject", "reject_once"),
)


def script_with(options: tuple[PermissionOption, ...]) -> Any:
    def script(bridge: Any, sid: str, text: str, sink: Any) -> str:
        event = bridge.answered.setdefault("perm-1", threading.Event())
        # Cancelling the run (the channel closing on an unanswered card) ends the wait too.
        bridge.cancel_events[sid] = event
        sink.response_boundary(sid)
        tool = {"toolCallId": "t-1", "kind": "execute", "title": "Run ls"}
        sink.permission_request(PermissionRequest("perm-1", sid, tool, options))
        assert event.wait(5), "neither answered nor cancelled"
        return "done"

    return script


def start(options: tuple[PermissionOption, ...] = OPTIONS) -> tuple[AdapterHarness, str]:
    h = AdapterHarness(script_with(options))
    h.send("go", sender=OWNER)
    h.wait_for(lambda: h.question_tracks())
    return h, h.question_tracks()[0]


def card_fields(h: AdapterHarness) -> list[dict[str, Any]]:
    create = next(c for c in h.api.ops("create") if "form" in c[1]["params"])
    return list(create[1]["params"]["form"]["fields"])


def click(h: AdapterHarness, track: str, choice: str | None, actor: str = OWNER) -> None:
    private: dict[str, Any] = {"actionIds": ["submit"], "params": {"form": {"0": choice}}}
    if choice is None:
        private = {"actionIds": ["cancel"], "params": {"user_cancel": "true"}}
    payload = {
        "type": "actionCallback",
        "outTrackId": track,
        "userId": actor,
        "content": json.dumps({"cardPrivateData": private}),
    }
    assert h.card_request(payload).status == 200


def terminal(h: AdapterHarness, track: str) -> dict[str, Any]:
    updates = [
        c[1]["params"]
        for c in h.api.ops("update")
        if c[1].get("out_track_id") == track and "card_status" in c[1]["params"]
    ]
    assert len(updates) == 1, updates  # ended once, in place
    return updates[0]


def test_card_offers_the_agents_options_as_one_single_choice_question() -> None:
    h, track = start()
    try:
        fields = card_fields(h)
        assert [(f["name"], f["type"]) for f in fields] == [("0", "CHECKBOX_GROUP")]
        labels = [o["text"] for o in fields[0]["options"]]
        assert labels == ["Allow", "Always allow", "Reject"]  # no "Other"
        assert not any("/approve" in t for t in h.api.texts())
    finally:
        h.close()


def test_submitting_allow_selects_that_option_once() -> None:
    h, track = start()
    try:
        click(h, track, "Allow")
        click(h, track, "Reject")  # a late second answer changes nothing
        h.idle()
        assert h.bridge.responses == [
            ("perm-1", {"outcome": {"outcome": "selected", "optionId": "allow"}})
        ]
        assert terminal(h, track)["card_status"] == "submitted"
    finally:
        h.close()


def test_cancel_selects_the_agents_reject_option() -> None:
    h, track = start()
    try:
        click(h, track, None)
        h.idle()
        assert h.bridge.responses == [
            ("perm-1", {"outcome": {"outcome": "selected", "optionId": "reject"}})
        ]
        assert terminal(h, track)["card_status"] == "cancelled"
    finally:
        h.close()


def test_the_cards_own_answer_is_shown_as_its_answer_not_as_another_surfaces() -> None:
    """Answered on the card, the card ends as a question card answered there does; the
    outcome line (``❌ Reject``) is for a request answered elsewhere (/deny). Which one
    shows must not depend on whether the request's outcome was recorded before the
    card's end was written (under load it often was, and the card's own answer then
    read as another surface's)."""
    for choice in ("Reject", "Allow", None):
        h = AdapterHarness(script_with(OPTIONS))
        try:
            # DingTalk shows the card before createAndDeliver answers, and the owner
            # answers it then: the answer is recorded before the card's end is written
            h.api.gates["create"] = created = threading.Event()
            h.send("go", sender=OWNER)
            track = h.wait_for(lambda h=h: h.question_tracks())[0]
            click(h, track, choice)
            h.wait_for(lambda h=h: h.bridge.responses)
            created.set()
            h.idle()
            assert len(h.bridge.responses) == 1
            shown = terminal(h, track)
            assert "❌" not in shown.get("question_desc", "")
            assert "✅" not in shown.get("question_desc", "")
            assert shown["card_status"] == ("cancelled" if choice is None else "submitted")
        finally:
            h.close()
    # answered elsewhere, the card names the winner
    h, track = start()
    try:
        h.send("/deny", sender=OWNER)
        h.idle()
        shown = terminal(h, track)
        assert "❌" in str(shown.get("question_desc", "")), shown
    finally:
        h.close()


def test_a_foreign_user_is_refused_and_the_owner_still_decides() -> None:
    h, track = start()
    try:
        click(h, track, "Allow", actor="staff-9")
        h.wait_for(lambda: len(h.api.texts()) >= 1)
        h.pool.wait_idle(2.0)
        assert h.bridge.responses == []
        assert h.channel.pending_request_ids() == ["perm-1"]
        h.send("/deny", sender=OWNER)
        h.idle()
        assert h.bridge.responses == [
            ("perm-1", {"outcome": {"outcome": "selected", "optionId": "reject"}})
        ]
        assert "❌ Reject" in terminal(h, track)["question_desc"]
    finally:
        h.close()


def test_a_submit_racing_the_owners_deny_has_one_winner_shown_on_the_card() -> None:
    winners: set[str] = set()
    for round_ in range(12):
        h, track = start()
        try:
            h.wait_for(
                lambda h=h: h.channel.presenter.questions.record("perm-1").state.state == "pending"
            )
            barrier = threading.Barrier(2)

            def press(h: AdapterHarness = h, track: str = track) -> None:
                barrier.wait(5)  # noqa: B023
                click(h, track, "Allow")

            t = threading.Thread(target=press)
            t.start()
            if round_ % 2:
                h.send("/deny", sender=OWNER)
                barrier.wait(5)
            else:
                barrier.wait(5)
                h.send("/deny", sender=OWNER)
            t.join(5)
            h.idle()
            assert len(h.bridge.responses) == 1
            shown = terminal(h, track)
            if h.bridge.responses[0][1]["outcome"]["optionId"] == "allow":
                winners.add("card")
                assert shown["card_status"] == "submitted" and MSG_DENIED not in h.api.texts()
            else:
                winners.add("deny")
                assert shown["card_status"] == "cancelled"  # the winner's state, never submitted
        finally:
            h.close()
    assert winners  # every round had exactly one winner, shown on the card


def test_expiry_on_the_fake_clock_ends_the_card_and_cancels_the_request() -> None:
    h, track = start()
    try:
        h.wait_for(lambda: h.channel.presenter.questions.record("perm-1").state.state == "pending")
        # the card's own timer (EXPIRY_MARGIN before core's deadline) first, then core's:
        # one jump past both would fire them at once, in either order
        h.advance(h.channel.permission_lifetime() - EXPIRY_MARGIN)
        h.advance(EXPIRY_MARGIN)
        assert h.bridge.responses == [("perm-1", {"outcome": {"outcome": "cancelled"}})]
        assert terminal(h, track)["card_status"] == "expired"
        click(h, track, "Allow")
        h.idle()
        assert len(h.bridge.responses) == 1
    finally:
        h.close()


def test_too_many_options_keep_the_text_prompt() -> None:
    many = tuple(PermissionOption(f"o{i}", f"Option {i}", "allow_once") for i in range(5))
    h = AdapterHarness(script_with(many))
    try:
        h.send("go", sender=OWNER)
        h.wait_for(lambda: any("/approve" in t for t in h.api.texts()))
        assert h.question_tracks() == []
        h.send("/approve", sender=OWNER)
        h.idle()
        assert h.bridge.responses == [
            ("perm-1", {"outcome": {"outcome": "selected", "optionId": "o0"}})
        ]
    finally:
        h.close()

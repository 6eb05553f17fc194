"""Answers racing on one request: exactly one wins, the agent hears it once, the card shows it.

Each race is repeated over many interleavings (fresh channel per round, the contenders
released together by a barrier). A card answer that loses ends in the winner's state
and is told once that the question was already answered; a winning ``/deny`` leaves the
card ``cancelled``, never ``submitted``.
"""

from __future__ import annotations

import json
import random
import threading
from functools import partial
from typing import Any

from channelkit.agents.base import PermissionOption, PermissionRequest
from channelkit.core import ChannelConfig
from channelkit.core.text import MSG_APPROVED, MSG_DENIED, MSG_NONE, MSG_NOT_PENDING
from channelkit.platforms.dingtalk.questions import ALREADY_ANSWERED_TEXT
from channelkit.testing import wait_until
from dingtalk_helpers import AdapterHarness

from tests.platforms._shared import RecordingContext as _Recording

ROUNDS = 50
OWNER = "staff-1"


def ask_script(bridge, sid, text, sink):
    sink.text_chunk(sid, "before question")
    bridge.ask(sink, sid, "req-1")
    sink.text_chunk(sid, "final answer")
    return "before questionfinal answer"


def permission_script(bridge, sid, text, sink):
    event = bridge.answered.setdefault("perm-1", threading.Event())
    sink.response_boundary(sid)
    sink.permission_request(
        PermissionRequest(
            "perm-1",
            sid,
            {"toolCallId": "t-perm-1", "kind": "execute", "title": "Run ls"},
            (
                PermissionOption("allow", "Allow", "allow_once"),
                PermissionOption("reject", "Reject", "reject_once"),
            ),
        )
    )
    assert event.wait(5), "permission never answered"
    return "done"


class Round:
    """One fresh channel with a live question card (or pending permission)."""

    def __init__(self, script: Any, **kw: Any) -> None:
        self.h = AdapterHarness(script, pool_size=8, run_pool_size=8, **kw)
        self.results: list[bool] = []
        self.lock = threading.Lock()
        self.contexts: list[_Recording] = []
        self.kinds: list[str] = []
        self.ts = int(self.h.clock.time() * 1000)
        present = self.h.channel.present_user_input_request

        def recording_present(ctx: Any) -> Any:
            wrapped = _Recording(ctx, self.results, self.lock)
            self.contexts.append(wrapped)
            return present(wrapped)

        self.h.channel.present_user_input_request = recording_present
        route = self.h.channel.route_card_callback

        def recording_route(body: Any) -> Any:
            result = route(body)
            with self.lock:
                self.kinds.append(result.outcome)
            return result

        self.h.channel.route_card_callback = recording_route

    def say(self, text: str, sender: str = OWNER) -> None:
        """A robot message with its own signed timestamp (signatures are one-use)."""
        with self.lock:
            self.ts += 1
            ts = str(self.ts)
        resp = self.h.robot_request(self.h.robot_payload(text, sender=sender), ts=ts)
        assert resp.status == 200

    def card(self, form: dict[str, Any]) -> None:
        track = self.h.question_tracks()[0]
        payload = {
            "type": "actionCallback",
            "outTrackId": track,
            "userId": OWNER,
            "content": json.dumps(
                {"cardPrivateData": {"actionIds": ["submit"], "params": {"form": form}}}
            ),
        }
        assert self.h.card_request(payload).status == 200

    def race(self, *contenders: Any, seed: int = 0) -> None:
        """Release ``contenders`` together; each first spins a seeded random while, so
        the rounds cover different interleavings."""
        barrier = threading.Barrier(len(contenders))
        rng = random.Random(seed)
        spins = [rng.randrange(0, 200_000) for _ in contenders]

        def run(fn: Any, spin: int) -> None:
            barrier.wait(5)
            for _ in range(spin):
                pass
            fn()

        threads = [
            threading.Thread(target=run, args=(fn, spin))
            for fn, spin in zip(contenders, spins, strict=True)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
        assert not any(t.is_alive() for t in threads)
        self.settle()

    def settle(self) -> None:
        assert self.h.wait_for(lambda: "final answer" in self.finals() or self.done())
        self.h.idle()

    def done(self) -> bool:
        return (
            self.h.channel.pending_request_ids() == [] and self.h.channel.map_sizes()["runs"] == 0
        )

    def finals(self) -> list[str]:
        return [
            c[1]["params"].get("content", "")
            for c in self.h.api.ops("update")
            if c[1]["params"].get("flowStatus") == 3
        ]

    def question_terminals(self) -> list[dict[str, Any]]:
        track = self.h.question_tracks()[0]
        return [
            c[1]["params"]
            for c in self.h.api.ops("update")
            if c[1]["out_track_id"] == track and "card_status" in c[1]["params"]
        ]

    def question_terminal(self) -> dict[str, Any]:
        """The one terminal write to the question card (waits for it: a projection handed
        on by a thread the pools do not track may still be on its way)."""
        terminals = wait_until(self.question_terminals, what="the question card's terminal write")
        assert len(terminals) == 1, terminals
        return terminals[0]

    def close(self) -> None:
        self.h.close()


REPLIES = (MSG_APPROVED, MSG_DENIED, MSG_NONE, MSG_NOT_PENDING)


def pending_is(r: Round, ids: list[str]) -> bool:
    return r.h.channel.pending_request_ids() == ids


def replied_twice(r: Round) -> bool:
    return sum(t in REPLIES for t in r.h.api.texts()) == 2


def direct_answer(answer: str) -> dict[str, Any]:
    """An answer given through another surface (straight to the request's responder)."""
    return {
        "outcome": {"outcome": "selected", "optionId": "proceed_once"},
        "answers": {"0": answer, "1": "Logs"},
    }


def start_question() -> Round:
    r = Round(ask_script)
    r.say("go")
    assert r.h.wait_for(lambda: len(r.h.question_tracks()) == 1 and bool(r.contexts))
    questions = r.h.channel.presenter.questions
    assert r.h.wait_for(lambda: questions.record("req-1").state.state == "pending")
    return r


def test_card_submit_racing_the_owners_deny_shows_the_winner():
    outcomes = set()
    for seed in range(ROUNDS):
        r = start_question()
        try:
            r.race(
                partial(r.card, {"0": "Beijing", "1": ["Logs"]}), partial(r.say, "/deny"), seed=seed
            )
            responses = r.h.bridge.responses
            assert len(responses) == 1  # one agent call
            texts = r.h.api.texts()
            claimed = r.kinds.count("accepted")
            terminal = r.question_terminal()  # one terminal card write
            if "answers" in responses[0][1]:
                outcomes.add("card")
                assert responses[0][1]["answers"] == {"0": "Beijing", "1": "Logs"}
                assert terminal["card_status"] == "submitted"
                assert "Beijing" in terminal["question_desc"]
                assert {MSG_NOT_PENDING, MSG_NONE} & set(texts) and MSG_DENIED not in texts
                assert ALREADY_ANSWERED_TEXT not in texts
            else:
                outcomes.add("deny")
                assert responses[0][1]["outcome"]["optionId"] == "cancel"
                assert terminal["card_status"] == "cancelled"  # never submitted
                assert MSG_DENIED in texts and MSG_NOT_PENDING not in texts
                assert texts.count(ALREADY_ANSWERED_TEXT) == claimed
            # the card's own respond() said True exactly when the card won; a claimed card
            # that lost was refused, or not asked at all when the deny had settled the
            # request before the card's responder started (the shared AnswerRace)
            if "answers" in responses[0][1]:
                assert r.results == [True]
            else:
                assert r.results == [False] * len(r.results) and len(r.results) <= claimed
        finally:
            r.close()
    assert outcomes  # at least one interleaving ran to the end


def test_approve_and_deny_from_two_people_in_a_shared_session_one_wins():
    shared = ChannelConfig(name="dingtalk", session_scope="chat")
    for seed in range(ROUNDS):
        r = Round(permission_script, channel_config=shared)
        try:
            r.say("go")
            assert r.h.wait_for(partial(pending_is, r, ["perm-1"]))
            r.race(
                partial(r.say, "/approve", "staff-1"), partial(r.say, "/deny", "staff-2"), seed=seed
            )
            assert r.h.wait_for(partial(replied_twice, r))
            r.h.idle()
            responses = r.h.bridge.responses
            assert len(responses) == 1
            texts = r.h.api.texts()
            won = responses[0][1]["outcome"]["optionId"]
            assert won in ("allow", "reject")
            winner_reply = MSG_APPROVED if won == "allow" else MSG_DENIED
            loser_reply = MSG_DENIED if won == "allow" else MSG_APPROVED
            assert texts.count(winner_reply) == 1
            # the loser hears that nothing is pending any more (in flight or gone)
            assert texts.count(MSG_NOT_PENDING) + texts.count(MSG_NONE) == 1
            assert loser_reply not in texts
        finally:
            r.close()


def test_32_different_answers_at_once_one_wins_and_the_card_shows_it():
    for seed in range(ROUNDS):
        r = start_question()
        try:
            ctx = r.contexts[0]

            contenders = [
                partial(r.card, {"0": "__ck_other__", "0_other": f"card-{i}", "1": ["Logs"]})
                if i % 2
                else partial(ctx.respond, direct_answer(f"direct-{i}"))
                for i in range(32)
            ]
            r.race(*contenders, seed=seed)
            responses = r.h.bridge.responses
            assert len(responses) == 1  # one agent call
            assert r.results.count(True) == 1  # exactly one respond() said True
            winner = responses[0][1]["answers"]["0"]
            terminal = r.question_terminal()
            texts = r.h.api.texts()
            if winner.startswith("card-"):
                assert terminal["card_status"] == "submitted"
                assert f"card\\-{winner[5:]}" in terminal["question_desc"]
                assert ALREADY_ANSWERED_TEXT not in texts
            else:
                # answered elsewhere: the card says so, never "submitted"
                assert terminal["card_status"] == "expired"
                assert terminal["question_desc"] == "Resolved outside this card."
                assert texts.count(ALREADY_ANSWERED_TEXT) == r.kinds.count("accepted")
            assert r.kinds.count("accepted") <= 1
        finally:
            r.close()


# -- the same, one step at a time (presenter level, fake clock) -----------------------------


class _Elsewhere:
    """A responder that another surface already holds: ``respond()`` is False at once."""

    def __init__(self, ctx: Any) -> None:
        self._ctx = ctx

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ctx, name)

    def respond(self, response: Any) -> bool:
        return False


def _claimed_card(h: Any) -> tuple[Any, Any]:
    from channelkit.platforms.dingtalk.ingress import CardCallback

    h.run()
    ctx = h.ctx()
    assert h.presenter.present_input(_Elsewhere(ctx)) == "presented"
    track = h.api.ops("create")[-1][1]["out_track_id"]
    result = h.presenter.route_callback(
        CardCallback(track, "submit", "owner-1", {"0": "Beijing", "1": "Logs"}, True)
    )
    assert result.outcome == "accepted"
    return ctx, result


def _terminal_updates(h: Any) -> list[dict[str, Any]]:
    return [c[1]["params"] for c in h.api.ops("update") if "card_status" in c[1]["params"]]


def test_a_lost_card_waits_for_the_winners_settlement(harness):
    h = harness()
    ctx, result = _claimed_card(h)
    result.run_after()  # False: the winner's settlement is still on its way
    assert _terminal_updates(h) == [] and h.fallbacks == []
    ctx.settle("cancelled")  # the winning /deny lands
    assert [u["card_status"] for u in _terminal_updates(h)] == ["cancelled"]
    assert [text for _, text, _ in h.fallbacks] == [ALREADY_ANSWERED_TEXT]
    assert h.presenter.questions.live_count == 0


def test_a_card_claimed_after_another_answer_won_shows_that_answer(harness):
    h = harness()
    ctx, result = _claimed_card(h)
    ctx.settle("resolved_outside_presenter")  # answered elsewhere before the card's turn
    result.run_after()
    assert _terminal_updates(h) == [
        {
            "card_status": "expired",
            "question_desc": "Resolved outside this card.",
            "form_btn_text": "Expired",
        }
    ]
    assert [text for _, text, _ in h.fallbacks] == [ALREADY_ANSWERED_TEXT]


def test_a_lost_card_whose_winner_never_settles_ends_unavailable_at_its_deadline(harness):
    h = harness(timeout=10.0)
    _ctx, result = _claimed_card(h)
    result.run_after()
    h.advance(9.0)
    assert _terminal_updates(h) == []
    h.advance(2.0)
    assert [u["question_desc"] for u in _terminal_updates(h)] == [
        "This question is no longer available."
    ]
    assert h.fallbacks == []  # nobody is known to have won
    assert h.presenter.questions.live_count == 0


def test_a_run_cancelled_while_the_card_lost_tells_nothing_more(harness):
    h = harness()
    ctx, result = _claimed_card(h)
    result.run_after()
    ctx.settle("run_cancelled")
    assert [u["card_status"] for u in _terminal_updates(h)] == ["cancelled"]
    assert h.fallbacks == []

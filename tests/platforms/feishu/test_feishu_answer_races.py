"""Answers racing on one Feishu request: one wins, the agent hears it once, the card shows it.

Each race is repeated over many interleavings (a fresh channel per round, the
contenders released together by a barrier, each after a seeded random spin). A form
answer that loses ends in the winner's state and the chat is told once that the question
was already answered; a winning ``/deny`` leaves the form cancelled, never submitted.
"""

from __future__ import annotations

import json
import random
import threading
from functools import partial
from typing import Any

from channelkit.agents.function import FunctionAgent, Question, Turn
from channelkit.core import ChannelConfig, InboundMessage
from channelkit.core.text import MSG_APPROVED, MSG_DENIED, MSG_NONE, MSG_NOT_PENDING
from channelkit.platforms.feishu.api import FeishuApi
from channelkit.platforms.feishu.cards import STRINGS
from channelkit.testing import wait_until
from feishu_helpers import (
    FakeFeishu,
    acking_like_the_web_layer,
    card_action,
    channel_on,
    request,
)

from tests.platforms._shared import RecordingContext as _Recording

ROUNDS = 50
OWNER = "ou_owner"
ALREADY_ANSWERED = STRINGS["zh"]["already_answered"]
LABELS = {"submitted": "*已提交*", "cancelled": "*已取消*", "expired": "*已过期*"}
REPLIES = (MSG_APPROVED, MSG_DENIED, MSG_NONE, MSG_NOT_PENDING)
QUESTIONS = [
    Question("Which region?", ["Beijing", "Shanghai"], header="Region"),
    Question("What?", ["Logs", "Metrics", "Traces"], header="Signals", multi_select=True),
]


class Round:
    """One fresh channel whose run is waiting on a question (or a permission)."""

    def __init__(
        self, rt: Any, api: FeishuApi, fake: FakeFeishu, *, permission: bool = False, **kw: Any
    ) -> None:
        self.rt = rt
        self.fake = fake
        self.start = len(fake.calls)
        self.outcome: list[Any] = []
        self.done = threading.Event()
        self.results: list[bool] = []
        self.agent_calls: list[Any] = []
        self.contexts: list[_Recording] = []
        self.lock = threading.Lock()

        def behaviour(turn: Turn) -> str:
            try:
                if permission:
                    self.outcome.append(turn.request_permission("Run ls"))
                else:
                    self.outcome.append(turn.ask(QUESTIONS))
            except Exception as exc:
                self.outcome.append(type(exc).__name__)
            finally:
                self.done.set()
            return "done"

        bridge = FunctionAgent(behaviour, question_timeout=600.0, scheduler=rt.scheduler)
        self.ch = channel_on(rt, api, bridge, channel_config=ChannelConfig(name="feishu", **kw))
        acking_like_the_web_layer(self.ch)
        respond = self.ch.bridge.respond_to_permission

        def counting(request_id: str, response: Any) -> bool:
            with self.lock:
                self.agent_calls.append(response)
            return respond(request_id, response)

        self.ch.bridge.respond_to_permission = counting  # type: ignore[method-assign]
        present = self.ch.present_user_input_request

        def recording_present(ctx: Any) -> Any:
            wrapped = _Recording(ctx, self.results, self.lock)
            self.contexts.append(wrapped)
            return present(wrapped)  # type: ignore[arg-type]

        self.ch.present_user_input_request = recording_present  # type: ignore[method-assign]
        self.handle = self.ch.handle_inbound(
            InboundMessage("feishu", "oc_chat", OWNER, "go", message_id="om_in1")
        )

    # -- surfaces ------------------------------------------------------------------------
    def command(self, text: str, sender: str = OWNER) -> None:
        self.ch.handle_inbound(InboundMessage("feishu", "oc_chat", sender, text)).result(5.0)

    def form(self, form_value: dict[str, Any]) -> str:
        record = self.ch.questions.get(self.contexts[0].request_id)
        message_id = record.message_id if record is not None else "om_gone"
        body = card_action(
            {"action": "ck_submit", "request": self.contexts[0].request_id},
            form_value=form_value,
            message_id=message_id or "om_gone",
        )
        response = self.ch.handle_card_request(request(body))
        return str(json.loads(response.body).get("toast", {}).get("type"))

    def race(self, *contenders: Any, seed: int) -> None:
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
        assert self.done.wait(5)
        assert self.handle.result(5.0).status == "completed"
        self.rt.settle()

    # -- what the person sees ----------------------------------------------------------
    def calls(self) -> list[Any]:
        return self.fake.calls[self.start :]

    def texts(self) -> list[str]:
        return [
            json.loads(c.body["content"])["text"]
            for c in self.calls()
            if c.op == "send" and c.body.get("msg_type") == "text"
        ]

    def form_terminals(self) -> list[str]:
        """The terminal card JSON written to the form message, in order."""
        form_ids = [
            f"om_{i + 1}"
            for i, c in enumerate(self.fake.calls)
            if i >= self.start
            and c.op == "send"
            and c.card
            and c.card["body"]["elements"][0].get("tag") == "form"
        ]
        assert len(form_ids) == 1
        return [
            json.dumps(c.card, ensure_ascii=False)
            for c in self.calls()
            if c.op == "patch" and c.path.endswith("/" + form_ids[0])
        ]

    def form_terminal(self) -> str:
        """The one terminal card written to the form.

        Waits for it: the pools were idle when the race ended, but a projection handed on
        by a thread the pools do not track may still be on its way. More than one
        terminal write, or none within the wait, fails.
        """
        terminals = wait_until(self.form_terminals, what=f"the form's terminal card ({self})")
        assert len(terminals) == 1, terminals
        return terminals[0]

    def __str__(self) -> str:
        ctx = self.contexts[0] if self.contexts else None
        record = self.ch.questions.get(ctx.request_id) if ctx is not None else None
        if record is None:
            return f"record gone, tombstone {ctx and self.ch.questions.tombstone(ctx.request_id)}"
        fields = ("terminal", "claim_action")
        return f"cell {record.cell.state}, settled as {record.race.settled_as!r}, " + ", ".join(
            f"{name}={getattr(record, name, None)!r}" for name in fields
        )

    def close(self) -> None:
        self.ch.close(timeout=2.0)


def question_round(rt: Any, api: FeishuApi, fake: FakeFeishu) -> Round:
    r = Round(rt, api, fake)
    wait_until(lambda: bool(r.contexts))
    wait_until(partial(_pending, r))
    return r


def _pending(r: Round) -> bool:
    record = r.ch.questions.get(r.contexts[0].request_id)
    return record is not None and record.cell.state == "pending"


def test_form_submit_racing_the_owners_deny_shows_the_winner(
    rt: Any, api: FeishuApi, fake: FakeFeishu
) -> None:
    toasts: list[str] = []
    for seed in range(ROUNDS):
        r = question_round(rt, api, fake)
        try:
            submit = partial(_submit_into, r, toasts, {"0": "0", "1": ["1"]})
            r.race(submit, partial(r.command, "/deny"), seed=seed)
            assert len(r.agent_calls) == 1  # one agent call
            terminal = r.form_terminal()  # one terminal card write
            texts = r.texts()
            claimed = toasts.pop() == "success"
            if isinstance(r.outcome[0], dict):
                assert r.outcome == [{"0": "Beijing", "1": "Metrics"}]
                assert r.results == [True]
                assert LABELS["submitted"] in terminal and "Metrics" in terminal
                assert MSG_DENIED not in texts and ALREADY_ANSWERED not in texts
            else:
                assert r.outcome == ["QuestionCancelled"]
                assert True not in r.results
                assert LABELS["cancelled"] in terminal and LABELS["submitted"] not in terminal
                assert MSG_DENIED in texts
                assert texts.count(ALREADY_ANSWERED) == (1 if claimed else 0)
        finally:
            r.close()


def test_approve_and_deny_from_two_people_in_a_shared_session_one_wins(
    rt: Any, api: FeishuApi, fake: FakeFeishu
) -> None:
    for seed in range(ROUNDS):
        r = Round(rt, api, fake, permission=True, session_scope="chat")
        try:
            wait_until(lambda: bool(r.ch.pending_request_ids()))  # noqa: B023
            r.race(
                partial(r.command, "/approve", "ou_alice"),
                partial(r.command, "/deny", "ou_bob"),
                seed=seed,
            )
            assert len(r.agent_calls) == 1
            texts = r.texts()
            approved = r.outcome[0].allowed
            winner, loser = (MSG_APPROVED, MSG_DENIED) if approved else (MSG_DENIED, MSG_APPROVED)
            assert texts.count(winner) == 1 and loser not in texts
            assert texts.count(MSG_NOT_PENDING) + texts.count(MSG_NONE) == 1
        finally:
            r.close()


def test_32_different_answers_at_once_one_wins_and_the_card_shows_it(
    rt: Any, api: FeishuApi, fake: FakeFeishu
) -> None:
    for seed in range(ROUNDS):
        r = question_round(rt, api, fake)
        try:
            ctx = r.contexts[0]
            toasts: list[str] = []
            contenders = [
                partial(_submit_into, r, toasts, {"0": "0", "0_other": f"card-{i}", "1": ["0"]})
                if i % 2
                else partial(ctx.respond, _direct(ctx, f"direct-{i}"))
                for i in range(32)
            ]
            r.race(*contenders, seed=seed)
            assert len(r.agent_calls) == 1  # one agent call
            assert r.results.count(True) == 1  # exactly one respond() said True
            winner = r.outcome[0]["0"]
            terminal = r.form_terminal()
            texts = r.texts()
            claimed = toasts.count("success")
            assert claimed <= 1
            if winner.startswith("card-"):
                shown = winner.replace("-", "&#45;")  # escaped for the card's Markdown
                assert LABELS["submitted"] in terminal and shown in terminal
                assert ALREADY_ANSWERED not in texts
            else:
                # answered elsewhere: the form says so, never "submitted"
                assert LABELS["expired"] in terminal and LABELS["submitted"] not in terminal
                assert texts.count(ALREADY_ANSWERED) == claimed
        finally:
            r.close()


def _submit_into(r: Round, toasts: list[str], form_value: dict[str, Any]) -> None:
    toasts.append(r.form(form_value))


def _direct(ctx: Any, answer: str) -> dict[str, Any]:
    """An answer given through another surface (straight to the request's responder)."""
    return {
        "outcome": {"outcome": "selected", "optionId": ctx.submit_option_id},
        "answers": {"0": answer, "1": "Logs"},
    }


# -- the same, one step at a time (presenter level, fake clock) -----------------------------


def _claimed_form(rt: Any, api: FeishuApi, fake: FakeFeishu) -> tuple[Any, Any, Any]:
    from test_feishu_questions import FakeCtx, make, submit

    class Elsewhere(FakeCtx):
        """A responder another surface already holds: ``respond()`` is False at once."""

        def respond(self, response: Any) -> bool:
            return False

    p = make(rt, api, fake)
    ctx = Elsewhere()
    p.present(ctx)
    result = p.handle_action(submit({"0": "0", "1": ["1"]}))
    assert result.outcome == "accepted" and result.after != ()
    return p, ctx, result


def _form_labels(fake: FakeFeishu) -> list[str]:
    return [str(c.card["body"]["elements"][-1]["content"]) for c in fake.ops("patch")]


def test_a_lost_form_waits_for_the_winners_settlement(
    rt: Any, api: FeishuApi, fake: FakeFeishu
) -> None:
    from channelkit.core.types import SettlementReason

    p, ctx, result = _claimed_form(rt, api, fake)
    result.run_after()
    rt.settle()
    assert _form_labels(fake) == [] and p.texts == []
    ctx.settle(SettlementReason.CANCELLED)  # the winning /deny lands
    rt.settle()
    assert _form_labels(fake) == [LABELS["cancelled"]]
    assert p.texts == [("oc_chat", ALREADY_ANSWERED)]
    assert p.get("req-1") is None


def test_a_form_claimed_after_another_answer_won_shows_that_answer(
    rt: Any, api: FeishuApi, fake: FakeFeishu
) -> None:
    from channelkit.core.types import SettlementReason

    p, ctx, result = _claimed_form(rt, api, fake)
    ctx.settle(SettlementReason.RESOLVED_OUTSIDE_PRESENTER)
    result.run_after()
    rt.settle()
    assert _form_labels(fake) == [LABELS["expired"]]
    assert p.texts == [("oc_chat", ALREADY_ANSWERED)]


def test_a_lost_form_whose_winner_never_settles_expires_at_its_deadline(
    rt: Any, api: FeishuApi, fake: FakeFeishu
) -> None:
    p, _ctx, result = _claimed_form(rt, api, fake)
    result.run_after()
    rt.settle()
    rt.advance(260.0)
    assert _form_labels(fake) == []
    rt.advance(20.0)
    assert _form_labels(fake) == [LABELS["expired"]]
    assert p.texts == [] and p.get("req-1") is None
